import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { WebSocket } from 'ws';
import { NmsBridge, NmsBridgeOptions, PlayAttempt } from '../nms-bridge';
import { FlvMuxer, FlvTag } from '../../plugin-sdk/formats/flv';
import { h264NalType, joinAnnexB, splitAnnexB } from '../../plugin-sdk/formats/annexb';
import type { AccessUnit } from '../../plugin-sdk/media';
import { decodeScriptTag, parseFlv, ReadTag, videoAnnexB } from '../../test/support/flv-reader';
import { requireTool } from '../../test/support/tools';
import { scratchDir } from '../../test/support/paths';

const HOST = '127.0.0.1';

/** 2 s of 320x240 H.264 at 25 fps, GOP 25, muxed: [onMetaData, sequence header, 50 frames]. */
function h264Tags(): FlvTag[] {
  const bin = requireTool('ffmpeg', 'ffmpeg');
  const r = spawnSync(bin, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=25', '-t', '2',
    '-c:v', 'libx264', '-bf', '0', '-g', '25', '-x264-params', 'aud=1', '-f', 'h264', '-'], { maxBuffer: 16 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg failed: ${r.stderr}`);
  const aus: Buffer[][] = [];
  for (const nal of splitAnnexB(r.stdout)) {
    if (h264NalType(nal) === 9 || aus.length === 0) aus.push([]);
    aus[aus.length - 1].push(nal);
  }
  const muxer = new FlvMuxer();
  muxer.setTrack({ kind: 'video', codec: 'h264', width: 320, height: 240, frameRate: 25 });
  const tags: FlvTag[] = [];
  aus.forEach((nals, i) => {
    const au: AccessUnit = { kind: 'video', codec: 'h264', dts: i * 40, pts: i * 40, keyframe: nals.some((n) => h264NalType(n) === 5), payload: joinAnnexB(nals) };
    tags.push(...muxer.push(au));
  });
  return tags;
}

/** 2 s of H.265 (Enhanced FLV) with AAC, interleaved by timestamp. */
function hevcAacTags(): FlvTag[] {
  const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
  const v = spawnSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=25', '-t', '2',
    '-c:v', 'libx265', '-x265-params', 'bframes=0:keyint=25:aud=1:log-level=error', '-f', 'hevc', '-'], { maxBuffer: 16 << 20 });
  const a = spawnSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=16000', '-t', '2',
    '-c:a', 'aac', '-ac', '1', '-f', 'adts', '-'], { maxBuffer: 16 << 20 });
  if (v.status !== 0 || a.status !== 0) throw new Error(`ffmpeg failed: ${v.stderr}${a.stderr}`);
  const units: AccessUnit[] = [];
  const aus: Buffer[][] = [];
  for (const nal of splitAnnexB(v.stdout)) {
    if (((nal[0] >> 1) & 0x3f) === 35 || aus.length === 0) aus.push([]);
    aus[aus.length - 1].push(nal);
  }
  aus.forEach((nals, i) => units.push({ kind: 'video', codec: 'h265', dts: i * 40, pts: i * 40,
    keyframe: nals.some((n) => { const t = (n[0] >> 1) & 0x3f; return t >= 16 && t <= 23; }), payload: joinAnnexB(nals) }));
  for (let at = 0, i = 0; at < a.stdout.length; i++) {
    const len = ((a.stdout[at + 3] & 3) << 11) | (a.stdout[at + 4] << 3) | (a.stdout[at + 5] >> 5);
    units.push({ kind: 'audio', codec: 'aac', dts: i * 64, pts: i * 64, keyframe: false, payload: a.stdout.subarray(at, at + len) });
    at += len;
  }
  units.sort((x, y) => x.dts - y.dts);
  const muxer = new FlvMuxer();
  muxer.setTrack({ kind: 'audio', codec: 'aac', sampleRate: 16000, channels: 1 });
  return units.flatMap((u) => muxer.push(u));
}

function ffprobeFlv(bytes: Buffer, dir: string, name: string): { codec: string; width: number; height: number; frames: number } {
  const file = path.join(dir, name);
  fs.writeFileSync(file, bytes);
  const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-count_frames', '-select_streams', 'v', '-show_streams', '-of', 'json', file]);
  if (r.status !== 0) throw new Error(`ffprobe failed: ${r.stderr}`);
  const s = JSON.parse(r.stdout.toString()).streams[0];
  return { codec: s.codec_name, width: s.width, height: s.height, frames: Number(s.nb_read_frames) };
}

function memoryLogger(): { logger: pino.Logger; lines: () => any[] } {
  const chunks: string[] = [];
  const sink = new Writable({ write(chunk, _enc, cb) { chunks.push(chunk.toString()); cb(); } });
  const logger = pino({ level: 'trace' }, sink);
  return { logger, lines: () => chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

interface HttpPlay { status: Promise<number>; body: Promise<Buffer>; bytes: () => number; req: http.ClientRequest }

function httpPlay(port: number, urlPath: string, method = 'GET'): HttpPlay {
  const chunks: Buffer[] = [];
  let n = 0;
  let resolveStatus!: (s: number) => void;
  const status = new Promise<number>((r) => { resolveStatus = r; });
  let req!: http.ClientRequest;
  const body = new Promise<Buffer>((resolve, reject) => {
    req = http.request({ host: HOST, port, path: urlPath, method, agent: false }, (res) => {
      resolveStatus(res.statusCode ?? 0);
      res.on('data', (c: Buffer) => { chunks.push(c); n += c.length; });
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  return { status, body, bytes: () => n, req };
}

interface WsPlay { ws: WebSocket; closed: Promise<{ code: number; body: Buffer }> }

function wsPlay(port: number, urlPath: string): WsPlay {
  const ws = new WebSocket(`ws://${HOST}:${port}${urlPath}`);
  const chunks: Buffer[] = [];
  ws.on('message', (m: Buffer) => chunks.push(m));
  const closed = new Promise<{ code: number; body: Buffer }>((resolve, reject) => {
    ws.on('close', (code) => resolve({ code, body: Buffer.concat(chunks) }));
    ws.on('error', reject);
  });
  return { ws, closed };
}

interface RawPlay { sock: net.Socket; data: () => Buffer; closed: Promise<void> }

/** A player on a bare socket, for requests node's client does not make (HTTP/1.0, pipelining). */
function rawPlay(port: number, request: string): RawPlay {
  const chunks: Buffer[] = [];
  const sock = net.connect(port, HOST, () => sock.write(request));
  sock.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((resolve) => sock.on('close', () => resolve()));
  sock.on('error', () => undefined);
  return { sock, data: () => Buffer.concat(chunks), closed };
}

interface RawResponse { status: number; head: string; body: Buffer; next: number }

/** The HTTP/1.x response at `at` in raw bytes, chunked or not; undefined while incomplete. */
function responseAt(raw: Buffer, at: number, closed: boolean): RawResponse | undefined {
  const headEnd = raw.indexOf('\r\n\r\n', at);
  if (headEnd < 0) return undefined;
  const head = raw.subarray(at, headEnd).toString('latin1');
  const status = Number(head.split(' ')[1]);
  let p = headEnd + 4;
  if (status === 204) return { status, head, body: Buffer.alloc(0), next: p };
  if (!/\r\ntransfer-encoding: *chunked/i.test(head)) return closed ? { status, head, body: raw.subarray(p), next: raw.length } : undefined;
  const parts: Buffer[] = [];
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', p);
    if (lineEnd < 0) return undefined;
    const line = raw.subarray(p, lineEnd).toString('latin1');
    assert.match(line, /^[0-9a-f]+$/, 'chunk size line');
    const size = parseInt(line, 16);
    if (raw.length < lineEnd + 4 + size) return undefined;
    assert.equal(raw.subarray(lineEnd + 2 + size, lineEnd + 4 + size).toString('latin1'), '\r\n', 'CRLF after a chunk');
    if (size === 0) return { status, head, body: Buffer.concat(parts), next: lineEnd + 4 };
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
    p = lineEnd + 4 + size;
  }
}

