/**
 * Shared helpers for the end-to-end tests: a gateway with jt1078-ingest + flv-out on free loopback ports, real
 * players (HTTP-FLV over node:http, WS-FLV over ws), real terminals (the simulator, or the small TCP/UDP senders
 * here), the ingest's own parser and assembler as the reference for "what the capture holds", and ffprobe as the
 * independent decoder.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { definePlugin, type Notice, type AccessUnit, type TrackInfo } from '../../plugin-sdk';
import { FLV_PLAYERS, type FlvPlayers } from '../../plugins/flv-out/service';
import { encodeH265TestPattern, startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import { splitAnnexB, h265NalType } from '../../plugin-sdk/formats/annexb';
import { loadCapture, type Capture } from '../../plugins/jt1078-ingest/tools/simulator';
import { encodePacket, Jt1078Packer } from '../../plugins/jt1078-ingest/src/packer';
import type { Jt1078Layout, Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { Jt1078StreamAssembler } from '../../plugins/jt1078-ingest/src/stream-assembler';
import { parseFlv, videoAnnexB, type ParsedFlv, type ReadTag } from '../support/flv-reader';
import { fixturePath, scratchDir } from '../support/paths';
import { requireTool } from '../support/tools';
import { prng } from '../support/prng';
export { prng };

// ---------------------------------------------------------------------------------------------------------------
// The captures (facts from ../shared/fixtures/README.md)

export interface CaptureInfo {
  file: string;
  /** SIM as the README gives it (leading zeros included) */
  sim: string;
  channel: number;
  width: number;
  height: number;
  /** G.711A audio alongside the video */
  audio: boolean;
}

export const CAPTURES: CaptureInfo[] = [
  { file: 'jt1078/glaciall-cif-h264-2013.bin', sim: '013800138000', channel: 1, width: 352, height: 288, audio: false },
  { file: 'jt1078/xunilcyl-d1-h264-2013.bin', sim: '132570034500', channel: 1, width: 704, height: 576, audio: false },
  { file: 'jt1078/gojt808-d1-h264-g711a-2013.bin', sim: '156987000796', channel: 1, width: 720, height: 576, audio: true },
  { file: 'jt1078/smallchi-cif-h264-2013.bin', sim: '001901305037', channel: 3, width: 352, height: 288, audio: false },
];

const captures = new Map<string, Capture>();
/** The capture parsed by the simulator's own loader (what the simulator sends), cached per file. */
export function capture(file: string): Capture {
  let c = captures.get(file);
  if (!c) {
    c = loadCapture(fixturePath(file));
    captures.set(file, c);
  }
  return c;
}

export interface Expected {
  /** video access units the ingest publishes: complete frames from the first keyframe with parameter sets on */
  video: number;
  /** audio units published after the first video unit (players start at a video keyframe) */
  audioAfterVideo: number;
  keyframes: number;
  /** stream time of each video unit, ms */
  videoDts: number[];
  /** sequence numbers the reorder stage gave up as lost */
  lostPackets: number;
}

/**
 * What the gateway should publish for these packets, in this order: the ingest's own stream assembler, fed
 * directly. With `reorder` the UDP reorder buffer is on, on a clock that never runs out (holes are given up only
 * when the buffer is full, which is what a fast sender sees too).
 */
export function expectedFrom(packets: Iterable<Jt1078Packet>, opts: { reorder?: boolean } = {}): Expected {
  const e: Expected = { video: 0, audioAfterVideo: 0, keyframes: 0, videoDts: [], lostPackets: 0 };
  const asm = new Jt1078StreamAssembler(
    {
      onTrack: (_t: TrackInfo) => undefined,
      onAccessUnit: (au: AccessUnit) => {
        if (au.kind === 'video') {
          e.video++;
          if (au.keyframe) e.keyframes++;
          e.videoDts.push(au.dts);
        } else if (e.video > 0) {
          e.audioAfterVideo++;
        }
      },
    },
    { reorder: opts.reorder ? { maxPackets: 64, maxDelayMs: 200 } : false, now: () => 0 },
  );
  // No flush: a frame still open when the terminal goes is not published by the gateway either.
  for (const p of packets) asm.push(p);
  e.lostPackets = asm.stats.reorder.lost;
  return e;
}

