/**
 * Gateway-level fuzz: a real gateway process (`node dist/core/main.js site.json`, jt1078-ingest + flv-out) takes
 * well over 100,000 mutated and truncated JT/T 1078 packets (seeded PRNG: header bit flips, lying length fields,
 * truncation, random junk, false magics, valid headers with garbage bodies, oversized bodies, corrupted bodies,
 * scrambled sequence numbers and timestamps, other SIMs/channels, 2013 and 2019 layouts mixed) over several TCP
 * connections at once, reconnecting whenever the gateway closes one, while an HTTP-FLV player is attached to each
 * opened channel (between fuzz bursts the terminals send clean runs of their capture, so media keeps flowing). Then: the process is alive and healthy, logged no uncaught error, its memory after a full GC has
 * not grown past a stated bound, and a clean capture pushed afterwards on the same open request reaches the player
 * and what the player gets from then on decodes (ffprobe) at the capture's resolution.
 *
 * The gateway runs as a child process so its memory is its own (the test's players, buffers and generators are
 * not in it). Its heap is read after a full garbage collection through the V8 inspector (`--inspect` on a free
 * loopback port: HeapProfiler.collectGarbage, then process.memoryUsage()); RSS from /proc.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { encodePacket } from '../../plugins/jt1078-ingest/src/packer';
import { headerLength, type Jt1078Layout, type Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { parseFlv, type ReadTag } from '../support/flv-reader';
import { repoRoot, scratchDir } from '../support/paths';
import { requireTool } from '../support/tools';
import { capture, codedVideo, encodeCapture, expectedFrom, ffprobe, firstNonMonotonic, httpUrlOf, metricSum, prng } from './helpers';
import { randomBytes } from '../support/prng';

const MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
const AUTH = 'fuzz:fuzz';
const SIM = '013800138000';
const CHANNEL = 1;
const CLEAN = 'jt1078/glaciall-cif-h264-2013.bin';
const CLEAN_SIZE = '352x288';
/** mutated packets sent in the measured phase (clean runs and junk come on top) */
const FUZZ_MUTATED = 105_000;
const WARMUP_MUTATED = 20_000;
/**
 * Memory bounds. Growth is measured on the gateway's own process from a baseline taken after a warm-up fuzz phase
 * of the same kind (pools, code and lazily built state exist by then) to the end of the measured phase, both after
 * a full GC and with every player drained (no queued media).
 * What the gateway holds on purpose is capped in the site below and can legitimately differ between the two points
 * by at most those caps, per opened stream (3): the bus GOP (maxGopBytes 1 MiB of payload; its FLV form adds only
 * tag headers and the NAL units under 128 bytes, which flv-out copies), one frame in reassembly
 * (maxFrameBytes 256 KiB); plus a parser window per open link (64 KiB + a header, 5 links). About 7 MiB in all. So:
 * - V8 heap used + external memory (Buffers live outside the V8 heap: a leaked packet or chunk shows there) may
 *   grow by at most 16 MiB: the caps plus 9 MiB. A leak of 16 MiB or more over the phase fails it whatever the
 *   caches hold: >= 50 bytes per packet sent (~105,000 mutated + ~230,000 clean), or >= 512 KiB per connection
 *   (~30); with the caches at the same size at both points (as usual), 9 MiB of leak already does;
 * - V8 heap used alone (objects, not Buffers: per-link or per-stream bookkeeping) by at most 8 MiB;
 * - RSS after the phase by at most 64 MiB (the above plus allocator slack the OS does not get back at once), and
 *   at its peak during the phase by at most 96 MiB over the baseline (garbage awaiting collection, socket buffers).
 */
const HEAP_EXT_GROWTH_MAX = 16 * 1024 * 1024;
const HEAP_GROWTH_MAX = 8 * 1024 * 1024;
const RSS_GROWTH_MAX = 64 * 1024 * 1024;
const RSS_PEAK_MAX = 96 * 1024 * 1024;
const MiB = (n: number): string => (n / 1048576).toFixed(1);

// ---------------------------------------------------------------------------------------------------------------
// The gateway process and its inspector

interface GatewayProc {
  proc: ChildProcess;
  /** what the process wrote to stderr (the inspector's own lines included) */
  stderr(): string;
  pid: number;
  baseUrl: string;
  live2013: number;
  logFile: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  inspector: Inspector;
}

