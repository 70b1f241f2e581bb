/**
 * Ingest to HTTP-FLV under load: N simulated terminals pushing JT/T 1078 over TCP at about X Mbit/s each, one
 * HTTP-FLV player per terminal, all on loopback. The gateway runs as its own process pinned to core 0; the
 * terminals and players run here, pinned to core 1. After a warm-up, a measured window reports throughput in and
 * out, the gateway's CPU (/proc utime+stime) and RSS (VmRSS), and the latency the gateway adds (frame read to
 * FLV tag written, from its /metrics), plus an end-to-end latency seen by the players.
 * Target: 500 terminals, one player each, under 80% of one core, p99 under 50 ms, RSS under 500 MB.
 *
 *   node dist/test/bench/run.js ingest-flv [--terminals N] [--seconds S] [--mbps X] [--capture FILE]
 *        [--ramp] [--ramp-seconds S] [--warmup S] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once, setMaxListeners } from 'node:events';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixturePath, repoRoot, scratchDir } from '../support/paths';
import { FlvPlayCounter } from './support/flv-play-counter';
import {
  bucketsDelta, bucketsOf, coreTimes, cpuSeconds, histogramQuantile, parsePrometheus, quantile, rssBytes, summariseCpuProfile, sumOf,
  type Buckets, type Sample,
} from './support/process-probe';
import { SENT_RING, SynthTerminal, synthesise, type SynthStream } from './support/synth-terminals';

export interface IngestFlvOptions {
  terminals: number;
  seconds: number;
  mbps: number;
  capture: string;
  ramp: boolean;
  rampSeconds: number;
  warmup: number;
  profile: boolean;
  pin: boolean;
  keepDir: boolean;
  /** extra node options for the gateway process (e.g. --trace-gc) */
  nodeOpts: string[];
}

export interface IngestFlvResult {
  terminals: number;
  playersConnected: number;
  /** players that got no video tag during the measured window */
  stalledPlayers: number;
  seconds: number;
  mbpsIn: number;
  mbpsOut: number;
  gatewayMbpsIn: number;
  gatewayMbpsOut: number;
  cpuPct: number;
  rssMB: number;
  peakRssMB: number;
  idleRssMB: number;
  addedLatencyMs: { p50: number; p99: number; count: number };
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  endToEndMs: { p50: number; p99: number; count: number };
  generatorCpuPct: number;
  /** CPU other processes used in the window, in cores (the gateway, this process and interrupts left out) */
  othersCores: number;
  /** interrupt time in the window, in cores (the kernel delivering loopback TCP, charged to no process) */
  irqCores: number;
  /** core 0 (the gateway's) busy % */
  core0BusyPct: number;
  /** this process's own event-loop delay in the window: when high, end-to-end figures include our stalls */
  generatorLoopDelayMs: { p99: number; max: number };
  droppedFrames: number;
  profile?: string;
}

const GATEWAY_MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
const TARGET = { terminals: 500, cpuPct: 80, p99Ms: 50, rssMB: 500 };
const LATENCY_METRIC = 'gw_flv_out_added_latency_seconds';
/** a terminal socket holding this much unsent data means the gateway is not keeping up: frames are dropped */
const MAX_SEND_BACKLOG = 1024 * 1024;
const OPEN_CONCURRENCY = 16;
const HTTP_TIMEOUT_MS = 15_000;
const BOOT_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 10_000;
const TICK_MS = 4;
/** kept samples of end-to-end latency; later ones replace random earlier ones (reservoir) */
const E2E_SAMPLES = 1_000_000;