/**
 * The capture played `passes` times as one continuous stream, the way the simulator loops it: each pass shifts
 * timestamps by the capture's span and sequence numbers by its packet count.
 */
export function* loopedPackets(cap: Capture, passes: number, firstPass = 0): Generator<Jt1078Packet> {
  const n = cap.packets.length;
  for (let pass = firstPass; pass < passes; pass++) {
    for (const p of cap.packets) yield { ...p, seq: (p.seq + pass * n) & 0xffff, timestamp: p.timestamp + pass * cap.loopShift };
  }
}

/**
 * An independent count of the video frames a capture holds from its first I frame on: frames end at the M bit.
 * (Only valid for captures without loss, where every frame is complete.)
 */
export function framesFromFirstI(packets: Jt1078Packet[]): number {
  let started = false;
  let frames = 0;
  for (const p of packets) {
    if (p.dataType > 2) continue;
    if (!started && p.dataType === 0 && (p.subMark === 0 || p.subMark === 1)) started = true;
    if (started && p.marker) frames++;
  }
  return frames;
}

export interface Reencode {
  layout?: Jt1078Layout;
  sim?: string;
  channel?: number;
}

/** One packet re-encoded, optionally in another layout / SIM / channel. */
export function encodeOne(p: Jt1078Packet, o: Reencode = {}): Buffer {
  return encodePacket(
    {
      layout: o.layout ?? p.layout,
      sim: o.sim ?? p.sim,
      channel: o.channel ?? p.channel,
      pt: p.pt,
      marker: p.marker,
      seq: p.seq,
      dataType: p.dataType,
      subMark: p.subMark,
      timestamp: p.timestamp,
      lastIFrameInterval: p.lastIFrameInterval,
      lastFrameInterval: p.lastFrameInterval,
    },
    p.body,
  );
}

/** The capture's packets re-encoded, one buffer each. */
export function encodeCapture(packets: Jt1078Packet[], o: Reencode = {}): Buffer[] {
  return packets.map((p) => encodeOne(p, o));
}

/** The same, lazily (for long looped streams). */
export function* encodeLazily(packets: Iterable<Jt1078Packet>, o: Reencode = {}): Generator<Buffer> {
  for (const p of packets) yield encodeOne(p, o);
}

// ---------------------------------------------------------------------------------------------------------------
// The gateway

export interface E2eGateway {
  gw: TestGateway;
  /** notices (ready/closed/failed) as the kernel publishes them */
  notices: Notice[];
  /** flv-out's players service (this gateway's), for per-player statistics */
  flv: FlvPlayers;
  live2013: number;
  live2019: number;
  flvPort: number;
  stop(): Promise<void>;
}

/**
 * One gateway with jt1078-ingest and flv-out on free ports, plus a probe plugin that records notices and holds
 * flv-out's players service. Start one per test file (before) and stop it (after).
 */
export async function startE2eGateway(
  ingest: Record<string, unknown> = {},
  flvOut: Record<string, unknown> = {},
  extra: Array<{ name: string; config?: Record<string, unknown> }> = [],
  gateway: Record<string, unknown> = {},
  opts: { captureLogs?: boolean } = {},
): Promise<E2eGateway> {
  const notices: Notice[] = [];
  let flv: FlvPlayers | undefined;
  const probe = definePlugin({
    name: 'e2e-probe',
    requires: ['flv-out'],
    uses: [FLV_PLAYERS],
    setup(ctx) {
      ctx.notices.on((n) => notices.push(n));
      flv = ctx.services.get(FLV_PLAYERS);
    },
  });
  const gw = await startTestGateway({
    gateway,
    captureLogs: opts.captureLogs,
    plugins: [
      {
        name: 'jt1078-ingest',
        config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, disconnectGraceMs: 300, unknownGraceMs: 5000, ...ingest },
      },
      { name: 'flv-out', config: { port: 0, ...flvOut } },
      ...extra,
      { name: 'e2e-probe', def: probe },
    ],
  });
  return {
    gw,
    notices,
    flv: flv!,
    live2013: gw.ports['jt1078-ingest.livePort2013'],
    live2019: gw.ports['jt1078-ingest.livePort2019'],
    flvPort: gw.ports['flv-out.port'],
    stop: () => gw.stop(),
  };
}