/** A minimal Chrome DevTools Protocol client over the inspector's WebSocket. */
class Inspector {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (d: Buffer) => {
      const m = JSON.parse(d.toString()) as { id?: number; result?: unknown; error?: { message: string } };
      const w = m.id !== undefined ? this.waiting.get(m.id) : undefined;
      if (!w) return;
      this.waiting.delete(m.id!);
      if (m.error) w.reject(new Error(m.error.message));
      else w.resolve(m.result);
    });
    ws.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error('inspector closed'));
      this.waiting.clear();
    });
    ws.on('error', () => undefined);
  }

  static async connect(url: string): Promise<Inspector> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    await once(ws, 'open');
    return new Inspector(ws);
  }

  call(method: string, params: Record<string, unknown> = {}): Promise<any> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** The gateway's process.memoryUsage() right after a full garbage collection. */
  async memoryAfterGc(): Promise<NodeJS.MemoryUsage> {
    await this.call('HeapProfiler.collectGarbage');
    await this.call('HeapProfiler.collectGarbage');
    const r = await this.call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
    return JSON.parse(r.result.value as string) as NodeJS.MemoryUsage;
  }

  close(): void {
    this.ws.terminate();
  }
}

function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

async function startGatewayProcess(dir: string, children: Set<ChildProcess>): Promise<GatewayProc> {
  const site = {
    gateway: {
      // one process: its memory is what the bounds below measure
      workers: 1,
      httpPort: 0,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'info',
      maxGopBytes: 1024 * 1024,
      applications: [{ appId: 'fuzz', user: 'fuzz', password: 'fuzz' }],
    },
    plugins: [
      {
        name: 'jt1078-ingest',
        config: {
          livePort2013: 0,
          livePort2019: 0,
          replayPort2013: 0,
          replayPort2019: 0,
          udp: false,
          // fuzz links that carry no opened channel are closed quickly (the test reconnects); the real terminal
          // may stay away as long as the test takes, its request stays open
          unknownGraceMs: 200,
          disconnectGraceMs: 120_000,
          maxFrameBytes: 256 * 1024,
        },
      },
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
    ],
  };
  const siteFile = path.join(dir, 'site.json');
  fs.writeFileSync(siteFile, JSON.stringify(site, null, 2));
  const logFile = path.join(dir, 'gateway.log');
  const log = fs.openSync(logFile, 'w');
  const proc = spawn(process.execPath, ['--inspect=127.0.0.1:0', MAIN, siteFile], {
    cwd: dir,
    stdio: ['ignore', log, 'pipe'],
    env: { PATH: process.env.PATH ?? '', HOME: dir },
  });
  fs.closeSync(log);
  children.add(proc);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => {
      children.delete(proc);
      resolve({ code, signal });
    }),
  );
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-20_000);
  });
  const deadline = Date.now() + 20_000;
  let started: { httpPort: number; ports: Record<string, number> } | undefined;
  let inspectUrl: string | undefined;
  while (!started || !inspectUrl) {
    if (proc.exitCode !== null || proc.signalCode !== null)
      throw new Error(`the gateway exited during start: ${stderr}\n${fs.readFileSync(logFile, 'utf8').slice(-4000)}`);
    if (Date.now() > deadline) throw new Error(`the gateway did not start within 20 s: ${stderr}\n${fs.readFileSync(logFile, 'utf8').slice(-4000)}`);
    inspectUrl ??= /Debugger listening on (ws:\/\/\S+)/.exec(stderr)?.[1];
    const line = fs
      .readFileSync(logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes('"msg":"gateway started"'));
    if (line) started = JSON.parse(line);
    await sleep(50);
  }
  const inspector = await Inspector.connect(inspectUrl);
  return {
    proc,
    stderr: () => stderr,
    pid: proc.pid!,
    baseUrl: `http://127.0.0.1:${started.httpPort}`,
    live2013: started.ports['jt1078-ingest.livePort2013'],
    logFile,
    exited,
    inspector,
  };
}