export const USAGE = `usage: npm run bench -- ingest-flv [--terminals N] [--seconds S] [--mbps X] [--capture FILE] [--ramp]
                       [--ramp-seconds S] [--warmup S] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
  --terminals N     simulated terminals, one HTTP-FLV player each (default 500)
  --seconds S       measured window (default 30)
  --mbps X          per-terminal rate in Mbit/s; the capture's video frames are padded up to it (default 1)
  --capture FILE    JT/T 1078 capture to re-pack (default shared/fixtures/jt1078/glaciall-cif-h264-2013.bin)
  --ramp            open terminals gradually (over --ramp-seconds, default 20) instead of all at once
  --warmup S        seconds of load before the window opens (default 5)
  --profile         run the gateway under node --cpu-prof and print its top self-time functions
  --no-pin          do not pin the gateway to core 0 and this process to core 1
  --keep-dir        keep the scratch directory (site file, gateway log, data)
  --node-opt OPT    pass a node option to the gateway process, e.g. --node-opt --trace-gc (with --keep-dir to read its log)`;

export function parseArgs(args: string[]): IngestFlvOptions {
  const o: IngestFlvOptions = {
    terminals: 500, seconds: 30, mbps: 1, capture: '', ramp: false, rampSeconds: 20, warmup: 5, profile: false, pin: true, keepDir: false,
    nodeOpts: [],
  };
  const num = (i: number, flag: string, min: number, max: number, int: boolean): number => {
    const v = args[i + 1];
    const n = Number(v);
    if (v === undefined || v.startsWith('--') || !Number.isFinite(n) || n < min || n > max || (int && !Number.isInteger(n))) {
      throw new Error(`${flag} needs ${int ? 'a whole number' : 'a number'} from ${min} to ${max}${v === undefined ? '' : `, got '${v}'`}\n\n${USAGE}`);
    }
    return n;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    switch (a) {
      case '--terminals': o.terminals = num(i++, a, 1, 5000, true); break;
      case '--seconds': o.seconds = num(i++, a, 1, 3600, false); break;
      case '--mbps': o.mbps = num(i++, a, 0.01, 100, false); break;
      case '--warmup': o.warmup = num(i++, a, 0, 600, false); break;
      case '--ramp-seconds': o.rampSeconds = num(i++, a, 0, 3600, false); o.ramp = true; break;
      case '--capture': {
        const v = args[++i];
        if (v === undefined || v.startsWith('--')) throw new Error(`--capture needs a file\n\n${USAGE}`);
        o.capture = v;
        break;
      }
      case '--node-opt': {
        const v = args[++i];
        if (v === undefined || !v.startsWith('--')) throw new Error(`--node-opt needs a node option such as --trace-gc\n\n${USAGE}`);
        o.nodeOpts.push(v);
        break;
      }
      case '--ramp': o.ramp = true; break;
      case '--profile': o.profile = true; break;
      case '--no-pin': o.pin = false; break;
      case '--keep-dir': o.keepDir = true; break;
      case '-h': case '--help': throw new Error(USAGE);
      default: throw new Error(`unknown argument '${a}'\n\n${USAGE}`);
    }
  }
  if (!o.capture) o.capture = fixturePath('jt1078/glaciall-cif-h264-2013.bin');
  else if (!fs.existsSync(o.capture)) throw new Error(`capture file '${o.capture}' not found`);
  return o;
}

// ------------------------------------------------------------------------------------------------------------
// small helpers

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Throws when the benchmark's overall deadline passed (every wait loop checks it). */
function checkDeadline(signal: AbortSignal): void {
  if (!signal.aborted) return;
  const r = signal.reason as unknown;
  const why = r instanceof Error ? (r.name === 'TimeoutError' ? 'the overall time budget ran out' : r.message) : String(r);
  throw new Error(`benchmark aborted: ${why}`);
}

async function connectTcp(port: number, signal: AbortSignal): Promise<net.Socket> {
  const s = net.connect({ host: '127.0.0.1', port });
  s.setNoDelay(true);
  try {
    await once(s, 'connect', { signal: AbortSignal.any([signal, AbortSignal.timeout(CONNECT_TIMEOUT_MS)]) });
  } catch (err) {
    s.destroy();
    throw new Error(`cannot connect to 127.0.0.1:${port}: ${(err as Error).message}`);
  }
  return s;
}

