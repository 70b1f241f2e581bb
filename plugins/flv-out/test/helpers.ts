/**
 * A gateway with flv-out and a stand-in ingest (open succeeds; the test publishes into the request's bus stream
 * itself), and players of every kind: node's HTTP client, ws, and bare sockets for what node's client does not do.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { WebSocket } from 'ws';
import { definePlugin, videoUnit, type AccessUnit, type Publisher } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { FLV_PLAYERS, type FlvPlayers, type PlayerStats } from '../service';
import { parseFlv, type ParsedFlv, type ReadTag } from '../../../test/support/flv-reader';
import { requireTool } from '../../../test/support/tools';
import { until } from '../../../test/support/until';

export const HOST = '127.0.0.1';
export { until };

/**
 * Frame i: an H.264 slice of `size` bytes after its NAL header, every one of them i & 0xff (so a byte from another
 * frame shows), a key frame every 30, 40 ms apart.
 */
export function filledFrame(i: number, size: number): AccessUnit {
  const payload = Buffer.alloc(5 + size, i & 0xff);
  payload.writeUInt32BE(1, 0);
  payload[4] = i % 30 === 0 ? 0x65 : 0x41;
  return videoUnit({ codec: 'h264', dts: 1000 + i * 40, keyframe: i % 30 === 0, payload });
}

export interface FlvGateway {
  gw: TestGateway;
  flv: FlvPlayers;
  port: number;
  /** opens a live request of sim/chan; its play path (with reqId and token) and its bus stream */
  open(sim: string, chan?: number, token?: string): Promise<{ reqId: string; path: string; stream: string }>;
  /** a publisher on a request's bus stream */
  publisher(stream: string): Publisher;
  stats(id: string): PlayerStats | undefined;
  stop(): Promise<void>;
}

export async function startFlvGateway(flvOut: Record<string, unknown> = {}, gateway: Record<string, unknown> = {}, captureLogs = false): Promise<FlvGateway> {
  let flv: FlvPlayers | undefined;
  const probe = definePlugin({
    name: 'flv-probe',
    requires: ['flv-out'],
    uses: [FLV_PLAYERS],
    setup(ctx) {
      flv = ctx.services.get(FLV_PLAYERS);
    },
  });
  const stub = stubMediaPlugin({ fmts: [] });
  const gw = await startTestGateway({
    plugins: [stub, { name: 'flv-out', config: { schemes: ['http', 'ws'], ...flvOut } }, { name: 'flv-probe', def: probe }],
    gateway,
    captureLogs,
  });
  const players = flv!;
  return {
    gw,
    flv: players,
    port: players.port,
    async open(sim, chan = 1, token = 'good') {
      const o = await gw.openStream({ simNo: sim, chanId: chan, token, keepIntv: 600 });
      const url = new URL(o.playUrl);
      return { reqId: o.reqId, path: url.pathname + url.search, stream: o.streamName };
    },
    publisher(stream) {
      const s = gw.bus.get(stream);
      assert.ok(s, `no bus stream ${stream}`);
      return s.attachPublisher();
    },
    stats: (id) => players.playerStats().find((p) => p.id === id),
    stop: () => gw.stop(),
  };
}

/** A play path with the token swapped. */
export function withToken(p: string, token: string): string {
  return p.replace(/token=[^&]*/, `token=${token}`);
}

/** The id of the player that appears (in the service's list) while `connect` runs. */
export async function newPlayer(flv: FlvPlayers, connect: () => void, pick: (p: PlayerStats) => boolean = () => true): Promise<string> {
  const before = new Set(flv.playerStats().map((p) => p.id));
  connect();
  let id: string | undefined;
  await until(() => (id = flv.playerStats().find((p) => !before.has(p.id) && pick(p))?.id) !== undefined, 'the player to start');
  return id!;
}

export const videoFrames = (tags: ReadTag[]): ReadTag[] => tags.filter((t) => t.type === 9 && !t.sequenceHeader);

export interface HttpPlay {
  status: Promise<number>;
  body: Promise<Buffer>;
  /** what arrived so far */
  data(): Buffer;
  req: http.ClientRequest;
}