/**
 * Registers before/after hooks in the calling describe block that start one e2e gateway and stop it, and returns a
 * handle that reads through to it (valid inside that block's tests).
 */
export function useE2eGateway(
  ingest: Record<string, unknown> = {},
  flvOut: Record<string, unknown> = {},
  extra: Array<{ name: string; config?: Record<string, unknown> }> = [],
  gateway: Record<string, unknown> = {},
  opts: { captureLogs?: boolean } = {},
): E2eGateway {
  let started: E2eGateway | undefined;
  before(async () => {
    started = await startE2eGateway(ingest, flvOut, extra, gateway, opts);
  });
  after(async () => {
    await started?.stop();
    started = undefined;
  });
  const current = (): E2eGateway => {
    if (!started) throw new Error('the e2e gateway is used outside the describe block that started it');
    return started;
  };
  return {
    get gw() {
      return current().gw;
    },
    get notices() {
      return current().notices;
    },
    get flv() {
      return current().flv;
    },
    get live2013() {
      return current().live2013;
    },
    get live2019() {
      return current().live2019;
    },
    get flvPort() {
      return current().flvPort;
    },
    stop: () => current().stop(),
  };
}

export interface OpenResult {
  reqId: string;
  playUrl: string;
  ctrl: boolean;
  ready: boolean;
  host: string;
  port: number;
  tcp: boolean;
  port2019: number;
  tcp2019: boolean;
}

/** POST /strm/open for a live channel; asserts errCode 0. */
export async function openLive(gw: TestGateway, sim: string, chanId: number, over: Record<string, unknown> = {}): Promise<OpenResult> {
  const r = await gw.api('POST', '/strm/open', { user: { token: 'tok-e2e' }, typ: 'live', simNo: sim, chanId, keepIntv: 600, ...over });
  assert.equal(r.status, 200);
  assert.equal(r.json.errCode, 0, `open ${sim}/${chanId}: ${JSON.stringify(r.json)}`);
  return r.json.data[0] as OpenResult;
}

export async function closeReq(gw: TestGateway, reqId: string): Promise<void> {
  const r = await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  assert.equal(r.json.errCode, 0);
}

export async function statusOf(gw: TestGateway, reqId: string): Promise<Record<string, any> | undefined> {
  const r = await gw.api('GET', '/strm/status');
  assert.equal(r.json.errCode, 0);
  return (r.json.data as Array<Record<string, any>>).find((x) => x.reqId === reqId);
}

/** Sum of a metric's samples in a /metrics text whose labels include all of `labels`. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

/** Sum of a metric's samples in GET /metrics whose labels include all of `labels`. */
export async function metric(gw: TestGateway, name: string, labels: Record<string, string> = {}): Promise<number> {
  const r = await gw.api('GET', '/metrics', undefined, null);
  assert.equal(r.status, 200);
  return metricSum(String(r.json), name, labels);
}

/** Polls until fn returns a truthy value; fails with `what` after timeoutMs. */
export async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 10_000, everyMs = 20): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * UDP has no end: polls until a player's video frame count holds still between two polls (and is above 0), then
 * returns that count.
 */
export async function framesSettled(player: { videoFrames(): number }, timeoutMs: number, everyMs: number): Promise<number> {
  let last = -1;
  await waitFor(
    'frames to stop arriving',
    () => {
      const n = player.videoFrames();
      const settled = n === last && n > 0;
      last = n;
      return settled;
    },
    timeoutMs,
    everyMs,
  );
  return last;
}

// ---------------------------------------------------------------------------------------------------------------
// Players

/** The play URL (ws:// by default) for an HTTP-FLV player: the same path and query over plain HTTP. */
export function httpUrlOf(playUrl: string): string {
  return playUrl.replace(/^ws:/, 'http:');
}