async function api(g: GatewayProc, method: string, p: string, body?: unknown, auth: string | null = AUTH): Promise<{ status: number; json: any }> {
  const res = await fetch(g.baseUrl + p, {
    method,
    headers: { ...(auth ? { authorization: 'Basic ' + Buffer.from(auth).toString('base64') } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const t = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(t);
  } catch {
    json = t;
  }
  return { status: res.status, json };
}

async function metricOf(g: GatewayProc, name: string, labels: Record<string, string> = {}): Promise<number> {
  const r = await api(g, 'GET', '/metrics', undefined, null);
  return metricSum(String(r.json), name, labels);
}

// ---------------------------------------------------------------------------------------------------------------
// The player: keeps the whole HTTP-FLV body (tag boundaries are only known from the start)

class Player {
  readonly chunks: Buffer[] = [];
  bytes = 0;
  lastDataAt = Date.now();
  endedAt = 0;
  private constructor(
    readonly status: number,
    private readonly req: http.ClientRequest,
    res: http.IncomingMessage,
  ) {
    res.on('data', (c: Buffer) => {
      this.chunks.push(c);
      this.bytes += c.length;
      this.lastDataAt = Date.now();
    });
    const done = (): void => {
      if (!this.endedAt) this.endedAt = Date.now();
    };
    res.on('end', done);
    res.on('close', done);
    res.on('error', done);
  }

  static connect(url: string): Promise<Player> {
    return new Promise((resolve, reject) => {
      const req = http.get(httpUrlOf(url), { agent: false }, (res) => resolve(new Player(res.statusCode ?? 0, req, res)));
      req.on('error', reject);
    });
  }

  data(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** Resolves once nothing has arrived for quietMs. */
  async quiet(quietMs: number, timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (Date.now() - this.lastDataAt < quietMs) {
      if (Date.now() > until) throw new Error(`the player did not go quiet within ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  close(): void {
    this.req.destroy();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Fuzz material

function randomSim(rnd: () => number, layout: Jt1078Layout): string {
  let s = '';
  for (let i = 0; i < (layout === '2019' ? 20 : 12); i++) s += String((rnd() * 10) | 0);
  return s;
}

type Fields = Parameters<typeof encodePacket>[0];

function fieldsOf(p: Jt1078Packet, layout: Jt1078Layout, target: Target): Fields {
  return {
    layout,
    sim: target.sim,
    channel: target.channel,
    pt: p.pt,
    marker: p.marker,
    seq: p.seq,
    dataType: p.dataType,
    subMark: p.subMark,
    timestamp: p.timestamp,
    lastIFrameInterval: p.lastIFrameInterval,
    lastFrameInterval: p.lastFrameInterval,
  };
}

interface FuzzCounts {
  /** mutated or truncated JT/T 1078 packets (each derived from a real packet's header) */
  mutated: number;
  /** clean packets sent in runs between the fuzz bursts */
  clean: number;
  /** pieces of random junk and false magics (not packets) */
  junk: number;
  bytes: number;
  kinds: Record<string, number>;
}

/** the SIM and channel a fuzz terminal pushes: an opened one, or one nobody opened */
interface Target {
  sim: string;
  channel: number;
}

/**
 * A capture played on and on as one stream (as the simulator loops it): each pass shifts timestamps by the
 * capture's span and sequence numbers by its packet count, so clean runs between fuzz bursts look like a terminal
 * that goes on sending.
 */
class Cursor {
  private i = 0;
  private pass = 0;
  constructor(private readonly cap: { packets: Jt1078Packet[]; loopShift: number }) {}
  next(): Jt1078Packet {
    const n = this.cap.packets.length;
    const p = this.cap.packets[this.i];
    const out = { ...p, seq: (p.seq + this.pass * n) & 0xffff, timestamp: p.timestamp + this.pass * this.cap.loopShift };
    if (++this.i === n) {
      this.i = 0;
      this.pass++;
    }
    return out;
  }
}

/**
 * One fuzz item made from the terminal's next packet: what goes on the wire (counted as a mutated packet or as junk).
 * `layout` is the connection's own; a quarter of the items use the other one.
 */
function fuzzItem(rnd: () => number, p: Jt1078Packet, target: Target, layout: Jt1078Layout, counts: FuzzCounts): Buffer[] {
  if (rnd() < 0.25) layout = layout === '2013' ? '2019' : '2013';
  const f = fieldsOf(p, layout, target);
  const h = headerLength(layout, p.dataType);
  const kind = (k: string, mutated = true): void => {
    counts.kinds[k] = (counts.kinds[k] ?? 0) + 1;
    if (mutated) counts.mutated++;
    else counts.junk++;
  };
  const r = rnd();
  if (r < 0.16) {
    const b = encodePacket(f, p.body);
    const n = 1 + ((rnd() * 4) | 0);
    for (let i = 0; i < n; i++) b[(rnd() * h) | 0] ^= 1 << ((rnd() * 8) | 0);
    kind('header bit flips');
    return [b];
  }
  if (r < 0.28) {
    const b = encodePacket(f, p.body);
    const len = rnd() < 0.5 ? (rnd() * 65536) | 0 : Math.max(0, p.body.length + ((rnd() * 64) | 0) - 32);
    b.writeUInt16BE(len, h - 2);
    kind('wrong length');
    return [b];
  }
  if (r < 0.42) {
    const b = encodePacket(f, p.body);
    kind('truncated');
    return [b.subarray(0, (rnd() * b.length) | 0)];
  }
  if (r < 0.54) {
    // a valid header (any data type / subpackage mark / payload type) with a body of random bytes
    const g = { ...f, dataType: (rnd() * 4) | 0, subMark: (rnd() * 4) | 0, pt: rnd() < 0.8 ? p.pt : (rnd() * 128) | 0 };
    kind('garbage body');
    return [encodePacket(g, randomBytes(rnd, (rnd() * 1200) | 0))];
  }
  if (r < 0.56) {
    // a valid header claiming a body far above the 950-byte subpackage limit, and the bytes to match
    kind('oversized body');
    return [encodePacket({ ...f, dataType: (rnd() * 2) | 0, subMark: 1 + ((rnd() * 3) | 0) }, randomBytes(rnd, 8192 + ((rnd() * 57000) | 0)))];
  }
  if (r < 0.64) {
    // a real packet whose payload is damaged (NAL headers, SPS, slice data, audio)
    const b = encodePacket(f, p.body);
    const n = 1 + ((rnd() * 16) | 0);
    if (b.length > h) for (let i = 0; i < n; i++) b[h + ((rnd() * (b.length - h)) | 0)] ^= 1 << ((rnd() * 8) | 0);
    kind('body bit flips');
    return [b];
  }
  if (r < 0.71) {
    // sequence number and device clock scrambled (jumps both ways, far and near)
    const ts = rnd() < 0.3 ? Math.floor(rnd() * 2 ** 48) : Math.max(0, p.timestamp + Math.floor((rnd() - 0.5) * 600_000));
    kind('seq/timestamp scrambled');
    return [encodePacket({ ...f, seq: rnd() < 0.5 ? (rnd() * 65536) | 0 : (p.seq + ((rnd() * 64) | 0) - 32) & 0xffff, timestamp: ts }, p.body)];
  }
  if (r < 0.75) {
    kind('other SIM/channel');
    return [encodePacket({ ...f, sim: randomSim(rnd, layout), channel: 1 + ((rnd() * 255) | 0) }, p.body)];
  }
  if (r < 0.79) {
    const b = encodePacket(f, p.body);
    kind('duplicated');
    counts.mutated++;
    return [b, b];
  }
  if (r < 0.82) {
    kind('transparent data');
    return [encodePacket({ ...f, dataType: 4, subMark: 0 }, randomBytes(rnd, (rnd() * 300) | 0))];
  }
  if (r < 0.92) {
    kind('random junk', false);
    return [randomBytes(rnd, 1 + ((rnd() * 512) | 0))];
  }
  // a false frame magic followed by garbage (a parser must not lock onto it)
  kind('false magic', false);
  return [Buffer.concat([Buffer.from('01cd', 'latin1'), randomBytes(rnd, (rnd() * 64) | 0)])];
}

interface WorkerStats {
  connections: number;
  closedByGateway: number;
  closedByUs: number;
}

interface WorkerOptions {
  /** the capture this terminal plays (and mutates) */
  source: { packets: Jt1078Packet[]; loopShift: number };
  target: Target;
  /** mutated packets this terminal sends */
  mutated: number;
  /** share of batches that are a clean run of the next packets instead of a fuzz burst */
  cleanShare: number;
  /** pause between batches, ms (0: as fast as the gateway reads) */
  pauseMs: number;
  /** end the connection and open a new one every few hundred batches */
  selfReconnect: boolean;
}

/**
 * One fuzzing terminal: plays its capture on one connection, as clean runs of packets alternating with fuzz bursts
 * of 64 items made from the packets in turn; writes in random chunk sizes (single bytes to 8 KiB), keeping up with
 * backpressure; hangs up and reconnects now and then (each connection picks a layout), and reconnects whenever the
 * gateway closes it.
 */
async function fuzzWorker(port: number, seed: number, o: WorkerOptions, counts: FuzzCounts, stats: WorkerStats): Promise<void> {
  const rnd = prng(seed);
  const cursor = new Cursor(o.source);
  let layout: Jt1078Layout = '2013';
  const connect = async (): Promise<{ s: net.Socket; closed: () => boolean; ending: () => void }> => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    await once(s, 'connect');
    stats.connections++;
    layout = rnd() < 0.3 ? '2019' : '2013';
    let weEnd = false;
    let gone = false;
    s.once('close', () => {
      gone = true;
      if (!weEnd) stats.closedByGateway++;
    });
    return {
      s,
      closed: () => gone,
      ending: () => {
        weEnd = true;
      },
    };
  };
  const endConn = async (c: { s: net.Socket; closed: () => boolean; ending: () => void }): Promise<void> => {
    c.ending();
    if (c.closed()) return;
    stats.closedByUs++;
    const closed = once(c.s, 'close').catch(() => undefined);
    c.s.end();
    const t = setTimeout(() => c.s.destroy(), 2000);
    await closed;
    clearTimeout(t);
  };
  let c = await connect();
  const nextReconnect = (): number => (o.selfReconnect ? 50 + ((rnd() * 250) | 0) : Infinity);
  let reconnectIn = nextReconnect();
  let mutated = 0;
  while (mutated < o.mutated) {
    if (c.closed()) c = await connect();
    const parts: Buffer[] = [];
    if (rnd() < o.cleanShare) {
      const run = 20 + ((rnd() * 300) | 0);
      for (let k = 0; k < run; k++) {
        const q = cursor.next();
        parts.push(encodePacket(fieldsOf(q, layout, o.target), q.body));
      }
      counts.clean += run;
    } else {
      const before = counts.mutated;
      for (let k = 0; k < 64; k++) parts.push(...fuzzItem(rnd, cursor.next(), o.target, layout, counts));
      mutated += counts.mutated - before;
    }
    const data = Buffer.concat(parts);
    counts.bytes += data.length;
    for (let at = 0; at < data.length && !c.closed();) {
      const n = rnd() < 0.1 ? 1 + ((rnd() * 16) | 0) : 1 + ((rnd() * 8192) | 0);
      c.s.write(data.subarray(at, at + n));
      at += n;
    }
    if (c.s.writableNeedDrain && !c.closed()) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          c.s.off('drain', done);
          c.s.off('close', done);
          resolve();
        };
        c.s.on('drain', done);
        c.s.on('close', done);
      });
    }
    if (--reconnectIn <= 0) {
      await endConn(c);
      c = await connect();
      reconnectIn = nextReconnect();
    }
    if (o.pauseMs > 0) await sleep(o.pauseMs);
    else await new Promise<void>((resolve) => setImmediate(resolve));
  }
  await endConn(c);
}

const SOURCES = {
  glaciall: 'jt1078/glaciall-cif-h264-2013.bin',
  gojt808: 'jt1078/gojt808-d1-h264-g711a-2013.bin',
  xunilcyl: 'jt1078/xunilcyl-d1-h264-2013.bin',
};
/** the opened channels (one terminal SIM; channel numbers no single bit flip turns into one another) */
const TARGETS = { glaciall: { sim: SIM, channel: CHANNEL }, gojt808: { sim: SIM, channel: 6 }, xunilcyl: { sim: SIM, channel: 24 } };
/** nobody opens it, and no mutation of a few bits turns it into an opened SIM and channel */
const UNOPENED: Target = { sim: '077777777777', channel: 200 };

/**
 * The fuzz phase, five terminals at once: one per opened channel (glaciall video, gojt808 video + G.711A, xunilcyl
 * video), a second one on the xunilcyl channel (the two take the stream from each other again and again), and one
 * on a channel nobody opened, paced and never hanging up itself, so the gateway's grace for links without an
 * opened channel runs out under it and it reconnects each time.
 */
async function fuzzPhase(port: number, seed: number, mutated: number): Promise<{ counts: FuzzCounts; stats: WorkerStats }> {
  const counts: FuzzCounts = { mutated: 0, clean: 0, junk: 0, bytes: 0, kinds: {} };
  const stats: WorkerStats = { connections: 0, closedByGateway: 0, closedByUs: 0 };
  const share = Math.ceil(mutated / 5);
  const src = (k: keyof typeof SOURCES) => capture(SOURCES[k]);
  await Promise.all([
    fuzzWorker(
      port,
      seed + 1,
      { source: src('glaciall'), target: TARGETS.glaciall, mutated: share, cleanShare: 0.5, pauseMs: 0, selfReconnect: true },
      counts,
      stats,
    ),
    fuzzWorker(
      port,
      seed + 2,
      { source: src('gojt808'), target: TARGETS.gojt808, mutated: share, cleanShare: 0.5, pauseMs: 0, selfReconnect: true },
      counts,
      stats,
    ),
    fuzzWorker(
      port,
      seed + 3,
      { source: src('xunilcyl'), target: TARGETS.xunilcyl, mutated: share, cleanShare: 0.5, pauseMs: 0, selfReconnect: true },
      counts,
      stats,
    ),
    fuzzWorker(
      port,
      seed + 4,
      { source: src('xunilcyl'), target: TARGETS.xunilcyl, mutated: share, cleanShare: 0.3, pauseMs: 1, selfReconnect: true },
      counts,
      stats,
    ),
    fuzzWorker(port, seed + 5, { source: src('glaciall'), target: UNOPENED, mutated: share, cleanShare: 0.2, pauseMs: 3, selfReconnect: false }, counts, stats),
  ]);
  return { counts, stats };
}

/** What the player got from byte offset `from` on, as an FLV ffprobe can read: header, the video sequence header in force, the tags. */
function flvFrom(buf: Buffer, tags: ReadTag[], from: number): Buffer {
  const after = tags.filter((t) => t.offset >= from);
  const firstCoded = after.findIndex((t) => t.type === 9 && !t.sequenceHeader);
  const hasHeader = after.slice(0, Math.max(0, firstCoded)).some((t) => t.type === 9 && t.sequenceHeader);
  const parts: Buffer[] = [buf.subarray(0, 13)];
  if (!hasHeader) {
    const seq = tags.filter((t) => t.offset < from && t.type === 9 && t.sequenceHeader).pop();
    if (seq) parts.push(buf.subarray(seq.offset, seq.offset + 11 + seq.body.length + 4));
  }
  if (after.length) parts.push(buf.subarray(after[0].offset));
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------------------------

describe('e2e: gateway-level fuzz (gateway process, 100,000+ mutated JT/T 1078 packets over TCP)', function () {
  this.timeout(60_000);
  const children = new Set<ChildProcess>();
  const killAll = (): void => {
    for (const c of children) c.kill('SIGKILL');
  };
  let dir: string;
  let g: GatewayProc | undefined;
  const players: Player[] = [];

  before(async () => {
    requireTool('ffprobe', 'ffmpeg');
    process.once('exit', killAll);
    dir = scratchDir('e2e-fuzz-gateway');
    g = await startGatewayProcess(dir, children);
  });
  after(async () => {
    for (const p of players) p.close();
    g?.inspector.close();
    if (g && g.proc.exitCode === null && g.proc.signalCode === null) {
      g.proc.kill('SIGTERM');
      const t = setTimeout(() => g!.proc.kill('SIGKILL'), 12_000);
      await g.exited;
      clearTimeout(t);
    }
    process.removeListener('exit', killAll);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('stays healthy with bounded memory, and a clean capture afterwards plays on the same request', async () => {
    const gw = g!;
    // one open request and one HTTP-FLV player per fuzzed channel; the glaciall one (channel 1) is checked at the end
    const reqIds: string[] = [];
    for (const t of Object.values(TARGETS)) {
      const open = await api(gw, 'POST', '/strm/open', { user: { token: 'tok-fuzz' }, typ: 'live', simNo: t.sim, chanId: t.channel, keepIntv: 600 });
      assert.equal(open.json.errCode, 0, JSON.stringify(open.json));
      const { reqId, playUrl } = open.json.data[0] as { reqId: string; playUrl: string };
      reqIds.push(reqId);
      const pl = await Player.connect(playUrl);
      assert.equal(pl.status, 200);
      players.push(pl);
    }
    const player = players[0];
    const allQuiet = async (ms: number): Promise<void> => {
      for (const p of players) await p.quiet(ms, 15_000);
    };

    // warm-up: the same kind of fuzz, so that pools, code and lazily built state exist before the baseline
    const warm = await fuzzPhase(gw.live2013, 1000, WARMUP_MUTATED);
    await allQuiet(500);
    const base = { ...(await gw.inspector.memoryAfterGc()), rssNow: rssOf(gw.pid) };
    const framesBefore = codedVideo(parseFlv(player.data(), { allowTruncated: true }).tags).length;

    // the measured phase, sampling RSS as it goes
    let peakRss = 0;
    const sampler = setInterval(() => {
      try {
        peakRss = Math.max(peakRss, rssOf(gw.pid));
      } catch {
        /* exited: checked below */
      }
    }, 100);
    const t0 = Date.now();
    let fuzz: Awaited<ReturnType<typeof fuzzPhase>>;
    try {
      fuzz = await fuzzPhase(gw.live2013, 7, FUZZ_MUTATED);
    } finally {
      clearInterval(sampler);
    }
    const fuzzMs = Date.now() - t0;
    assert.equal(gw.proc.exitCode, null, 'the gateway process is still running');
    assert.equal(gw.proc.signalCode, null, 'the gateway process is still running');
    assert.ok(fuzz.counts.mutated >= 100_000, `at least 100,000 mutated packets sent (${fuzz.counts.mutated})`);
    assert.ok(fuzz.stats.closedByGateway >= 3, `the gateway closed fuzz connections and the terminals reconnected (${JSON.stringify(fuzz.stats)})`);

    await allQuiet(1000);
    const end = { ...(await gw.inspector.memoryAfterGc()), rssNow: rssOf(gw.pid) };
    const heapGrowth = end.heapUsed - base.heapUsed;
    const heapExtGrowth = end.heapUsed + end.external - (base.heapUsed + base.external);
    const rssGrowth = end.rssNow - base.rssNow;
    const memo =
      `heap after GC ${MiB(base.heapUsed)} -> ${MiB(end.heapUsed)} MiB, external ${MiB(base.external)} -> ${MiB(end.external)} MiB, ` +
      `RSS ${MiB(base.rssNow)} -> ${MiB(end.rssNow)} MiB (peak ${MiB(peakRss)}); fuzz ${fuzzMs} ms: ${fuzz.counts.mutated} mutated, ` +
      `${fuzz.counts.clean} clean, ${fuzz.counts.junk} junk, ${MiB(fuzz.counts.bytes)} MiB; ${JSON.stringify(fuzz.stats)}; warm-up ${JSON.stringify(warm.stats)}`;
    const framesDuring = codedVideo(parseFlv(player.data(), { allowTruncated: true }).tags).length - framesBefore;

    // healthy, and nothing went uncaught
    const health = await api(gw, 'GET', '/healthz', undefined, null);
    assert.equal(health.status, 200);
    assert.equal(health.json.status, 'ok');
    const lines = fs
      .readFileSync(gw.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string });
    if (process.env.GW_FUZZ_VERBOSE) {
      const byMsg: Record<string, number> = {};
      for (const l of lines) byMsg[`${l.level} ${l.msg}`] = (byMsg[`${l.level} ${l.msg}`] ?? 0) + 1;
      console.log(
        `      ${memo}\n      ${JSON.stringify(fuzz.counts.kinds)}\n      channel 1 player: ${framesDuring} frames during the measured fuzz; ` +
          `players ${players.map((p) => MiB(p.bytes)).join(', ')} MiB\n      log: ${JSON.stringify(byMsg)}`,
      );
    }
    const bad = lines.filter((l) => l.level >= 50 || /uncaught|unhandled/i.test(l.msg));
    assert.deepEqual(
      bad.map((l) => `${l.level} ${l.msg}`),
      [],
      'no error, uncaught exception or unhandled rejection logged',
    );
    assert.ok(
      lines.some((l) => l.msg === 'terminal link closed'),
      "the gateway's log is the one read",
    );
    const stderr = gw
      .stderr()
      .split('\n')
      .filter((l) => l.trim() && !/^(Debugger listening on|For help, see|Debugger attached)/.test(l));
    assert.deepEqual(stderr, [], "nothing on stderr but the inspector's own lines");
    const resyncs = await metricOf(gw, 'gw_jt1078_ingest_listener_resyncs', { listener: 'live2013' });
    assert.ok(resyncs > 1000, `the parser resynchronised after junk again and again (${resyncs})`);
    assert.deepEqual(
      players.map((p) => p.endedAt),
      players.map(() => 0),
      'every player is still attached',
    );
    const status = await api(gw, 'GET', '/strm/status');
    const open = new Set((status.json.data as Array<{ reqId: string }>).map((x) => x.reqId));
    assert.ok(
      reqIds.every((r) => open.has(r)),
      'every request is still open',
    );
    // between the bursts the channel's terminal sent clean runs: the player kept getting video through the fuzz
    assert.ok(framesDuring > 0, `the channel 1 player got frames during the fuzz (${framesDuring})`);

    assert.ok(heapExtGrowth <= HEAP_EXT_GROWTH_MAX, `heap + external growth ${MiB(heapExtGrowth)} MiB within ${MiB(HEAP_EXT_GROWTH_MAX)} MiB (${memo})`);
    assert.ok(heapGrowth <= HEAP_GROWTH_MAX, `heap growth ${MiB(heapGrowth)} MiB within ${MiB(HEAP_GROWTH_MAX)} MiB (${memo})`);
    assert.ok(rssGrowth <= RSS_GROWTH_MAX, `RSS growth ${MiB(rssGrowth)} MiB within ${MiB(RSS_GROWTH_MAX)} MiB (${memo})`);
    assert.ok(peakRss - base.rssNow <= RSS_PEAK_MAX, `peak RSS ${MiB(peakRss)} MiB within ${MiB(RSS_PEAK_MAX)} MiB of the baseline (${memo})`);

    // the clean capture, on the same open request, from a new connection of the terminal
    const mark = player.bytes;
    const clean = capture(CLEAN).packets;
    const want = expectedFrom(clean);
    const sock = net.connect({ host: '127.0.0.1', port: gw.live2013 });
    sock.on('error', () => undefined);
    await once(sock, 'connect');
    const bufs = encodeCapture(clean, { sim: SIM, channel: CHANNEL });
    for (let i = 0; i < bufs.length; i += 64) {
      if (!sock.write(Buffer.concat(bufs.slice(i, i + 64)))) await once(sock, 'drain');
    }
    const framesAfter = (): number => codedVideo(parseFlv(player.data(), { allowTruncated: true }).tags.filter((t) => t.offset >= mark)).length;
    const deadline = Date.now() + 20_000;
    while (framesAfter() < want.video && Date.now() < deadline) await sleep(200);
    await player.quiet(500, 10_000);
    sock.destroy();

    const buf = player.data();
    const flv = parseFlv(buf, { allowTruncated: true });
    const allVideo = codedVideo(flv.tags);
    assert.equal(firstNonMonotonic(allVideo, true), -1, 'video timestamps never went backwards for the player, fuzz included');
    const after = allVideo.filter((t) => t.offset >= mark);
    assert.equal(after.length, want.video, 'every frame of the clean capture from its first keyframe reaches the player');
    assert.equal(after[0].keyframe, true, 'the clean capture starts at a keyframe');
    const p = ffprobe(flvFrom(buf, flv.tags, mark), 'flv');
    assert.equal(`${p.codec} ${p.width}x${p.height}`, `h264 ${CLEAN_SIZE}`, "what the player got after the fuzz decodes at the capture's resolution");
    assert.equal(p.frames, want.video, 'ffprobe decodes every frame after the fuzz');
    assert.equal(p.errors, '', 'without a decoder complaint');
  });
});
