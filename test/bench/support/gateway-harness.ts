/**
 * What the gateway benchmarks share: the gateway as a child process (pinned, profiled, with a preload that names
 * its worker threads), its HTTP API, loopback sockets with timeouts, an overall deadline, bounded concurrency, CPU
 * per thread, and a sample reservoir. Everything talks to 127.0.0.1 only.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once, setMaxListeners } from 'node:events';
import * as fs from 'node:fs';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { keepScratch, repoRoot } from '../../support/paths';
import { WORKER_THREAD_PREFIX } from './name-threads';
import { cpuSeconds, parsePrometheus, rssBytes, summariseCpuProfile, syscallCounts, threadCpuSeconds, threadsOf, type Sample } from './process-probe';
import { gcNodeFlags } from '../../../core/gc-flags';
import { GatewayConfig } from '../../../core/gateway-config';

export const GATEWAY_MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
/** the bare-relay floor (floor/bare-relay.ts), run in the gateway's place by `StartGatewayOptions.main` */
export const FLOOR_MAIN = path.join(repoRoot, 'dist', 'test', 'bench', 'floor', 'bare-relay.js');
const NAME_THREADS = path.join(__dirname, 'name-threads.js');
export const HTTP_TIMEOUT_MS = 15_000;
export const BOOT_TIMEOUT_MS = 30_000;
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * Open requests per application in the site file: the gateway caps requests per application (maxRequestsPerApp,
 * 1000 by default), so a bench with more streams spreads them over several applications.
 */
export const REQUESTS_PER_APP = 1000;

export const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
export const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
export const mb = (bytes: number): number => bytes / (1024 * 1024);

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export async function freePort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Throws when the benchmark's overall deadline passed (every wait loop checks it). */
export function checkDeadline(signal: AbortSignal): void {
  if (!signal.aborted) return;
  const r = signal.reason as unknown;
  const why = r instanceof Error ? (r.name === 'TimeoutError' ? 'the overall time budget ran out' : r.message) : String(r);
  throw new Error(`benchmark aborted: ${why}`);
}

/**
 * The run's deadline: its time budget, or Ctrl-C / a kill, which then end the run through the same teardown as an
 * error, so nothing is left running. `dispose()` removes the signal handlers.
 */
export function runDeadline(budgetMs: number): { signal: AbortSignal; dispose(): void } {
  const interrupted = new AbortController();
  const onSignal = (sig: string) => interrupted.abort(new Error(`interrupted by ${sig}`));
  // (on, not once: a second Ctrl-C while tearing down must not kill us before the gateway is stopped)
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const signal = AbortSignal.any([AbortSignal.timeout(budgetMs), interrupted.signal]);
  // every connect, HTTP call and wait listens on it for a moment: many at once is expected, not a leak
  setMaxListeners(0, signal);
  return {
    signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * Where sockets given an onData read into: one for the process, since each read is handed over and consumed before
 * the next one (onread). Without it every read would be a new 64 KiB ArrayBuffer, and hundreds of players reading
 * ~450 Mbit/s drove this process into a mark-compact every 200-500 ms (external memory), each stopping its loop
 * 5-30 ms: late ticks that showed up as end-to-end latency that was the bench's own.
 */
const SHARED_READ = Buffer.allocUnsafeSlow(64 * 1024);

/** net.connect's options for reads into the buffer shared by the process: `chunk` holds bytes 0 to `end`, valid only during the call */
export function sharedReads(onData: (chunk: Buffer, end: number) => void): Pick<net.NetConnectOpts, 'onread'> {
  return {
    onread: {
      buffer: SHARED_READ,
      callback: (n: number, b: Uint8Array): boolean => {
        onData(b as Buffer, n);
        return true;
      },
    },
  };
}

/**
 * A TCP connection to 127.0.0.1:port, open. With `onData`, the socket's reads go to it instead of 'data' events:
 * `chunk` holds bytes 0 to `end` of a buffer shared by every such socket, valid only during the call.
 */
export async function connectTcp(port: number, signal: AbortSignal, onData?: (chunk: Buffer, end: number) => void): Promise<net.Socket> {
  const s = net.connect({ host: '127.0.0.1', port, ...(onData === undefined ? {} : sharedReads(onData)) });
  s.setNoDelay(true);
  try {
    await once(s, 'connect', { signal: AbortSignal.any([signal, AbortSignal.timeout(CONNECT_TIMEOUT_MS)]) });
  } catch (err) {
    s.destroy();
    throw new Error(`cannot connect to 127.0.0.1:${port}: ${(err as Error).message}`, { cause: err });
  }
  return s;
}

/** A UDP socket on loopback connected to `port` (a terminal told to push over UDP), with a send buffer for bursts. */
export async function connectUdp(port: number): Promise<dgram.Socket> {
  const s = dgram.createSocket({ type: 'udp4', sendBufferSize: 1 << 20 });
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.connect(port, '127.0.0.1', () => {
      s.off('error', reject);
      resolve();
    });
  });
  return s;
}