export function wsUrlOf(playUrl: string): string {
  return playUrl.replace(/^http:/, 'ws:');
}

/**
 * Counts an FLV byte stream's tags as they arrive, without keeping them (a long-running player's memory must not
 * be mistaken for the gateway's).
 */
export class FlvTagCounter {
  videoFrames = 0;
  keyframes = 0;
  lastVideoTs = -1;
  /** coded video tags whose timestamp was not above the previous one's */
  backwards = 0;
  private carry: Buffer = Buffer.alloc(0);
  private headerDone = false;

  push(chunk: Buffer): void {
    let buf = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    let at = 0;
    if (!this.headerDone) {
      if (buf.length < 13) {
        this.carry = Buffer.from(buf);
        return;
      }
      if (buf.toString('latin1', 0, 3) !== 'FLV') throw new Error('not an FLV stream');
      at = buf.readUInt32BE(5) + 4;
      this.headerDone = true;
    }
    while (at + 11 <= buf.length) {
      const size = buf.readUIntBE(at + 1, 3);
      if (at + 11 + size + 4 > buf.length) break;
      if (buf[at] === 9 && size >= 2) {
        const b0 = buf[at + 11];
        const coded = b0 & 0x80 ? (b0 & 0x0f) === 1 || (b0 & 0x0f) === 3 : buf[at + 12] === 1;
        if (coded) {
          const ts = (buf.readUIntBE(at + 4, 3) | (buf[at + 7] << 24)) >>> 0;
          if (ts <= this.lastVideoTs) this.backwards++;
          this.lastVideoTs = ts;
          this.videoFrames++;
          if (((b0 >> 4) & 7) === 1) this.keyframes++;
        }
      }
      at += 11 + size + 4;
    }
    buf = buf.subarray(at);
    this.carry = Buffer.from(buf);
  }
}

/** An HTTP-FLV player: collects the body (or only counts it); can stop reading (pause) to play a stalled client. */
export class HttpFlvPlayer {
  readonly chunks: Buffer[] = [];
  bytes = 0;
  /** set when connected with keep: false */
  counter?: FlvTagCounter;
  /** resolves when the server ends or drops the response */
  readonly ended: Promise<void>;
  endedAt = 0;
  private constructor(
    readonly status: number,
    private readonly res: http.IncomingMessage,
    private readonly req: http.ClientRequest,
    keep: boolean,
  ) {
    this.ended = new Promise<void>((resolve) => {
      const done = (): void => {
        if (!this.endedAt) this.endedAt = Date.now();
        resolve();
      };
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
      req.on('error', done);
    });
    if (!keep) this.counter = new FlvTagCounter();
    res.on('data', (c: Buffer) => {
      if (this.counter) this.counter.push(c);
      else this.chunks.push(c);
      this.bytes += c.length;
    });
  }

  /**
   * Connects; resolves once the response headers arrived (the server holds the player open until media).
   * keep: false counts tags as they come instead of keeping the bytes.
   */
  static connect(url: string, o: { keep?: boolean } = {}): Promise<HttpFlvPlayer> {
    return new Promise((resolve, reject) => {
      const req = http.get(httpUrlOf(url), { agent: false }, (res) => resolve(new HttpFlvPlayer(res.statusCode ?? 0, res, req, o.keep ?? true)));
      req.on('error', reject);
    });
  }

  /** the client side's address as the server sees it (PlayAttempt.remote) */
  get remote(): string {
    return `${this.res.socket.localAddress}:${this.res.socket.localPort}`;
  }

  get isEnded(): boolean {
    return this.endedAt > 0;
  }