/** Runs `fn` over items with at most `limit` in flight, optionally spacing starts `gapMs` apart. */
async function pool<T>(items: T[], limit: number, gapMs: number, fn: (item: T, i: number) => Promise<void>, signal: AbortSignal): Promise<void> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < items.length) {
      checkDeadline(signal);
      const i = next++;
      if (gapMs > 0) {
        const wait = started + i * gapMs - performance.now();
        if (wait > 0) await sleep(wait, undefined, { signal });
      }
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

class Api {
  private readonly auth = 'Basic ' + Buffer.from('bench:bench').toString('base64');
  constructor(readonly port: number, private readonly signal: AbortSignal) {}

  private async call(method: string, p: string, body?: unknown): Promise<Response> {
    return fetch(`http://127.0.0.1:${this.port}${p}`, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json', Authorization: this.auth },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.any([this.signal, AbortSignal.timeout(HTTP_TIMEOUT_MS)]),
    });
  }

  async post<T>(p: string, body: unknown): Promise<T> {
    const res = await this.call('POST', p, body);
    const text = await res.text();
    let doc: { errCode?: number; message?: string; data?: T };
    try {
      doc = JSON.parse(text);
    } catch {
      throw new Error(`POST ${p}: HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`);
    }
    if (doc.errCode !== 0) throw new Error(`POST ${p}: errCode ${doc.errCode}: ${doc.message}`);
    return doc.data as T;
  }

  async metrics(): Promise<Map<string, Sample[]>> {
    const res = await this.call('GET', '/metrics');
    if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status}`);
    return parsePrometheus(await res.text());
  }

  async healthy(): Promise<boolean> {
    try {
      const res = await this.call('GET', '/healthz');
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  }
}

interface OpenResult {
  reqId: string;
  playUrl: string;
  host: string;
  port: number;
  tcp: boolean;
}

/** One HTTP-FLV player: a raw socket and a counter; it matches video tags to the terminal's send times. */
class Player {
  readonly counter: FlvPlayCounter;
  socket?: net.Socket;
  closed = false;
  /** index into the terminal's ring of sent video frames */
  private readPos = 0;
  private lastT = -1;
  measuring = false;
  videoInWindow = 0;

  constructor(private readonly term: SynthTerminal, private readonly e2e: Reservoir) {
    this.counter = new FlvPlayCounter((type, ts) => this.onTag(type, ts));
  }

  async connect(url: URL, signal: AbortSignal): Promise<void> {
    const s = await connectTcp(Number(url.port || 80), signal);
    this.socket = s;
    s.on('data', (chunk: Buffer) => {
      this.counter.push(chunk);
      if (this.counter.error !== undefined) s.destroy();
    });
    s.on('error', () => undefined);
    s.on('close', () => { this.closed = true; });
    s.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n`);
  }

  private onTag(type: number, ts: number): void {
    if (type !== 9 || ts === this.lastT) return; // a sequence header shares its keyframe's timestamp
    this.lastT = ts;
    if (!this.measuring) return;
    this.videoInWindow++;
    const t = this.term;
    if (t.sentCount - this.readPos > SENT_RING) this.readPos = t.sentCount - SENT_RING;
    while (this.readPos < t.sentCount && t.sentT[this.readPos % SENT_RING] < ts) this.readPos++;
    if (this.readPos < t.sentCount && t.sentT[this.readPos % SENT_RING] === ts) {
      this.e2e.add(performance.now() - t.sentAt[this.readPos % SENT_RING]);
    } else {
      this.e2e.unmatched++;
    }
  }
}