export function httpPlay(port: number, urlPath: string, method = 'GET'): HttpPlay {
  const chunks: Buffer[] = [];
  let resolveStatus!: (s: number) => void;
  const status = new Promise<number>((r) => {
    resolveStatus = r;
  });
  let req!: http.ClientRequest;
  const body = new Promise<Buffer>((resolve, reject) => {
    req = http.request({ host: HOST, port, path: urlPath, method, agent: false }, (res) => {
      resolveStatus(res.statusCode ?? 0);
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  body.catch(() => undefined);
  return { status, body, data: () => Buffer.concat(chunks), req };
}

export interface WsPlay {
  ws: WebSocket;
  closed: Promise<{ code: number; body: Buffer }>;
  data(): Buffer;
}

export function wsPlay(port: number, urlPath: string): WsPlay {
  const ws = new WebSocket(`ws://${HOST}:${port}${urlPath}`);
  const chunks: Buffer[] = [];
  ws.on('message', (m: Buffer) => chunks.push(m));
  const closed = new Promise<{ code: number; body: Buffer }>((resolve, reject) => {
    ws.on('close', (code) => resolve({ code, body: Buffer.concat(chunks) }));
    ws.on('error', reject);
  });
  closed.catch(() => undefined);
  return { ws, closed, data: () => Buffer.concat(chunks) };
}

export interface RawPlay {
  sock: net.Socket;
  data(): Buffer;
  closed: Promise<void>;
}

/** A player on a bare socket, for requests node's client does not make (HTTP/1.0, pipelining) or a peer that stops reading. */
export function rawPlay(port: number, request: string): RawPlay {
  const chunks: Buffer[] = [];
  const sock = net.connect(port, HOST, () => sock.write(request));
  sock.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((resolve) => sock.on('close', () => resolve()));
  sock.on('error', () => undefined);
  return { sock, data: () => Buffer.concat(chunks), closed };
}

export interface RawResponse {
  status: number;
  head: string;
  body: Buffer;
  next: number;
}

/** The HTTP/1.x response at `at` in raw bytes, chunked or not; undefined while incomplete. */
export function responseAt(raw: Buffer, at: number, closed: boolean): RawResponse | undefined {
  const headEnd = raw.indexOf('\r\n\r\n', at);
  if (headEnd < 0) return undefined;
  const head = raw.subarray(at, headEnd).toString('latin1');
  const status = Number(head.split(' ')[1]);
  const p = headEnd + 4;
  if (status === 204) return { status, head, body: Buffer.alloc(0), next: p };
  if (!/\r\ntransfer-encoding: *chunked/i.test(head)) return closed ? { status, head, body: raw.subarray(p), next: raw.length } : undefined;
  const c = chunksAt(raw, p);
  return c.next < 0 ? undefined : { status, head, body: Buffer.concat(c.parts), next: c.next };
}

/**
 * The chunks of a chunked HTTP/1.1 body from `at`, each one's framing checked: the complete ones so far, and where
 * the body ends after its last (zero) chunk, -1 while that has not come.
 */
export function chunksAt(raw: Buffer, at: number): { parts: Buffer[]; next: number } {
  const parts: Buffer[] = [];
  let p = at;
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', p);
    if (lineEnd < 0) return { parts, next: -1 };
    const line = raw.subarray(p, lineEnd).toString('latin1');
    assert.match(line, /^[0-9a-f]+$/, 'chunk size line');
    const size = parseInt(line, 16);
    if (raw.length < lineEnd + 4 + size) return { parts, next: -1 };
    assert.equal(raw.subarray(lineEnd + 2 + size, lineEnd + 4 + size).toString('latin1'), '\r\n', 'CRLF after a chunk');
    if (size === 0) return { parts, next: lineEnd + 4 };
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
    p = lineEnd + 4 + size;
  }
}

/** Video frames in what a player got so far (a tag cut short at the end is left out). */
export function framesIn(data: Buffer): number {
  if (data.length < 13) return 0;
  return videoFrames(parseFlv(data, { allowTruncated: true }).tags).length;
}

export function parsed(data: Buffer): ParsedFlv {
  return parseFlv(data, { allowTruncated: true });
}

export function ffprobeFlv(bytes: Buffer, dir: string, name: string): { codec: string; width: number; height: number; frames: number } {
  const file = path.join(dir, name);
  fs.writeFileSync(file, bytes);
  const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-count_frames', '-select_streams', 'v', '-show_streams', '-of', 'json', file]);
  if (r.status !== 0) throw new Error(`ffprobe failed: ${r.stderr}`);
  const s = JSON.parse(r.stdout.toString()).streams[0];
  return { codec: s.codec_name, width: s.width, height: s.height, frames: Number(s.nb_read_frames) };
}

/** Pushes units; the publisher's stream takes them synchronously. */
export function pushAll(pub: Publisher, units: ReadonlyArray<AccessUnit>): void {
  for (const u of units) pub.push(u);
}