  data(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** Tags received so far (a tag cut by the end of what arrived is left out). */
  parse(): ParsedFlv {
    return parseFlv(this.data(), { allowTruncated: true });
  }

  videoFrames(): number {
    if (this.counter) return this.counter.videoFrames;
    return this.bytes > 13 ? codedVideo(this.parse().tags).length : 0;
  }

  /** Stops reading: the socket's receive buffer fills and the server's writes back up. */
  pause(): void {
    this.res.pause();
    this.res.socket.pause();
  }

  /** Reads again after pause(). */
  resume(): void {
    this.res.socket.resume();
    this.res.resume();
  }

  close(): void {
    this.req.destroy();
  }
}

/** A WS-FLV player (ws package): each binary message is part of the FLV byte stream. */
export class WsFlvPlayer {
  readonly chunks: Buffer[] = [];
  closeCode = 0;
  readonly closed: Promise<number>;
  private constructor(private readonly ws: WebSocket) {
    this.closed = new Promise((resolve) =>
      ws.once('close', (code) => {
        this.closeCode = code;
        resolve(code);
      }),
    );
    ws.on('message', (d: Buffer, isBinary: boolean) => {
      if (isBinary) this.chunks.push(d);
    });
    ws.on('error', () => undefined);
  }

  /** Resolves once the WebSocket opened (or closed, for a refused play: see closed / closeCode). */
  static connect(url: string): Promise<WsFlvPlayer> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const p = new WsFlvPlayer(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(p));
      ws.once('close', () => resolve(p));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`WS-FLV upgrade refused: HTTP ${res.statusCode}`)));
    });
  }

  data(): Buffer {
    return Buffer.concat(this.chunks);
  }

  close(): void {
    this.ws.terminate();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// What a player got

/** Video tags that carry a coded frame (not sequence headers / end of sequence). */
export function codedVideo(tags: ReadTag[]): ReadTag[] {
  return tags.filter((t) => t.type === 9 && !t.sequenceHeader && (t.enhanced ? t.packetType === 1 || t.packetType === 3 : t.packetType === 1));
}

export function codedAudio(tags: ReadTag[]): ReadTag[] {
  return tags.filter((t) => t.type === 8 && !t.sequenceHeader);
}

/** Index of the first tag whose timestamp is not above (strict) / below (non-strict) its predecessor's, or -1. */
export function firstNonMonotonic(tags: ReadTag[], strict: boolean): number {
  for (let i = 1; i < tags.length; i++) {
    if (strict ? tags[i].timestamp <= tags[i - 1].timestamp : tags[i].timestamp < tags[i - 1].timestamp) return i;
  }
  return -1;
}

/** The largest step back in time from the latest timestamp seen so far, over media tags of all tracks. */
export function maxBackStep(tags: ReadTag[]): number {
  let latest = -Infinity;
  let worst = 0;
  for (const t of tags) {
    if (t.type === 18) continue;
    if (t.timestamp < latest) worst = Math.max(worst, latest - t.timestamp);
    else latest = t.timestamp;
  }
  return worst;
}

export interface ProbeResult {
  codec: string;
  width: number;
  height: number;
  frames: number;
  /** ffprobe's stderr at -v error: decoder complaints (empty for a clean stream) */
  errors: string;
}

/**
 * ffprobe decodes every frame of the given media (an FLV file, or raw Annex-B with format h264/hevc) and reports
 * the first video stream, and the first audio stream if there is one.
 */
export function ffprobe(data: Buffer, format: 'flv' | 'h264' | 'hevc'): ProbeResult & { audio?: { codec: string; sampleRate: number }; duration: number } {
  const bin = requireTool('ffprobe', 'ffmpeg');
  const dir = scratchDir('e2e-probe');
  const file = path.join(dir, `media.${format}`);
  try {
    fs.writeFileSync(file, data);
    const r = spawnSync(
      bin,
      [
        '-v',
        'error',
        '-f',
        format,
        '-count_frames',
        '-show_entries',
        'stream=codec_type,codec_name,width,height,nb_read_frames,sample_rate:format=duration',
        '-of',
        'json',
        file,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    if (r.status !== 0) throw new Error(`ffprobe failed (${r.status}): ${r.stderr}`);
    const j = JSON.parse(r.stdout) as { streams: Array<Record<string, string | number>>; format?: Record<string, string> };
    const streams = j.streams;
    const v = streams.find((s) => s.codec_type === 'video');
    if (!v) throw new Error(`ffprobe found no video stream: ${r.stdout}`);
    const a = streams.find((s) => s.codec_type === 'audio');
    return {
      codec: String(v.codec_name),
      width: Number(v.width),
      height: Number(v.height),
      frames: Number(v.nb_read_frames),
      errors: r.stderr.trim(),
      audio: a ? { codec: String(a.codec_name), sampleRate: Number(a.sample_rate) } : undefined,
      // container duration, s (NaN for raw Annex-B, which has none)
      duration: Number(j.format?.duration),
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The video a player got, checked by ffprobe on the Annex-B rebuilt from its tags (any codec flv-reader knows). */
export function probeVideoOf(flv: ParsedFlv, codec: 'h264' | 'h265'): ProbeResult & { tagFrames: number } {
  const { annexB, frames } = videoAnnexB(flv.tags, codec);
  return { ...ffprobe(annexB, codec === 'h264' ? 'h264' : 'hevc'), tagFrames: frames };
}

// ---------------------------------------------------------------------------------------------------------------
// Terminals

/** A TCP terminal connection that writes whole buffers (keeping up with backpressure). */
export class TcpTerminal {
  private constructor(readonly socket: net.Socket) {
    socket.on('error', () => undefined);
  }

  static async connect(port: number, host = '127.0.0.1'): Promise<TcpTerminal> {
    const s = net.connect({ host, port });
    s.setNoDelay(true);
    await once(s, 'connect');
    return new TcpTerminal(s);
  }

  /**
   * Writes the buffers `batch` at a time (an iterable is consumed lazily, so a long stream need not exist in memory
   * at once); pauseMs between batches paces the sender (0: as fast as the socket drains).
   */
  async send(bufs: Iterable<Buffer>, batch = 64, pauseMs = 0): Promise<void> {
    const it = bufs[Symbol.iterator]();
    for (let done = false; !done;) {
      this.socket.cork();
      for (let k = 0; k < batch; k++) {
        const r = it.next();
        if (r.done) {
          done = true;
          break;
        }
        this.socket.write(r.value);
      }
      this.socket.uncork();
      if (this.socket.writableNeedDrain) await once(this.socket, 'drain');
      if (pauseMs > 0) await sleep(pauseMs);
      else await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Ends the connection and waits until it is fully closed. */
  async end(): Promise<void> {
    if (this.socket.destroyed) return;
    const closed = once(this.socket, 'close');
    this.socket.end();
    await closed;
  }
}

export interface LossyPlan {
  /** indexes into the packet list, in sending order */
  order: number[];
  dropped: number;
}

/**
 * Reorders packets within windows of `window` (each window shuffled, Fisher-Yates) and drops `loss` of them, both
 * from a seeded PRNG: the order a UDP path with reordering and loss would deliver.
 */
export function lossyOrder(count: number, o: { window: number; loss: number; seed: number }): LossyPlan {
  const rnd = prng(o.seed);
  const order: number[] = [];
  let dropped = 0;
  for (let start = 0; start < count; start += o.window) {
    const w: number[] = [];
    for (let i = start; i < Math.min(count, start + o.window); i++) {
      if (rnd() < o.loss) dropped++;
      else w.push(i);
    }
    for (let i = w.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [w[i], w[j]] = [w[j], w[i]];
    }
    order.push(...w);
  }
  return { order, dropped };
}

/** Sends datagrams from one UDP socket, `perTick` every `tickMs`, so the receiver's socket buffer never overflows. */
export async function sendUdp(port: number, datagrams: Buffer[], o: { perTick?: number; tickMs?: number } = {}): Promise<void> {
  const perTick = o.perTick ?? 8;
  const tickMs = o.tickMs ?? 4;
  const s = dgram.createSocket('udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(0, '127.0.0.1', () => resolve());
    });
    for (let i = 0; i < datagrams.length; i += perTick) {
      await Promise.all(
        datagrams
          .slice(i, i + perTick)
          .map((d) => new Promise<void>((resolve, reject) => s.send(d, port, '127.0.0.1', (err) => (err ? reject(err) : resolve())))),
      );
      await sleep(tickMs);
    }
  } finally {
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

/**
 * The packets as one TCP byte stream with junk after those `after` picks: random bytes (never the frame magic), and
 * every few insertions a false "01cd" magic followed by garbage, the case that tempts a parser to resynchronise on
 * the wrong byte. Returns the stream and how many insertions were made.
 */
export function withJunk(packets: Buffer[], o: { after: (i: number) => boolean; maxLen: number; seed: number }): { stream: Buffer; insertions: number } {
  const rnd = prng(o.seed);
  const parts: Buffer[] = [];
  let insertions = 0;
  for (let i = 0; i < packets.length; i++) {
    parts.push(packets[i]);
    if (!o.after(i)) continue;
    const len = 1 + Math.floor(rnd() * o.maxLen);
    const junk = Buffer.alloc(len);
    for (let k = 0; k < len; k++) junk[k] = Math.floor(rnd() * 256);
    if (insertions % 4 === 3 && len >= 8) junk.write('01cd', 0, 'latin1');
    // random bytes may spell the magic by chance: break it so the junk is junk
    for (let k = junk.indexOf('01cd', insertions % 4 === 3 ? 1 : 0, 'latin1'); k >= 0; k = junk.indexOf('01cd', k + 1, 'latin1')) junk[k] = 0xff;
    parts.push(junk);
    insertions++;
  }
  return { stream: Buffer.concat(parts), insertions };
}

/** Splits a buffer into pieces of random sizes (TCP delivers chunks anywhere, not on packet boundaries). */
export function randomChunks(buf: Buffer, seed: number, max = 4096): Buffer[] {
  const rnd = prng(seed);
  const out: Buffer[] = [];
  for (let at = 0; at < buf.length;) {
    const n = 1 + Math.floor(rnd() * max);
    out.push(buf.subarray(at, at + n));
    at += n;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// H.265

/**
 * An H.265 elementary stream made by ffmpeg (libx265) from its test pattern: Annex-B, 25 fps, IDR every `keyint`.
 */
export function makeHevc(o: { size: string; seconds: number; keyint: number }): Buffer {
  return encodeH265TestPattern({ size: o.size, seconds: o.seconds, fps: 25, gopFrames: o.keyint, ffmpeg: requireTool('ffmpeg', 'ffmpeg') });
}

/**
 * Access units (decode order) of an H.265 Annex-B stream: a new one starts at a VPS/SPS/PPS/AUD/prefix SEI or at
 * a slice with first_slice_segment_in_pic_flag set, once the current one holds a picture.
 */
export function hevcAccessUnits(annexB: Buffer): Array<{ payload: Buffer; irap: boolean }> {
  const aus: Array<{ nals: Buffer[]; irap: boolean; vcl: boolean }> = [];
  let cur: { nals: Buffer[]; irap: boolean; vcl: boolean } | undefined;
  for (const nal of splitAnnexB(annexB)) {
    const t = h265NalType(nal);
    const isVcl = t < 32;
    const startsAu = isVcl ? (nal[2] & 0x80) !== 0 : (t >= 32 && t <= 35) || t === 39;
    if (!cur || (cur.vcl && startsAu)) {
      cur = { nals: [], irap: false, vcl: false };
      aus.push(cur);
    }
    cur.nals.push(nal);
    if (isVcl) {
      cur.vcl = true;
      if (t >= 16 && t <= 21) cur.irap = true;
    }
  }
  const sc = Buffer.from([0, 0, 0, 1]);
  return aus.map((a) => ({ payload: Buffer.concat(a.nals.flatMap((n) => [sc, n])), irap: a.irap }));
}

/** H.265 access units packed as JT/T 1078 packets (PT 99), 40 ms apart. */
export function packHevc(aus: Array<{ payload: Buffer; irap: boolean }>, o: { sim: string; channel: number; layout?: Jt1078Layout }): Buffer[] {
  const packer = new Jt1078Packer({ layout: o.layout ?? '2013', sim: o.sim, channel: o.channel });
  const out: Buffer[] = [];
  aus.forEach((au, i) => out.push(...packer.packFrame({ dataType: au.irap ? 0 : 1, pt: 99, timestamp: 1_000_000 + i * 40, payload: au.payload })));
  return out;
}