/** Runs `fn` over items with at most `limit` in flight, optionally spacing starts `gapMs` apart. */
export async function pool<T>(items: T[], limit: number, gapMs: number, fn: (item: T, i: number) => Promise<void>, signal: AbortSignal): Promise<void> {
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

/** The site file's applications for `requests` open requests: bench, bench2, ... each under the per-app cap. */
export function benchApplications(requests: number): Array<{ appId: string; user: string; password: string }> {
  const n = Math.max(1, Math.ceil(requests / REQUESTS_PER_APP));
  return Array.from({ length: n }, (_x, i) => {
    const id = i === 0 ? 'bench' : `bench${i + 1}`;
    return { appId: id, user: id, password: id };
  });
}

export interface OpenResult {
  reqId: string;
  playUrl: string;
  host: string;
  port: number;
  tcp: boolean;
}

export class Api {
  constructor(
    readonly port: number,
    private readonly signal: AbortSignal,
  ) {}

  private auth(app: number): string {
    const id = app === 0 ? 'bench' : `bench${app + 1}`;
    return 'Basic ' + Buffer.from(`${id}:${id}`).toString('base64');
  }

  private async call(method: string, p: string, body?: unknown, app = 0): Promise<Response> {
    return fetch(`http://127.0.0.1:${this.port}${p}`, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json', Authorization: this.auth(app) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.any([this.signal, AbortSignal.timeout(HTTP_TIMEOUT_MS)]),
    });
  }

  /** POST as application number `app` (see benchApplications) */
  async post<T>(p: string, body: unknown, app = 0): Promise<T> {
    const res = await this.call('POST', p, body, app);
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

  /** `/strm/open` of a live stream over TCP on loopback, as the benchmarks need it; anything else aborts the run */
  async openLive(sim: string, app: number, extra: Record<string, unknown> = {}): Promise<OpenResult & { url: URL }> {
    const [r] = await this.post<OpenResult[]>('/strm/open', { user: { token: 't' }, typ: 'live', simNo: sim, chanId: 1, keepIntv: 600, ...extra }, app);
    if (!r || !r.playUrl) throw new Error(`open ${sim}: no play URL in the response`);
    if (!r.tcp) throw new Error(`open ${sim}: the gateway advertises UDP; the benchmarks push over TCP`);
    if (!isLoopback(r.host)) throw new Error(`open ${sim}: push host ${r.host} is not a loopback address`);
    const url = new URL(r.playUrl.replace(/^ws/, 'http'));
    if (!isLoopback(url.hostname)) throw new Error(`open ${sim}: play URL host ${url.hostname} is not a loopback address`);
    return { ...r, url };
  }

  /** `/strm/keep` for requests opened by each application: reqIds[app] */
  async keep(reqIds: string[][]): Promise<void> {
    for (let app = 0; app < reqIds.length; app++) {
      const ids = reqIds[app] ?? [];
      for (let i = 0; i < ids.length; i += 1000) await this.post('/strm/keep', { reqIds: ids.slice(i, i + 1000) }, app);
    }
  }

  async metrics(): Promise<Map<string, Sample[]>> {
    const res = await this.call('GET', '/metrics');
    if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status}`);
    return parsePrometheus(await res.text());
  }

  /**
   * A scrape and when it was taken: `at`, the middle of asking and having the answer whole (the gateway reads its
   * counters somewhere in between), and `ms`, that time. Rates of the gateway's counters are over `at` to `at`.
   */
  async timedMetrics(): Promise<{ metrics: Map<string, Sample[]>; at: number; ms: number }> {
    const start = performance.now();
    const metrics = await this.metrics();
    const end = performance.now();
    return { metrics, at: (start + end) / 2, ms: end - start };
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

/** kept samples; later ones replace random earlier ones (reservoir), so a long run stays bounded */
export class Reservoir {
  private readonly samples: Float64Array;
  seen = 0;
  unmatched = 0;
  constructor(readonly size = 1_000_000) {
    this.samples = new Float64Array(size);
  }
  add(v: number): void {
    if (this.seen < this.size) this.samples[this.seen] = v;
    else {
      const j = Math.floor(Math.random() * (this.seen + 1));
      if (j < this.size) this.samples[j] = v;
    }
    this.seen++;
  }
  values(): Float64Array {
    return this.samples.subarray(0, Math.min(this.seen, this.size));
  }
  reset(): void {
    this.seen = 0;
    this.unmatched = 0;
  }
}

export function pinSelf(core: number): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

/** Moves one thread (of any process of ours) to `core`. */
export function pinThread(tid: number, core: number): boolean {
  try {
    execFileSync('taskset', ['-p', '-c', String(core), String(tid)], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the bench can pin the gateway to core 0 and itself to core 1 (taskset and a second core). When `wanted` and
 * it cannot, says so as `<bench>: ... running unpinned<why it matters>`.
 */
export function canPin(wanted: boolean, bench: string, unpinnedNote = ''): boolean {
  const pin = wanted && haveTaskset() && os.cpus().length >= 2;
  if (wanted && !pin) console.warn(`${bench}: taskset or a second core is missing: running unpinned${unpinnedNote}`);
  return pin;
}

/** with --profile, a folder for the gateway's .cpuprofile files (kept after the run: the report names them) */
export function profileDirFor(profile: boolean): string | undefined {
  return profile ? fs.mkdtempSync(path.join(repoRoot, '.test-tmp', 'bench-profile-')) : undefined;
}

/** removes a run's scratch folder, or says where it is (--keep-dir) */
export function endScratch(dir: string, keep: boolean): void {
  if (!keep) fs.rmSync(dir, { recursive: true, force: true });
  else {
    keepScratch(dir);
    console.log(`  scratch directory kept: ${dir}`);
  }
}

/**
 * Prints the gateway's main-thread profile under `mainLabel` and, with `workers`, each worker thread's; the main
 * profile's path, or undefined (said as `<bench>: no .cpuprofile written`).
 */
export function printRunProfiles(profileDir: string, bench: string, mainLabel: string, workers = false): string | undefined {
  const files = profileFiles(profileDir);
  if (!files.main) console.warn(`${bench}: no .cpuprofile written in ${profileDir}`);
  else printProfile(files.main, mainLabel);
  if (workers) for (const w of files.workers) printProfile(w, 'worker thread', 15);
  return files.main;
}

/** writes a bench's site as `<dir>/site.json`; its path */
export function writeSite(dir: string, site: unknown): string {
  const siteFile = path.join(dir, 'site.json');
  fs.writeFileSync(siteFile, JSON.stringify(site, null, 2));
  return siteFile;
}

export function haveTaskset(): boolean {
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

export interface Gateway {
  child: ChildProcess;
  pid: number;
  exited: Promise<number | null>;
  logFile: string;
  /** performance.now() at the spawn: a V8 log's or --trace-gc's times count from about then */
  startedAt: number;
}

export interface StartGatewayOptions {
  siteFile: string;
  dir: string;
  /** run it under `taskset -c 0` */
  pin: boolean;
  /** node --cpu-prof into this directory */
  profileDir?: string;
  nodeOpts: string[];
  /** the script to run instead of the gateway (the bare-relay floor), given the same site file */
  main?: string;
  /** the gateway's worker processes (GW_WORKERS); default 1, the single process every figure so far was measured on */
  workers?: number;
}

/** the young generation's semi-space the gateway is started with: GW_GC_SEMI_SPACE_MB given to the bench, else the key's default */
function gcSemiSpaceMB(): number {
  const env = process.env.GW_GC_SEMI_SPACE_MB;
  return env !== undefined && env !== '' ? Number(env) : new GatewayConfig().gcSemiSpaceMB;
}

export function startGateway(o: StartGatewayOptions): Gateway {
  const main = o.main ?? GATEWAY_MAIN;
  if (!fs.existsSync(main)) throw new Error(`${main} not found: build first (npm run bench does)`);
  const nodeArgs = [
    // names the worker threads so their CPU can be read from /proc; it does nothing else (see name-threads.ts)
    '--require',
    NAME_THREADS,
    // as npm start runs it: GC on the process's own thread and its young generation, unless the gateway keys say
    // otherwise (core/gc-flags.ts)
    ...(o.main ? [] : gcNodeFlags(process.env.GW_GC_HELPER_THREADS === 'true', gcSemiSpaceMB())),
    ...o.nodeOpts,
    ...(o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : []),
    main,
    o.siteFile,
  ];
  const [cmd, args] = o.pin ? ['taskset', ['-c', '0', process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const logFile = path.join(o.dir, 'gateway.log');
  const log = fs.openSync(logFile, 'w');
  // GW_* settings given to the bench reach the gateway (to try a plugin key without editing the bench), and glibc's
  // tunables (malloc trials, e.g. glibc.malloc.hugetlb=1: see the bench README); all else stays out: the gateway must
  // not pick up the shell's data dir or site
  const settings = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => (k.startsWith('GW_') || k === 'GLIBC_TUNABLES') && k !== 'GW_DATA_DIR' && k !== 'GW_SITE'),
  );
  const env = { ...settings, PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? o.dir, GW_WORKERS: String(o.workers ?? 1) };
  const startedAt = performance.now();
  const child = spawn(cmd, args, { cwd: o.dir, stdio: ['ignore', log, log], env });
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error('could not start the gateway process');
  // taskset execs node in place, so this pid is the gateway's own
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, pid: child.pid, exited, logFile, startedAt };
}

export async function stopGateway(g: Gateway): Promise<void> {
  if (g.child.exitCode !== null || g.child.signalCode !== null) return;
  g.child.kill('SIGTERM');
  const timer = setTimeout(() => g.child.kill('SIGKILL'), 15_000);
  await g.exited;
  clearTimeout(timer);
}

/** Waits for /healthz, failing early if the gateway exits. */
export async function waitHealthy(gw: Gateway, api: Api, signal: AbortSignal): Promise<void> {
  const bootBy = performance.now() + BOOT_TIMEOUT_MS;
  while (!(await api.healthy())) {
    if (gw.child.exitCode !== null) throw new Error(`gateway exited during boot (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
    if (performance.now() > bootBy) throw new Error(`gateway not healthy within ${BOOT_TIMEOUT_MS / 1000} s:\n${tail(gw.logFile)}`);
    checkDeadline(signal);
    await sleep(100);
  }
}

export function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** CPU seconds of a gateway by thread: its main thread (tid = pid), its worker threads (named by the preload), the rest. */
export interface ThreadCpu {
  main: number;
  /** every worker thread (jsworker-*) together */
  workers: number;
  /** the process, all threads (GC helpers, libuv pool, ...) */
  total: number;
  /** worker threads found */
  workerCount: number;
}

export function threadCpu(pid: number): ThreadCpu {
  const total = cpuSeconds(pid);
  const main = threadCpuSeconds(pid, pid);
  let workers = 0;
  let workerCount = 0;
  for (const t of threadsOf(pid)) {
    if (!t.comm.startsWith(WORKER_THREAD_PREFIX)) continue;
    const s = threadCpuSeconds(pid, t.tid);
    if (Number.isFinite(s)) {
      workers += s;
      workerCount++;
    }
  }
  return { main, workers, total, workerCount };
}

/** The gateway's processes: the one started and, with workers, its worker processes (children that are node). */
export function gatewayPids(pid: number): number[] {
  let kids: number[] = [];
  try {
    kids = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    // no children file (old kernels): the process alone
  }
  return [pid, ...kids];
}

/**
 * A reading of each of a gateway's processes (the primary and its workers), field by field summed; a process that
 * exits between listing and reading counts 0.
 */
function summedOver<T extends Record<string, number>>(pid: number, zero: T, read: (p: number) => T): T {
  const sum = { ...zero };
  const keys = Object.keys(zero) as Array<keyof T>;
  for (const p of gatewayPids(pid)) {
    let v: T;
    try {
      v = read(p);
    } catch {
      continue;
    }
    for (const k of keys) (sum[k] as number) += v[k];
  }
  return sum;
}

/** threadCpu summed over a gateway's processes */
export function gatewayCpu(pid: number): ThreadCpu {
  return summedOver(pid, { main: 0, workers: 0, total: 0, workerCount: 0 }, threadCpu);
}

/** system calls and main-thread wake-ups summed over a gateway's processes (process-probe.ts: syscallCounts) */
export function gatewaySyscalls(pid: number): { reads: number; writes: number; wakeups: number } {
  return summedOver(pid, { reads: 0, writes: 0, wakeups: 0 }, syscallCounts);
}

/** resident bytes summed over a gateway's processes */
export function gatewayRss(pid: number): number {
  return summedOver(pid, { bytes: 0 }, (p) => ({ bytes: rssBytes(p) })).bytes;
}

/** The worker threads' ids (jsworker-*), for pinning one elsewhere. */
export function workerThreadIds(pid: number): number[] {
  return threadsOf(pid)
    .filter((t) => t.comm.startsWith(WORKER_THREAD_PREFIX))
    .map((t) => t.tid);
}

export function printProfile(file: string, what = 'main thread', top = 25): void {
  const s = summariseCpuProfile(file, repoRoot, top);
  const out = [
    `  gateway CPU profile, ${what}, ${path.relative(repoRoot, file)}: ${f1(s.busyMs / 1000)} s busy of ${f1(s.totalMs / 1000)} s (whole run)`,
    '  top self time by function:',
  ];
  for (const e of s.functions) out.push(`    ${f1(e.pct).padStart(5)} %  ${f1(e.selfMs).padStart(9)} ms  ${e.name}  ${e.where}`);
  out.push('  self time by file:');
  for (const e of s.files.slice(0, 15)) out.push(`    ${f1(e.pct).padStart(5)} %  ${f1(e.selfMs).padStart(9)} ms  ${e.name}`);
  console.log(out.join('\n'));
}

/**
 * The .cpuprofile files in a profile directory by thread: --cpu-prof writes one per thread, named
 * CPU.<date>.<time>.<pid>.<threadId>.<seq>.cpuprofile, thread 0 being the main thread.
 */
export function profileFiles(dir: string): { main?: string; workers: string[] } {
  const out: { main?: string; workers: string[] } = { workers: [] };
  for (const f of fs.readdirSync(dir).sort()) {
    const m = /^CPU\.\d+\.\d+\.\d+\.(\d+)\.\d+\.cpuprofile$/.exec(f);
    if (!m) continue;
    if (m[1] === '0') out.main ??= path.join(dir, f);
    else out.workers.push(path.join(dir, f));
  }
  return out;
}

/**
 * Waits out a measuring window that ends at `windowEnd` (performance.now() ms), failing at once if the gateway exits,
 * and samples its RSS about every second: the last sample and the peak.
 */
export async function watchWindow(gw: Gateway, windowEnd: number, signal: AbortSignal): Promise<{ lastRss: number; peakRss: number }> {
  let peakRss = 0;
  let lastRss = 0;
  while (performance.now() < windowEnd) {
    await sleep(Math.min(1000, Math.max(1, windowEnd - performance.now())), undefined, { signal });
    if (gw.child.exitCode !== null) throw new Error(`gateway exited during the window (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
    lastRss = gatewayRss(gw.pid);
    peakRss = Math.max(peakRss, lastRss);
  }
  return { lastRss, peakRss };
}