class Reservoir {
  private readonly samples = new Float64Array(E2E_SAMPLES);
  seen = 0;
  unmatched = 0;
  add(v: number): void {
    if (this.seen < E2E_SAMPLES) this.samples[this.seen] = v;
    else {
      const j = Math.floor(Math.random() * (this.seen + 1));
      if (j < E2E_SAMPLES) this.samples[j] = v;
    }
    this.seen++;
  }
  values(): Float64Array {
    return this.samples.subarray(0, Math.min(this.seen, E2E_SAMPLES));
  }
}

function pinSelf(core: number): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

function haveTaskset(): boolean {
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

interface Gateway {
  child: ChildProcess;
  pid: number;
  exited: Promise<number | null>;
  logFile: string;
}

function startGateway(siteFile: string, dir: string, pin: boolean, profileDir: string | undefined, nodeOpts: string[]): Gateway {
  const nodeArgs = [...nodeOpts, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), GATEWAY_MAIN, siteFile];
  const [cmd, args] = pin ? ['taskset', ['-c', '0', process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const logFile = path.join(dir, 'gateway.log');
  const log = fs.openSync(logFile, 'w');
  const child = spawn(cmd, args, { cwd: dir, stdio: ['ignore', log, log], env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? dir } });
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error('could not start the gateway process');
  // taskset execs node in place, so this pid is the gateway's own
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, pid: child.pid, exited, logFile };
}

async function stopGateway(g: Gateway): Promise<void> {
  if (g.child.exitCode !== null || g.child.signalCode !== null) return;
  g.child.kill('SIGTERM');
  const timer = setTimeout(() => g.child.kill('SIGKILL'), 15_000);
  await g.exited;
  clearTimeout(timer);
}

function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
const mb = (bytes: number) => bytes / (1024 * 1024);

// ------------------------------------------------------------------------------------------------------------

export async function run(args: string[]): Promise<IngestFlvResult> {
  const o = parseArgs(args);
  const stream = synthesise(o.capture, o.mbps);
  return runWith(o, stream);
}