function nextPlayer(bridge: NmsBridge, ev: 'start' | 'stop', pick: (p: PlayAttempt) => boolean = () => true): Promise<string> {
  return new Promise((resolve) => bridge.onPlayer(ev, (p, id) => { if (pick(p)) resolve(id); }));
}

const videoFrames = (tags: ReadTag[]): ReadTag[] => tags.filter((t) => t.type === 9 && !t.sequenceHeader);

async function until(cond: () => boolean, what: string, ms = 20000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

describe('NMS bridge (HTTP-FLV / WS-FLV through node-media-server)', function () {
  let tags: FlvTag[];
  let dir: string;
  let bridge: NmsBridge | undefined;
  let log: ReturnType<typeof memoryLogger>;

  const start = async (extra: Partial<NmsBridgeOptions> = {}): Promise<NmsBridge> => {
    log = memoryLogger();
    bridge = await NmsBridge.start({ host: HOST, port: 0, dataDir: dir, logger: log.logger, ...extra });
    bridge.setPlayAuthorizer((p) => p.app === 'live' && p.query.token === 'good');
    return bridge;
  };

  before(() => {
    tags = h264Tags();
    assert.equal(tags.length, 52);
    dir = scratchDir('nms-bridge');
  });
  afterEach(async () => {
    await bridge?.stop();
    bridge = undefined;
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('serves HTTP-FLV and WS-FLV that ffprobe decodes, without console output or ./data', async () => {
    const dataDir = path.join(process.cwd(), 'data');
    const dataBefore = fs.existsSync(dataDir) ? fs.readdirSync(dataDir).sort() : null;
    const consoleCalls: string[] = [];
    const saved = { log: console.log, info: console.info, warn: console.warn, error: console.error, debug: console.debug };
    for (const k of Object.keys(saved) as Array<keyof typeof saved>) console[k] = (...a: unknown[]) => { consoleCalls.push(`${k}: ${a.join(' ')}`); };
    try {
      const b = await start();
      assert.ok(b.port > 0);
      const started = [nextPlayer(b, 'start', (p) => p.protocol === 'http-flv'), nextPlayer(b, 'start', (p) => p.protocol === 'ws-flv')];
      const hp = httpPlay(b.port, '/live/car_1_1.flv?token=good&reqId=r1');
      const wp = wsPlay(b.port, '/live/car_1_1.flv?token=good&reqId=r2');
      await Promise.all(started);
      assert.equal(await hp.status, 200);
      assert.deepEqual(b.stats(), { players: 2, streams: 0, bytesOut: b.stats().bytesOut });

      const pub = b.publish('live', 'car_1_1');
      for (const t of tags) pub.sendTag(t);
      // NMS's own AMF decoder logs an unknown script command: that must reach our logger, not the console
      pub.sendTag({ type: 18, timestamp: 2000, body: Buffer.from([0x02, 0x00, 0x03, 0x66, 0x6f, 0x6f, 0x05]), keyframe: false });
      assert.equal(b.stats().streams, 1);
      b.closePlayers('live', 'car_1_1');
      const [httpBody, wsRes] = await Promise.all([hp.body, wp.closed]);
      assert.equal(wsRes.code, 1000);
      for (const [name, bytes] of [['http.flv', httpBody], ['ws.flv', wsRes.body]] as const) {
        const flv = parseFlv(bytes);
        assert.deepEqual([flv.header.hasVideo, flv.header.hasAudio], [true, false], `${name}: header flags follow onMetaData`);
        const frames = videoFrames(flv.tags);
        assert.equal(frames.length, 50, name);
        assert.equal(frames[0].keyframe, true, name);
        assert.deepEqual(ffprobeFlv(bytes, dir, name), { codec: 'h264', width: 320, height: 240, frames: 50 });
      }
      pub.end();
      await until(() => b.stats().players === 0, 'players to leave');
      assert.equal(b.stats().bytesOut >= httpBody.length + wsRes.body.length - 1000, true);
      assert.ok(log.lines().some((l) => l.nms && /Unknown command/.test(l.msg)), 'NMS log line routed to pino');
    } finally {
      Object.assign(console, saved);
    }
    assert.deepEqual(consoleCalls, []);
    const dataAfter = fs.existsSync(dataDir) ? fs.readdirSync(dataDir).sort() : null;
    assert.deepEqual(dataAfter, dataBefore, 'nothing created under ./data of the working directory');
  });

  it('starts a late joiner at the cached keyframe', async () => {
    const b = await start();
    const pub = b.publish('live', 'late');
    for (const t of tags.slice(0, 2 + 35)) pub.sendTag(t); // meta, seq, frames 0..34
    // a script tag that is not onMetaData goes to the players of the moment, but is no metadata for late joiners
    const cue = Buffer.concat([Buffer.from([0x02, 0x00, 0x0a]), Buffer.from('onCuePoint'), Buffer.from([0x05])]);
    pub.sendTag({ type: 18, timestamp: 1400, body: cue, keyframe: false });
    const joined = nextPlayer(b, 'start');
    const hp = httpPlay(b.port, '/live/late.flv?token=good');
    await joined;
    for (const t of tags.slice(2 + 35)) pub.sendTag(t);
    b.closePlayers('live', 'late');
    const flv = parseFlv(await hp.body);
    assert.equal(flv.tags[0].type, 18, 'cached onMetaData first');
    assert.equal(decodeScriptTag(flv.tags[0].body).name, 'onMetaData');
    assert.equal(decodeScriptTag(flv.tags[0].body).props.width, 320);
    assert.equal(flv.tags.filter((t) => t.type === 18).length, 1);
    assert.equal(flv.tags[1].sequenceHeader, true, 'then the cached sequence header');
    const frames = videoFrames(flv.tags);
    assert.equal(frames[0].keyframe, true);
    assert.equal(frames[0].timestamp, 1000, 'GOP cache starts at frame 25');
    assert.equal(frames.length, 25);
    assert.deepEqual(ffprobeFlv(await hp.body, dir, 'late.flv'), { codec: 'h264', width: 320, height: 240, frames: 25 });
  });

  it('with joinTags keeps no GOP of its own and starts a late joiner with those tags, after the cached headers', async () => {
    const b = await start();
    let sent = 0;
    let calls = 0;
    // what flv-out gives: the GOP muxed again, config tags included (left out: the cached ones went first)
    const joinTags = (): FlvTag[] => {
      calls++;
      return sent > 2 + 25 ? [tags[0], tags[1], ...tags.slice(2 + 25, sent)] : [];
    };
    const pub = b.publish('live', 'joins', { joinTags });
    for (; sent < 2 + 35; sent++) pub.sendTag(tags[sent]); // meta, seq, frames 0..34
    assert.equal((b as any).streams.get('live/joins').broadcast.flvGopCache, null, 'no GOP of tags in the bridge');
    const joined = nextPlayer(b, 'start');
    const hp = httpPlay(b.port, '/live/joins.flv?token=good');
    await joined;
    for (; sent < tags.length; sent++) pub.sendTag(tags[sent]);
    b.closePlayers('live', 'joins');
    const body = await hp.body;
    const flv = parseFlv(body);
    assert.equal(calls, 1);
    assert.equal(decodeScriptTag(flv.tags[0].body).name, 'onMetaData');
    assert.equal(flv.tags[1].sequenceHeader, true);
    assert.equal(flv.tags.filter((t) => t.type === 18 || t.sequenceHeader).length, 2, 'headers once');
    const frames = videoFrames(flv.tags);
    assert.deepEqual([frames[0].keyframe, frames[0].timestamp, frames.length], [true, 1000, 25]);
    assert.deepEqual(ffprobeFlv(body, dir, 'joins.flv'), { codec: 'h264', width: 320, height: 240, frames: 25 });
  });

  it('puts joinTags on the timeline of players that stayed through a publisher restart', async () => {
    const b = await start();
    const stayed = nextPlayer(b, 'start');
    const hp1 = httpPlay(b.port, '/live/rejoin.flv?token=good');
    await stayed;
    let pub = b.publish('live', 'rejoin');
    for (const t of tags.slice(0, 27)) pub.sendTag(t); // frames 0..24
    pub.end();
    let sent = 0;
    pub = b.publish('live', 'rejoin', { joinTags: () => tags.slice(2 + 25, sent) });
    for (; sent < 2 + 35; sent++) pub.sendTag(tags[sent]);
    const joined = nextPlayer(b, 'start');
    const hp2 = httpPlay(b.port, '/live/rejoin.flv?token=good');
    await joined;
    for (; sent < tags.length; sent++) pub.sendTag(tags[sent]);
    b.closePlayers('live', 'rejoin');
    const early = videoFrames(parseFlv(await hp1.body).tags);
    const late = videoFrames(parseFlv(await hp2.body).tags);
    assert.equal(late.length, 25);
    assert.ok(late[0].timestamp > 1000, 'shifted past the first publish');
    assert.deepEqual(late.map((f) => f.timestamp), early.slice(-25).map((f) => f.timestamp));
  });

  it('caches the Enhanced HEVC and AAC sequence headers for a late joiner', async () => {
    const all = hevcAacTags();
    const b = await start();
    const pub = b.publish('live', 'hevc');
    const split = all.findIndex((t) => t.type === 9 && t.timestamp >= 1200);
    for (const t of all.slice(0, split)) pub.sendTag(t);
    const joined = nextPlayer(b, 'start');
    const wp = wsPlay(b.port, '/live/hevc.flv?token=good');
    await joined;
    for (const t of all.slice(split)) pub.sendTag(t);
    b.closePlayers('live', 'hevc');
    const flv = parseFlv((await wp.closed).body);
    assert.deepEqual([flv.header.hasVideo, flv.header.hasAudio], [true, true]);
    const first = flv.tags.slice(0, 3).map((t) => `${t.codec}${t.sequenceHeader ? ':seq' : ''}`);
    assert.deepEqual(first, ['script', 'aac:seq', 'h265:seq']);
    const frames = videoFrames(flv.tags);
    assert.deepEqual([frames[0].keyframe, frames[0].timestamp, frames.length], [true, 1000, 25]);
    const aac = flv.tags.filter((t) => t.codec === 'aac' && !t.sequenceHeader);
    assert.ok(aac.length > 0 && aac[0].timestamp >= 1000, 'audio starts with the GOP');
    const { annexB } = videoAnnexB(flv.tags, 'h265');
    const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-f', 'hevc', '-count_frames', '-show_streams', '-of', 'json', '-'], { input: annexB });
    const s = JSON.parse(r.stdout.toString()).streams[0];
    assert.deepEqual([s.codec_name, s.width, s.height, Number(s.nb_read_frames)], ['hevc', 320, 240, 25]);
  });

  it('holds a player that comes before the publisher and starts it at the first keyframe', async () => {
    const b = await start();
    const joined = nextPlayer(b, 'start');
    const wp = wsPlay(b.port, '/live/early.flv?token=good');
    await joined;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(b.stats().players, 1);
    const pub = b.publish('live', 'early');
    // the publisher starts mid-GOP: frames 10..24 are not decodable without frame 0
    for (const t of [...tags.slice(0, 2), ...tags.slice(2 + 10)]) pub.sendTag(t);
    b.closePlayers('live', 'early');
    const { body } = await wp.closed;
    const frames = videoFrames(parseFlv(body).tags);
    assert.equal(frames[0].keyframe, true);
    assert.equal(frames[0].timestamp, 1000);
    assert.equal(frames.length, 25);
    assert.deepEqual(ffprobeFlv(body, dir, 'early.flv'), { codec: 'h264', width: 320, height: 240, frames: 25 });
  });

  it('refuses unauthorised plays with 401 / close 4401 before any media, and takes no other paths or methods', async () => {
    const b = await start();
    let starts = 0;
    b.onPlayer('start', () => { starts++; });
    const pub = b.publish('live', 'sec');
    for (const t of tags) pub.sendTag(t);
    const hp = httpPlay(b.port, '/live/sec.flv?token=bad');
    assert.equal(await hp.status, 401);
    assert.ok(!(await hp.body).includes(Buffer.from('FLV')));
    const wp = wsPlay(b.port, '/live/sec.flv?token=bad');
    const ws = await wp.closed;
    assert.equal(ws.code, 4401);
    assert.equal(ws.body.length, 0);
    // a WebSocket upgrade elsewhere is not WS-FLV
    const other = new WebSocket(`ws://${HOST}:${b.port}/talk/sec?token=good`);
    const status = await new Promise<number>((resolve) => {
      other.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      other.on('error', () => resolve(-1));
    });
    assert.equal(status, 404);
    // no publishing with POST, no admin console
    const post = httpPlay(b.port, '/live/sec.flv?token=good', 'POST');
    assert.equal(await post.status, 405);
    await post.body;
    const admin = httpPlay(b.port, '/admin/');
    assert.equal(await admin.status, 404);
    await admin.body;
    assert.equal(starts, 0);
    assert.equal(b.stats().players, 0);
  });

  it('sends the same bytes to HTTP/1.1 (chunked), HTTP/1.0 (bare) and pipelined players', async () => {
    const b = await start();
    let starts = 0;
    b.onPlayer('start', () => { starts++; });
    const viaClient = httpPlay(b.port, '/live/raw.flv?token=good');
    const http10 = rawPlay(b.port, 'GET /live/raw.flv?token=good HTTP/1.0\r\n\r\n');
    // the GET arrives while the OPTIONS response still holds the connection: its response gets the socket later
    const piped = rawPlay(b.port, 'OPTIONS /live/raw.flv HTTP/1.1\r\nHost: x\r\n\r\nGET /live/raw.flv?token=good HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => starts === 3, 'three players');
    const pub = b.publish('live', 'raw');
    for (const t of tags) pub.sendTag(t);
    const big = Buffer.alloc(9 + 70000, 0x33); // a chunk size line of 5 hex digits
    big[0] = 0x27;
    big[1] = 1;
    big.writeUInt32BE(70000, 5);
    big[9] = 0x41;
    pub.sendTag({ type: 9, timestamp: 2000, body: big, keyframe: false });
    b.closePlayers('live', 'raw');

    const expected = await viaClient.body;
    const flv = parseFlv(expected);
    assert.equal(videoFrames(flv.tags).length, 51);
    assert.equal(flv.tags[flv.tags.length - 1].body.length, big.length);
    await http10.closed;
    const bare = responseAt(http10.data(), 0, true);
    assert.equal(bare?.status, 200);
    assert.doesNotMatch(bare.head, /transfer-encoding/i);
    assert.ok(bare.body.equals(expected), 'HTTP/1.0: the FLV stream without chunk framing');
    let second: RawResponse | undefined;
    await until(() => {
      const first = responseAt(piped.data(), 0, false);
      second = first && responseAt(piped.data(), first.next, false);
      return second !== undefined;
    }, 'the pipelined response to end');
    piped.sock.destroy();
    assert.equal(responseAt(piped.data(), 0, false)?.status, 204);
    assert.equal(second?.status, 200);
    assert.ok(second.body.equals(expected), 'pipelined: the same FLV stream');
  });

  it('keeps a player that stops reading under its backlog cap, drops it, and keeps serving the others', async () => {
    const cap = 256 * 1024;
    const frameBytes = 64 * 1024;
    const b = await start({ maxPlayerBacklogBytes: cap, maxGopCacheBytes: 256 * 1024 });
    const pub = b.publish('live', 'big');
    pub.sendTag(tags[0]);
    pub.sendTag(tags[1]);

    const fastStarted = nextPlayer(b, 'start');
    const fast = httpPlay(b.port, '/live/big.flv?token=good&who=fast');
    const fastId = await fastStarted;
    const slowStarted = nextPlayer(b, 'start');
    const slow = net.connect(b.port, HOST);
    slow.write('GET /live/big.flv?token=good&who=slow HTTP/1.1\r\nHost: x\r\n\r\n');
    slow.pause(); // never reads: the kernel buffers fill, then ours would
    const slowId = await slowStarted;
    let slowDropped = false;
    b.onPlayer('stop', (_p, id) => { if (id === slowId) slowDropped = true; });

    const stat = (id: string) => b.playerStats().find((p) => p.id === id);
    let slowPeak = 0;
    let slowSkips = 0;
    const total = 480;
    for (let i = 0; i < total; i++) {
      await until(() => (stat(fastId)?.backlogBytes ?? 0) < cap / 2, 'the reading player to drain');
      const key = i % 10 === 0;
      const body = Buffer.alloc(5 + 4 + frameBytes, i & 0xff);
      body[0] = key ? 0x17 : 0x27;
      body[1] = 1; // AVC NALU; composition time 0
      body.writeUIntBE(0, 2, 3);
      body.writeUInt32BE(frameBytes, 5);
      body[9] = key ? 0x65 : 0x41;
      pub.sendTag({ type: 9, timestamp: 2000 + i * 40, body, keyframe: key });
      const s = stat(slowId);
      if (s) {
        slowPeak = Math.max(slowPeak, s.peakBacklogBytes, s.backlogBytes);
        slowSkips = s.skips;
      }
    }
    assert.ok(slowPeak > cap / 2, 'the slow player did build a backlog');
    assert.ok(slowSkips > 0, 'it was moved to a later keyframe before being dropped');
    assert.ok(slowPeak <= cap + frameBytes + 64, `slow player backlog peaked at ${slowPeak} (cap ${cap})`);
    assert.equal(slowDropped, true, 'a player that never reads is dropped once it owes 4x the cap');
    assert.equal(stat(slowId), undefined);
    assert.equal(stat(fastId)?.skips, 0);

    // the GOP (10 x 64 KiB) is over the cache limit: a late joiner waits for the next keyframe
    const lateStarted = nextPlayer(b, 'start');
    const late = httpPlay(b.port, '/live/big.flv?token=good&who=late');
    await lateStarted;
    for (let i = total; i < total + 15; i++) {
      const key = i % 10 === 0;
      const body = Buffer.alloc(9 + 100);
      body[0] = key ? 0x17 : 0x27;
      body[1] = 1;
      body.writeUInt32BE(100, 5);
      pub.sendTag({ type: 9, timestamp: 2000 + i * 40, body, keyframe: key });
    }
    b.closePlayers('live', 'big');
    const fastFrames = videoFrames(parseFlv(await fast.body).tags);
    assert.equal(fastFrames.length, total + 15, 'the reading player got every frame');
    const lateFrames = videoFrames(parseFlv(await late.body).tags);
    assert.equal(lateFrames[0].timestamp, 2000 + 480 * 40, "not the cached GOP from frame 470");
    assert.equal(lateFrames[0].keyframe, true);
    slow.destroy();
  });

  it('does not drop a player for the cached GOP it could not take while joining', async () => {
    const cap = 64 * 1024;
    const b = await start({ maxPlayerBacklogBytes: cap });
    const pub = b.publish('live', 'gop');
    pub.sendTag(tags[0]);
    pub.sendTag(tags[1]);
    const frame = (i: number): FlvTag => {
      const body = Buffer.alloc(9 + 64 * 1024);
      body[0] = i === 0 ? 0x17 : 0x27;
      body[1] = 1;
      body.writeUInt32BE(64 * 1024, 5);
      return { type: 9, timestamp: i * 40, body, keyframe: i === 0 };
    };
    for (let i = 0; i < 100; i++) pub.sendTag(frame(i)); // a 6.4 MB GOP, all cached
    const joined = nextPlayer(b, 'start');
    const slow = net.connect(b.port, HOST);
    slow.write('GET /live/gop.flv?token=good HTTP/1.1\r\nHost: x\r\n\r\n');
    slow.pause();
    const id = await joined;
    const s = b.playerStats().find((p) => p.id === id);
    assert.ok(s, 'still attached after the replay');
    assert.ok(s.bytesOut < 100 * 64 * 1024, 'the part of the GOP it could not take was skipped');
    assert.equal(s.waitingForKeyframe, true);
    assert.ok(s.peakBacklogBytes <= cap + 64 * 1024 + 64);
    slow.destroy();
  });

  it('continues the timeline for players that stay through a publisher restart', async () => {
    const b = await start();
    const joined = nextPlayer(b, 'start');
    const hp = httpPlay(b.port, '/live/re.flv?token=good');
    await joined;
    let pub = b.publish('live', 're');
    for (const t of tags.slice(0, 27)) pub.sendTag(t); // frames 0..24
    pub.end();
    pub = b.publish('live', 're');
    for (const t of tags) pub.sendTag(t);
    b.closePlayers('live', 're');
    const frames = videoFrames(parseFlv(await hp.body).tags);
    assert.equal(frames.length, 75);
    for (let i = 1; i < frames.length; i++) assert.ok(frames[i].timestamp > frames[i - 1].timestamp, `timestamp went back at frame ${i}`);
  });

  it('lets a second publish of a stream replace the first', async () => {
    const b = await start();
    const first = b.publish('live', 'twice');
    for (const t of tags.slice(0, 10)) first.sendTag(t);
    const second = b.publish('live', 'twice');
    first.sendTag(tags[10]); // a replaced publisher's late tags go nowhere
    assert.equal(b.stats().streams, 1);
    for (const t of tags.slice(0, 2 + 30)) second.sendTag(t);
    const joined = nextPlayer(b, 'start');
    const hp = httpPlay(b.port, '/live/twice.flv?token=good');
    await joined;
    for (const t of tags.slice(2 + 30)) second.sendTag(t);
    b.closePlayers('live', 'twice');
    const frames = videoFrames(parseFlv(await hp.body).tags);
    assert.deepEqual([frames[0].timestamp, frames.length], [1000, 25]);
    second.end();
    assert.equal(b.stats().streams, 0);
  });

  it('stop() closes players and the port and leaves no handles; a taken port rejects without exiting', async () => {
    // sockets, servers and pipes; timers are left out because mocha's own test timer comes and goes
    const kinds = (): string[] => process.getActiveResourcesInfo().filter((k) => k !== 'Timeout').sort();
    const before = kinds();
    const b = await start();
    const port = b.port;
    const started = [nextPlayer(b, 'start'), nextPlayer(b, 'start', (p) => p.protocol === 'ws-flv')];
    const hp = httpPlay(port, '/live/bye.flv?token=good');
    const wp = wsPlay(port, '/live/bye.flv?token=good');
    await Promise.all(started);
    const pub = b.publish('live', 'bye');
    for (const t of tags.slice(0, 10)) pub.sendTag(t);

    // another server on the same port: a clear rejection, and no process.exit
    const exit = process.exit;
    let exitCalled = false;
    process.exit = ((code?: number) => { exitCalled = true; throw new Error(`process.exit(${code})`); }) as typeof process.exit;
    try {
      await assert.rejects(NmsBridge.start({ host: HOST, port, dataDir: dir, logger: memoryLogger().logger }),
        (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE' && /already in use/.test(err.message));
    } finally {
      process.exit = exit;
    }
    assert.equal(exitCalled, false);

    await b.stop();
    bridge = undefined;
    await assert.rejects(hp.body); // cut off mid-stream
    assert.notEqual((await wp.closed).code, 1000);
    assert.deepEqual(b.stats(), { players: 0, streams: 0, bytesOut: b.stats().bytesOut });
    assert.throws(() => b.publish('live', 'bye'), /stopped/);

    const again = net.createServer();
    await new Promise<void>((resolve, reject) => { again.once('error', reject); again.listen(port, HOST, resolve); });
    await new Promise<void>((resolve) => again.close(() => resolve()));
    await until(() => kinds().length <= before.length, 'handles to close', 2000).catch(() => undefined);
    assert.deepEqual(kinds(), before);
  });

  it('rejects malformed tags with a clear error', async () => {
    const b = await start();
    const pub = b.publish('live', 'bad');
    assert.throws(() => pub.sendTag({ type: 9, timestamp: 0, body: Buffer.from([0x17, 1]), keyframe: true }), /too short/);
    // Enhanced HEVC CodedFrames carries a composition time after the FourCC
    assert.throws(() => pub.sendTag({ type: 9, timestamp: 0, body: Buffer.from([0x91, 0x68, 0x76, 0x63, 0x31, 0, 0]), keyframe: true }), /too short/);
    assert.throws(() => pub.sendTag({ type: 7 as 8, timestamp: 0, body: Buffer.alloc(10), keyframe: false }), /not 8, 9 or 18/);
    assert.throws(() => pub.sendTag({ type: 8, timestamp: -1, body: Buffer.alloc(10), keyframe: false }), /timestamp/);
    assert.throws(() => b.publish('live', '../etc'), /bad FLV stream name/);
  });
});