async function runWith(o: IngestFlvOptions, stream: SynthStream): Promise<IngestFlvResult> {
  if (!fs.existsSync(GATEWAY_MAIN)) throw new Error(`${GATEWAY_MAIN} not found: build first (npm run bench does)`);
  const rampS = o.ramp ? o.rampSeconds : 0;
  // every phase has a bound; past the whole budget everything is torn down
  const budgetMs = (BOOT_TIMEOUT_MS + 60_000 + o.terminals * 200 + (rampS + o.warmup + o.seconds) * 1000 + 60_000);
  // Ctrl-C or a kill ends the run through the same teardown as an error: nothing is left running
  const interrupted = new AbortController();
  const onSignal = (sig: string) => interrupted.abort(new Error(`interrupted by ${sig}`));
  // (on, not once: a second Ctrl-C while tearing down must not kill us before the gateway is stopped)
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const deadline = AbortSignal.any([AbortSignal.timeout(budgetMs), interrupted.signal]);
  // every connect, HTTP call and wait listens on it for a moment: many at once is expected, not a leak
  setMaxListeners(0, deadline);
  const dir = scratchDir('bench-ingest-flv');
  const profileDir = o.profile ? fs.mkdtempSync(path.join(repoRoot, '.test-tmp', 'bench-profile-')) : undefined;
  const pin = o.pin && haveTaskset() && os.cpus().length >= 2;
  if (o.pin && !pin) console.warn('ingest-flv: taskset or a second core is missing: running unpinned (CPU % is then less exact)');

  const httpPort = await freePort();
  const site = {
    gateway: {
      httpPort, listenHost: '127.0.0.1', publicHost: '127.0.0.1', dataDir: path.join(dir, 'data'), logLevel: 'warn',
      applications: [{ appId: 'bench', user: 'bench', password: 'bench' }],
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } },
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
    ],
  };
  const siteFile = path.join(dir, 'site.json');
  fs.writeFileSync(siteFile, JSON.stringify(site, null, 2));

  console.log(
    `ingest-flv: ${o.terminals} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s (${path.basename(o.capture)}: ` +
    `${f2((stream.captureBytesPerSecond * 8) / 1e6)} Mbit/s of frames, video padded x${f2(stream.padFactor)}; ` +
    `${f1(stream.framesPerSecond)} frames/s, ${f1(stream.packetsPerSecond)} packets/s each), one HTTP-FLV player each; ` +
    `${o.ramp ? `ramp ${rampS} s, ` : ''}warm-up ${o.warmup} s, measured ${o.seconds} s`,
  );
  if (stream.padFactor === 1 && (stream.bytesPerSecond * 8) / 1e6 > o.mbps * 1.05) {
    console.warn(`ingest-flv: the capture alone runs above ${o.mbps} Mbit/s; it is sent unpadded`);
  }

  const gw = startGateway(siteFile, dir, pin, profileDir, o.nodeOpts);
  const killGateway = () => gw.child.kill('SIGKILL'); // last resort if this process exits mid-run
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  const players: Player[] = [];
  const e2e = new Reservoir();
  let ticker: NodeJS.Timeout | undefined;
  let keeper: NodeJS.Timeout | undefined;
  let result: IngestFlvResult | undefined;
  try {
    // --- boot
    const bootBy = performance.now() + BOOT_TIMEOUT_MS;
    while (!(await api.healthy())) {
      if (gw.child.exitCode !== null) throw new Error(`gateway exited during boot (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
      if (performance.now() > bootBy) throw new Error(`gateway not healthy within ${BOOT_TIMEOUT_MS / 1000} s:\n${tail(gw.logFile)}`);
      checkDeadline(deadline);
      await sleep(100);
    }
    if (pin && !pinSelf(1)) console.warn('ingest-flv: could not pin this process to core 1');
    const idleRss = rssBytes(gw.pid);
    console.log(`  gateway pid ${gw.pid}${pin ? ' on core 0, load generator and players on core 1' : ' (unpinned)'}; idle RSS ${f1(mb(idleRss))} MB`);

    // --- one timer paces every terminal
    let lateTicks = 0;
    let lastTick = performance.now();
    ticker = setInterval(() => {
      const now = performance.now();
      if (now - lastTick > 50) lateTicks++;
      lastTick = now;
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);

    // --- open, connect, play
    const reqIds: string[] = [];
    const opened = performance.now();
    const frameSpread = stream.frames.length > 1 ? stream.frames[1].t - stream.frames[0].t : 40;
    const sims = Array.from({ length: o.terminals }, (_x, i) => String(13900000000 + i));
    await pool(sims, OPEN_CONCURRENCY, rampS > 0 ? (rampS * 1000) / o.terminals : 0, async (sim, i) => {
      const [r] = await api.post<OpenResult[]>('/strm/open', { user: { token: 't' }, typ: 'live', simNo: sim, chanId: 1, keepIntv: 600 });
      if (!r || !r.playUrl) throw new Error(`open ${sim}: no play URL in the response`);
      if (!r.tcp) throw new Error(`open ${sim}: the gateway advertises UDP; this benchmark pushes over TCP`);
      if (!isLoopback(r.host)) throw new Error(`open ${sim}: push host ${r.host} is not a loopback address`);
      const url = new URL(r.playUrl.replace(/^ws/, 'http'));
      if (!isLoopback(url.hostname)) throw new Error(`open ${sim}: play URL host ${url.hostname} is not a loopback address`);
      reqIds.push(r.reqId);
      const sock = await connectTcp(r.port, deadline);
      sock.on('error', () => undefined);
      sock.on('data', () => undefined); // the gateway sends nothing on this link; drain whatever it does send
      const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
      // spread the terminals over one frame interval so their frames do not all land in the same instant
      // and start each at a different I frame, so the sum of their rates follows the capture's average
      const first = stream.keyframes[(i * 7) % stream.keyframes.length];
      term.start(performance.now() + ((i * frameSpread) / o.terminals) % frameSpread, first);
      terminals.push(term);
      const player = new Player(term, e2e);
      players.push(player);
      await player.connect(url, deadline);
    }, deadline);
    console.log(`  ${o.terminals} opened, pushing and playing in ${f1((performance.now() - opened) / 1000)} s`);

    // keep the requests alive however long the run is (keepIntv 600)
    const keepAll = async () => {
      for (let i = 0; i < reqIds.length; i += 1000) await api.post('/strm/keep', { reqIds: reqIds.slice(i, i + 1000) });
    };
    await keepAll();
    keeper = setInterval(() => { keepAll().catch((err) => console.warn(`ingest-flv: keep failed: ${(err as Error).message}`)); }, 300_000);

    // --- warm-up
    await sleep(o.warmup * 1000, undefined, { signal: deadline });
    checkDeadline(deadline);
    if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

    // --- measured window
    const m0 = await api.metrics(); // also resets the gateway's event-loop delay window
    const snap = () => ({
      at: performance.now(), cpu: cpuSeconds(gw.pid), self: process.cpuUsage(), cores: coreTimes(),
      bytesIn: terminals.reduce((s, t) => s + t.bytes, 0), bytesOut: players.reduce((s, p) => s + p.counter.bytes, 0),
      dropped: terminals.reduce((s, t) => s + t.dropped, 0),
    });
    for (const p of players) p.measuring = true;
    const ownLoop = monitorEventLoopDelay({ resolution: 10 });
    ownLoop.enable();
    const s0 = snap();
    let peakRss = 0;
    const rssSamples: number[] = [];
    const windowEnd = s0.at + o.seconds * 1000;
    while (performance.now() < windowEnd) {
      await sleep(Math.min(1000, Math.max(1, windowEnd - performance.now())), undefined, { signal: deadline });
      if (gw.child.exitCode !== null) throw new Error(`gateway exited during the window (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
      const r = rssBytes(gw.pid);
      rssSamples.push(r);
      if (r > peakRss) peakRss = r;
    }
    const s1 = snap();
    ownLoop.disable();
    for (const p of players) p.measuring = false;
    const m1 = await api.metrics();
    const secs = (s1.at - s0.at) / 1000;

    const lat = bucketsDelta(bucketsOf(m1, LATENCY_METRIC) ?? { le: [Infinity], counts: [0] }, bucketsOf(m0, LATENCY_METRIC) as Buckets | undefined);
    const gwIn = sumOf(m1, 'gw_jt1078_ingest_bytes_total') - sumOf(m0, 'gw_jt1078_ingest_bytes_total');
    const gwOut = sumOf(m1, 'gw_flv_out_bytes_out') - sumOf(m0, 'gw_flv_out_bytes_out');
    const selfCpu = (s1.self.user - s0.self.user + s1.self.system - s0.self.system) / 1e6;
    const e2eVals = e2e.values();
    const machineBusy = s1.cores.reduce((sum, c, i) => sum + c.busy - (s0.cores[i]?.busy ?? 0), 0);
    const machineIrq = s1.cores.reduce((sum, c, i) => sum + c.irq - (s0.cores[i]?.irq ?? 0), 0);
    const core0 = s1.cores[0] && s0.cores[0] ? (s1.cores[0].busy - s0.cores[0].busy) / Math.max(1e-9, s1.cores[0].total - s0.cores[0].total) : NaN;
    result = {
      terminals: o.terminals,
      playersConnected: players.filter((p) => !p.closed && p.counter.error === undefined).length,
      stalledPlayers: players.filter((p) => p.videoInWindow === 0).length,
      seconds: secs,
      mbpsIn: ((s1.bytesIn - s0.bytesIn) * 8) / secs / 1e6,
      mbpsOut: ((s1.bytesOut - s0.bytesOut) * 8) / secs / 1e6,
      gatewayMbpsIn: (gwIn * 8) / secs / 1e6,
      gatewayMbpsOut: (gwOut * 8) / secs / 1e6,
      cpuPct: (100 * (s1.cpu - s0.cpu)) / secs,
      rssMB: mb(rssSamples[rssSamples.length - 1] ?? rssBytes(gw.pid)),
      peakRssMB: mb(peakRss),
      idleRssMB: mb(idleRss),
      addedLatencyMs: { p50: histogramQuantile(lat, 0.5) * 1000, p99: histogramQuantile(lat, 0.99) * 1000, count: lat.counts[lat.counts.length - 1] ?? 0 },
      eventLoopDelayMs: {
        p50: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p50_seconds') * 1000,
        p99: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p99_seconds') * 1000,
        max: sumOf(m1, 'gw_process_nodejs_eventloop_lag_max_seconds') * 1000,
      },
      endToEndMs: { p50: quantile(e2eVals, 0.5), p99: quantile(e2eVals, 0.99), count: e2e.seen },
      generatorCpuPct: (100 * selfCpu) / secs,
      othersCores: Math.max(0, (machineBusy - machineIrq - (s1.cpu - s0.cpu) - selfCpu) / secs),
      irqCores: machineIrq / secs,
      core0BusyPct: 100 * core0,
      generatorLoopDelayMs: { p99: ownLoop.percentile(99) / 1e6, max: ownLoop.max / 1e6 },
      droppedFrames: s1.dropped - s0.dropped,
    };
    const errors = players.map((p) => p.counter.error).filter((e): e is string => e !== undefined);
    report(result, m1, lateTicks, e2e.unmatched, errors);
  } catch (err) {
    // an abort surfaces as a bare AbortError from whatever was waiting: say why instead
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    if (keeper) clearInterval(keeper);
    for (const p of players) p.socket?.destroy();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (!o.keepDir) fs.rmSync(dir, { recursive: true, force: true });
    else console.log(`  scratch directory kept: ${dir}`);
  }
  if (profileDir) {
    const files = fs.readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'));
    if (files.length === 0) console.warn(`ingest-flv: no .cpuprofile written in ${profileDir}`);
    else {
      const file = path.join(profileDir, files[0]);
      printProfile(file);
      if (result) result.profile = file;
    }
  }
  if (!result) throw new Error('no result'); // unreachable: every path without one throws above
  return result;
}

function report(r: IngestFlvResult, m: Map<string, Sample[]>, lateTicks: number, unmatched: number, errors: string[]): void {
  const cores = r.cpuPct / 100;
  const lines = [
    `  streams: ${r.terminals} terminals, ${r.playersConnected} players connected (gateway counts ${sumOf(m, 'gw_flv_out_streams')} FLV streams, ` +
      `${sumOf(m, 'gw_flv_out_players')} players, ${sumOf(m, 'gw_jt1078_ingest_links')} links); ${r.stalledPlayers} players got no video in the window`,
    `  in:  ${f1(r.mbpsIn)} Mbit/s sent by the terminals (gateway read ${f1(r.gatewayMbpsIn)})`,
    `  out: ${f1(r.mbpsOut)} Mbit/s read by the players (gateway wrote ${f1(r.gatewayMbpsOut)})`,
    `  gateway CPU: ${f1(r.cpuPct)} % of one core over ${f1(r.seconds)} s  ->  per core: ${f1(r.mbpsIn / cores)} Mbit/s in, ` +
      `${f1(r.mbpsOut / cores)} Mbit/s out, ${f1(r.terminals / cores)} streams`,
    `  gateway RSS: ${f1(r.rssMB)} MB at the end, ${f1(r.peakRssMB)} MB peak in the window (${f1(r.idleRssMB)} MB idle)`,
    `  added latency, frame read -> FLV tags written (gateway metric, ${r.addedLatencyMs.count} frames): ` +
      `p50 ${f2(r.addedLatencyMs.p50)} ms, p99 ${f2(r.addedLatencyMs.p99)} ms`,
    `  gateway event-loop delay (a 10 ms timer's lateness plus its 10 ms): p50 ${f2(r.eventLoopDelayMs.p50)} ms, ` +
      `p99 ${f2(r.eventLoopDelayMs.p99)} ms, max ${f2(r.eventLoopDelayMs.max)} ms`,
    `  end to end, terminal write -> player read, both processes' delays included (${r.endToEndMs.count} frames, ${unmatched} unmatched): ` +
      `p50 ${f2(r.endToEndMs.p50)} ms, p99 ${f2(r.endToEndMs.p99)} ms`,
    `  load generator: ${f1(r.generatorCpuPct)} % of its core, event-loop delay p99 ${f2(r.generatorLoopDelayMs.p99)} ms, ` +
      `max ${f2(r.generatorLoopDelayMs.max)} ms (same 10 ms timer), ${lateTicks} late ticks (>50 ms), ${r.droppedFrames} frames dropped on backpressure`,
  ];
  lines.push(`  machine: other processes used ${f2(r.othersCores)} cores in the window, interrupts ${f2(r.irqCores)}; core 0 was ${f1(r.core0BusyPct)} % busy`);
  if (r.othersCores > 0.1) lines.push('  WARNING: other processes competed for the CPU: latency figures are disturbed (CPU % and RSS much less so)');
  if (errors.length) lines.push(`  player errors (${errors.length}): ${[...new Set(errors)].slice(0, 3).join('; ')}`);
  const ok = (b: boolean) => (b ? 'ok' : 'MISSED');
  lines.push(
    `  target (${TARGET.terminals} terminals): CPU < ${TARGET.cpuPct} %: ${ok(r.cpuPct < TARGET.cpuPct)}; ` +
      `added p99 < ${TARGET.p99Ms} ms: ${ok(r.addedLatencyMs.p99 < TARGET.p99Ms)}; RSS < ${TARGET.rssMB} MB: ${ok(r.peakRssMB < TARGET.rssMB)}` +
      (r.terminals < TARGET.terminals ? ` (this run: ${r.terminals} terminals)` : ''),
    // The gateway's metric starts when a frame's last packet is parsed, so it cannot see time the packets waited in
    // the socket buffer for a late event loop; only the end-to-end figure does. Both are judged.
    `  latency as a player sees it: end-to-end p99 < ${TARGET.p99Ms} ms: ${ok(r.endToEndMs.p99 < TARGET.p99Ms)}; ` +
      `event-loop delay p99 < ${TARGET.p99Ms} ms: ${ok(r.eventLoopDelayMs.p99 < TARGET.p99Ms)}`,
  );
  if (r.generatorCpuPct > 90) lines.push('  WARNING: the load generator is near 100 % of its core: figures may be limited by it, not by the gateway');
  if (r.droppedFrames > 0) lines.push('  WARNING: frames were dropped at the terminals because the gateway did not read them in time');
  console.log(lines.join('\n'));
}

function printProfile(file: string): void {
  const s = summariseCpuProfile(file, repoRoot, 25);
  const out = [`  gateway CPU profile ${path.relative(repoRoot, file)}: ${f1(s.busyMs / 1000)} s busy of ${f1(s.totalMs / 1000)} s (whole run)`, '  top self time by function:'];
  for (const e of s.functions) out.push(`    ${f1(e.pct).padStart(5)} %  ${f1(e.selfMs).padStart(9)} ms  ${e.name}  ${e.where}`);
  out.push('  self time by file:');
  for (const e of s.files.slice(0, 15)) out.push(`    ${f1(e.pct).padStart(5)} %  ${f1(e.selfMs).padStart(9)} ms  ${e.name}`);
  console.log(out.join('\n'));
}
