/**
 * Watched G.711A streams through the gateway's default AAC output, ramped until it falls behind. The real gateway
 * runs as a child process (jt1078-ingest, flv-out, audio-aac, all at their defaults); N simulated terminals push
 * audio only (8 kHz G.711A speech, 20 ms frames, one packet each) and N HTTP-FLV players listen (dataTyp 3), so
 * every stream has one AAC encoder in the audio-aac worker thread. Audio only, because with 1 Mbit/s of video per
 * stream the video path takes most of the gateway's main thread (ingest-flv: ~70 % of a core at 500) and the
 * audio's share would be lost in its noise; ingest-flv --audio measures the two together.
 *
 * For each step of the ramp (more streams opened each time), after a warm-up, a window reports CPU per
 * stream-second of the gateway's main thread and of its AAC worker thread separately (/proc/<pid>/task/<tid>,
 * the worker found by the name a preload gives it), RSS and wasm memory per encoder, and whether the AAC kept up
 * with real time: the AAC frames players got against the audio sent, and how late each arrived after the terminal
 * sent the last input it needed (support/bench-player.ts). The ramp stops at the first step that fell behind.
 * With --as-received players take the G.711A as it came (no encoder): the baseline for the encoder's cost.
 *
 *   node dist/test/bench/run.js audio [--streams 100,200,...] [--seconds S] [--warmup S] [--frame-ms MS]
 *        [--as-received] [--pin gateway|split|none] [--keep-going] [--retries K] [--profile] [--keep-dir] [--node-opt OPT]...
 */
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixturePath, scratchDir } from '../support/paths';
import { BenchArgs, gatewayArg } from './support/bench-args';
import { BenchPlayer } from './support/bench-player';
import {
  Api,
  Reservoir,
  benchApplications,
  checkDeadline,
  connectTcp,
  f1,
  f2,
  freePort,
  mb,
  pinSelf,
  pinThread,
  pool,
  runDeadline,
  startGateway,
  stopGateway,
  tail,
  threadCpu,
  waitHealthy,
  workerThreadIds,
  REQUESTS_PER_APP,
  type ThreadCpu,
  canPin,
  writeSite,
  profileDirFor,
  endScratch,
  printRunProfiles,
} from './support/gateway-harness';
import { coreTimes, quantile, rssBytes, sumDelta, sumOf, wasmRssBytes, type Sample } from './support/process-probe';
import { SynthTerminal, speechPcm, synthAudioStream } from './support/synth-terminals';

const TARGET_PER_CORE = 500;
const AAC_RATE = 8000;
/** ffmpeg's AAC encoder: 1024 samples of priming plus one frame of look-ahead, at the output rate (see bench-player) */
const AAC_LOOKAHEAD_MS = (3 * 1024 * 1000) / AAC_RATE;
/** judged behind: fewer audio frames than this share of what was sent, or latency past these */
const KEPT_UP_SHARE = 0.98;
const LATE_P99_MS = 200;
const LATE_GROWTH_MS = 50;
const OPEN_CONCURRENCY = 16;
const MAX_SEND_BACKLOG = 256 * 1024;
const TICK_MS = 4;
/** a window in which other processes used more than this many cores is measured again (--retries) */
const DISTURBED_CORES = 0.2;

export type Placement = 'gateway' | 'split' | 'none';

export interface AudioBenchOptions {
  /** cumulative stream counts of the ramp's steps */
  steps: number[];
  seconds: number;
  warmup: number;
  frameMs: number;
  asReceived: boolean;
  pin: Placement;
  keepGoing: boolean;
  /** times a window disturbed by other processes is measured again */
  retries: number;
  profile: boolean;
  keepDir: boolean;
  nodeOpts: string[];
}

export interface AudioStepResult {
  streams: number;
  seconds: number;
  /** ms of CPU per stream-second: gateway main thread, its worker thread(s), the rest of it (GC helpers, libuv), all */
  msPerStreamSecond: { main: number; worker: number; other: number; total: number };
  /** % of one core in the window */
  cpuPct: { main: number; worker: number; other: number; total: number };
  rssMB: number;
  wasmMB: number;
  wasmMemories: number;
  /** encoders running (gw_audio_aac_transcoders) */
  encoders: number;
  /** audio frames players got / frames the audio sent makes (AAC: 8000/1024 a second per stream) */
  keptUpShare: number;
  latencyMs: { p50: number; p99: number; max: number; count: number; growth: number };
  unmatched: number;
  early: number;
  /** players that got no audio in the window */
  silentPlayers: number;
  eventLoopP99Ms: number;
  aacFailures: number;
  workerMessagesPerSecond: number;
  generatorCpuPct: number;
  generatorLoopP99Ms: number;
  droppedFrames: number;
  othersCores: number;
  /** how busy each core was in the window, % (core 0 holds the gateway when pinned) */
  coreBusyPct: number[];
  behind: boolean;
  why: string[];
  /** windows measured at this step (more than one when other processes disturbed it) */
  attempts: number;
}

export interface AudioBenchResult {
  idleRssMB: number;
  steps: AudioStepResult[];
  /** least-squares slope of CPU against streams over the steps that kept up: ms per stream-second at the margin */
  marginalMs?: { main: number; worker: number; total: number };
}

export const USAGE = `usage: npm run bench -- audio [--streams N[,N...]] [--seconds S] [--warmup S] [--frame-ms MS] [--as-received]
                       [--pin gateway|split|none] [--keep-going] [--retries K] [--profile] [--keep-dir] [--node-opt OPT]...
  --streams LIST    ramp steps, cumulative stream counts (default 100,200,300,400,500,600,800,1000)
  --seconds S       measured window per step (default 15)
  --warmup S        load before each window, after the step's streams are up (default 5)
  --frame-ms MS     G.711A frame duration the terminals send, one packet each (default 20; 40 is also common)
  --as-received     players take the G.711A as received (flv-out audio 'as-received'): no encoder, the baseline
  --pin P           gateway (default): all gateway threads on core 0, load generator on core 1;
                    split: the same but the AAC worker thread moved to core 1 (beside the load generator);
                    none: nothing pinned
  --keep-going      do not stop the ramp at the first step that fell behind
  --retries K       measure a window again when other processes used more than 0.2 cores in it, up to K times (default 2)
  --profile         run the gateway under node --cpu-prof (main thread and worker) and print both profiles
  --keep-dir        keep the scratch directory (site file, gateway log, data)
  --node-opt OPT    pass a node option to the gateway process`;

export function parseArgs(args: string[]): AudioBenchOptions {
  const o: AudioBenchOptions = {
    steps: [100, 200, 300, 400, 500, 600, 800, 1000],
    seconds: 15,
    warmup: 5,
    frameMs: 20,
    asReceived: false,
    pin: 'gateway',
    keepGoing: false,
    retries: 2,
    profile: false,
    keepDir: false,
    nodeOpts: [],
  };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--streams': {
        const v = r.value() ?? '';
        const steps = v.split(',').map(Number);
        if (!v || steps.some((n) => !Number.isInteger(n) || n < 1 || n > 5000) || steps.some((n, k) => k > 0 && n <= steps[k - 1])) {
          throw r.error(`--streams needs rising whole numbers from 1 to 5000 such as 250,500,1000, got '${v}'`);
        }
        o.steps = steps;
        break;
      }
      case '--seconds':
        o.seconds = r.num(a, 1, 3600, false);
        break;
      case '--warmup':
        o.warmup = r.num(a, 0, 600, false);
        break;
      case '--frame-ms':
        o.frameMs = r.num(a, 10, 200, true);
        break;
      case '--retries':
        o.retries = r.num(a, 0, 20, true);
        break;
      case '--pin': {
        const v = r.value();
        if (v !== 'gateway' && v !== 'split' && v !== 'none') throw r.error('--pin is gateway, split or none');
        o.pin = v;
        break;
      }
      case '--as-received':
        o.asReceived = true;
        break;
      case '--keep-going':
        o.keepGoing = true;
        break;
      default:
        if (!gatewayArg(a, r, o)) r.unknown(a);
    }
  }
  return o;
}

/** Slope of y against x by least squares (NaN with fewer than two distinct x). */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
  }
  return sxx > 0 ? sxy / sxx : NaN;
}

/** Latency samples of one window, also by second, to see a backlog grow within it. */
class WindowLatency {
  readonly all = new Reservoir(200_000);
  private readonly bySecond: Reservoir[] = [];
  max = 0;
  constructor(private readonly start: number) {}
  add(ms: number): void {
    this.all.add(ms);
    if (ms > this.max) this.max = ms;
    const s = Math.floor((performance.now() - this.start) / 1000);
    if (s < 0) return;
    while (this.bySecond.length <= s) this.bySecond.push(new Reservoir(20_000));
    this.bySecond[s].add(ms);
  }
  /** median of the last quarter of the window minus the median of its first quarter */
  growth(): number {
    const n = this.bySecond.length;
    if (n < 4) return NaN;
    const q = Math.max(1, Math.floor(n / 4));
    const med = (rs: Reservoir[]) => {
      const vals: number[] = [];
      for (const r of rs) for (const v of r.values()) vals.push(v);
      return quantile(vals, 0.5);
    };
    return med(this.bySecond.slice(n - q)) - med(this.bySecond.slice(0, q));
  }
}

export async function run(args: string[]): Promise<AudioBenchResult> {
  const o = parseArgs(args);
  const stream = synthAudioStream({ pcm: speechPcm(fixturePath('g726/in_32.g726')), frameMs: o.frameMs });
  const maxStreams = o.steps[o.steps.length - 1];
  const stepS = o.warmup + (o.retries + 1) * (o.seconds + 2) + 10;
  const budgetMs = 30_000 + 60_000 + maxStreams * 200 + o.steps.length * stepS * 1000 + 60_000;
  const deadline = runDeadline(budgetMs);
  const signal = deadline.signal;
  const dir = scratchDir('bench-audio');
  const profileDir = profileDirFor(o.profile);
  const pin = canPin(o.pin !== 'none', 'audio');

  const httpPort = await freePort();
  const flvConfig: Record<string, unknown> = { port: 0, schemes: ['http'] };
  // as received: G.711A straight into the FLV (flv-out takes what audioCodecs lists), no AAC stage in the path
  if (o.asReceived) Object.assign(flvConfig, { audio: 'as-received', audioCodecs: ['aac', 'g711a'] });
  const site = {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      applications: benchApplications(maxStreams),
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } },
      { name: 'flv-out', config: flvConfig },
      // at its defaults: 8 kHz mono AAC-LC, 24 kbit/s, coder fast; with --as-received it runs but nobody reads through it
      { name: 'audio-aac', config: {} },
    ],
  };
  const siteFile = writeSite(dir, site);
  const out = o.asReceived ? 'G.711A as received (no encoder)' : `AAC-LC ${AAC_RATE / 1000} kHz mono (audio-aac's default)`;
  console.log(
    `audio: terminals push G.711A 8 kHz speech, ${o.frameMs} ms frames (${f1(stream.framesPerSecond)} packets/s, ` +
      `${f1((stream.bytesPerSecond * 8) / 1000)} kbit/s each); one listening HTTP-FLV player each (dataTyp 3) taking ${out}; ` +
      `steps ${o.steps.join(', ')} streams; warm-up ${o.warmup} s, window ${o.seconds} s each; placement ${pin ? o.pin : 'none'}`,
  );

  const gw = startGateway({ siteFile, dir, pin, profileDir, nodeOpts: o.nodeOpts });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, signal);
  const terminals: SynthTerminal[] = [];
  const players: BenchPlayer[] = [];
  const reqIds: string[][] = [];
  let ticker: NodeJS.Timeout | undefined;
  let keeper: NodeJS.Timeout | undefined;
  const result: AudioBenchResult = { idleRssMB: 0, steps: [] };
  let latency = new WindowLatency(performance.now());
  try {
    await waitHealthy(gw, api, signal);
    if (pin && !pinSelf(1)) console.warn('audio: could not pin this process to core 1');
    // the AAC worker starts during boot but names itself (the preload) only once its thread runs: give it a moment
    let workers = workerThreadIds(gw.pid);
    for (let i = 0; i < 50 && workers.length === 0; i++) {
      await sleep(100, undefined, { signal });
      workers = workerThreadIds(gw.pid);
    }
    if (workers.length === 0) console.warn('audio: no worker thread found in the gateway (is audio-aac loaded, did the preload run?): worker CPU will read 0');
    if (pin && o.pin === 'split') {
      for (const tid of workers) if (!pinThread(tid, 1)) console.warn(`audio: could not move worker thread ${tid} to core 1`);
    }
    result.idleRssMB = mb(rssBytes(gw.pid));
    const idleWasm = wasmRssBytes(gw.pid);
    console.log(
      `  gateway pid ${gw.pid}, worker thread${workers.length === 1 ? '' : 's'} ${workers.join(', ') || 'none'}; idle RSS ${f1(result.idleRssMB)} MB ` +
        `(wasm ${f1(mb(idleWasm.bytes))} MB in ${idleWasm.memories} memories)`,
    );

    let lateTicks = 0;
    let lastTick = performance.now();
    ticker = setInterval(() => {
      const now = performance.now();
      if (now - lastTick > 50) lateTicks++;
      lastTick = now;
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    keeper = setInterval(() => {
      api.keep(reqIds).catch((err) => console.warn(`audio: keep failed: ${(err as Error).message}`));
    }, 300_000);

    const header =
      '  streams | main ms/s | worker ms/s | other ms/s | main % | worker % | RSS MB | wasm KB/enc |     got |   late p50/p99/max ms | growth | loop p99 | gen % | msgs/s | cores busy %';
    let printedHeader = false;
    for (const target of o.steps) {
      // --- open the step's new streams: terminal first (audio flows), then its listener
      const from = terminals.length;
      const sims = Array.from({ length: target - from }, (_x, i) => String(13900000000 + from + i));
      await pool(
        sims,
        OPEN_CONCURRENCY,
        0,
        async (sim, k) => {
          const i = from + k;
          const app = Math.floor(i / REQUESTS_PER_APP);
          const r = await api.openLive(sim, app, { dataTyp: 3 });
          (reqIds[app] ??= []).push(r.reqId);
          const sock = await connectTcp(r.port, signal);
          sock.on('error', () => undefined);
          sock.on('data', () => undefined);
          const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
          // different places in the speech, spread over one frame interval
          term.start(performance.now() + (((i * o.frameMs) / Math.max(1, target)) % o.frameMs), (i * 7919) % stream.frames.length);
          terminals.push(term);
          const player = new BenchPlayer(term, { audio: (ms) => latency.add(ms) }, AAC_LOOKAHEAD_MS, o.frameMs);
          players.push(player);
          await player.connect(r.url, signal);
        },
        signal,
      );
      await api.keep(reqIds);
      await sleep(o.warmup * 1000, undefined, { signal });
      checkDeadline(signal);
      if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

      // --- window; one disturbed by other processes is measured again (this machine is shared), the least disturbed kept
      const measure = async (): Promise<AudioStepResult> => {
        const m0 = await api.metrics();
        const ownLoop = monitorEventLoopDelay({ resolution: 10 });
        ownLoop.enable();
        latency = new WindowLatency(performance.now());
        for (const p of players) {
          p.measuring = true;
          p.audioInWindow = 0;
          p.unmatched = 0;
          p.early = 0;
        }
        const snap = () => ({
          at: performance.now(),
          cpu: threadCpu(gw.pid),
          self: process.cpuUsage(),
          cores: coreTimes(),
          dropped: terminals.reduce((s, t) => s + t.dropped, 0),
        });
        const s0 = snap();
        await sleep(o.seconds * 1000, undefined, { signal });
        const s1 = snap();
        ownLoop.disable();
        for (const p of players) p.measuring = false;
        const m1 = await api.metrics();
        if (gw.child.exitCode !== null) throw new Error(`gateway exited during the window (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
        const w = stepResult(o, target, s0, s1, m0, m1, players, latency, gw.pid);
        w.generatorLoopP99Ms = ownLoop.percentile(99) / 1e6;
        return w;
      };
      let r = await measure();
      for (let attempt = 1; attempt <= o.retries && r.othersCores > DISTURBED_CORES; attempt++) {
        console.log(`           (${target} streams: other processes used ${f2(r.othersCores)} cores in the window; measuring it again)`);
        const again = await measure();
        again.attempts = r.attempts + 1;
        if (again.othersCores < r.othersCores) r = again;
        else r.attempts = again.attempts;
      }
      result.steps.push(r);
      if (!printedHeader) {
        console.log(header);
        printedHeader = true;
      }
      console.log(stepLine(r));
      if (r.behind && !o.keepGoing) break;
    }
    if (lateTicks > 0) console.log(`  load generator: ${lateTicks} ticks more than 50 ms late over the run`);
    summarise(o, result);
  } catch (err) {
    if (signal.aborted) checkDeadline(signal);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    if (keeper) clearInterval(keeper);
    for (const p of players) p.socket?.destroy();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    deadline.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) {
    printRunProfiles(profileDir, 'audio', 'main thread', true);
  }
  return result;
}

interface Snap {
  at: number;
  cpu: ThreadCpu;
  self: NodeJS.CpuUsage;
  cores: Array<{ busy: number; irq: number; total: number }>;
  dropped: number;
}

function stepResult(
  o: AudioBenchOptions,
  streams: number,
  s0: Snap,
  s1: Snap,
  m0: Map<string, Sample[]>,
  m1: Map<string, Sample[]>,
  players: BenchPlayer[],
  lat: WindowLatency,
  pid: number,
): AudioStepResult {
  const secs = (s1.at - s0.at) / 1000;
  const main = s1.cpu.main - s0.cpu.main;
  const worker = s1.cpu.workers - s0.cpu.workers;
  const total = s1.cpu.total - s0.cpu.total;
  const other = Math.max(0, total - main - worker);
  const perStream = (c: number) => (c * 1000) / (streams * secs);
  const pct = (c: number) => (100 * c) / secs;
  const selfCpu = (s1.self.user - s0.self.user + s1.self.system - s0.self.system) / 1e6;
  const machineBusy = s1.cores.reduce((sum, c, i) => sum + c.busy - (s0.cores[i]?.busy ?? 0), 0);
  const machineIrq = s1.cores.reduce((sum, c, i) => sum + c.irq - (s0.cores[i]?.irq ?? 0), 0);
  const got = players.reduce((s, p) => s + p.audioInWindow, 0);
  const perSecond = o.asReceived ? 1000 / o.frameMs : AAC_RATE / 1024;
  const keptUpShare = got / (streams * secs * perSecond);
  const vals = lat.all.values();
  const latencyMs = { p50: quantile(vals, 0.5), p99: quantile(vals, 0.99), max: lat.max, count: lat.all.seen, growth: lat.growth() };
  const wasm = wasmRssBytes(pid);
  const encoders = sumOf(m1, 'gw_audio_aac_transcoders');
  const why: string[] = [];
  if (!(keptUpShare >= KEPT_UP_SHARE)) why.push(`players got ${f1(100 * keptUpShare)} % of the audio frames`);
  if (!(latencyMs.p99 < LATE_P99_MS)) why.push(`latency p99 ${f1(latencyMs.p99)} ms`);
  if (latencyMs.growth > LATE_GROWTH_MS) why.push(`latency grew ${f1(latencyMs.growth)} ms within the window`);
  return {
    streams,
    seconds: secs,
    msPerStreamSecond: { main: perStream(main), worker: perStream(worker), other: perStream(other), total: perStream(total) },
    cpuPct: { main: pct(main), worker: pct(worker), other: pct(other), total: pct(total) },
    rssMB: mb(rssBytes(pid)),
    wasmMB: mb(wasm.bytes),
    wasmMemories: wasm.memories,
    encoders,
    keptUpShare,
    latencyMs,
    unmatched: players.reduce((s, p) => s + p.unmatched, 0),
    early: players.reduce((s, p) => s + p.early, 0),
    silentPlayers: players.filter((p) => p.audioInWindow === 0).length,
    eventLoopP99Ms: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p99_seconds') * 1000,
    aacFailures: sumDelta(m1, m0, 'gw_audio_aac_failures_total'),
    workerMessagesPerSecond: sumDelta(m1, m0, 'gw_audio_aac_worker_messages') / secs,
    generatorCpuPct: (100 * selfCpu) / secs,
    generatorLoopP99Ms: NaN,
    droppedFrames: s1.dropped - s0.dropped,
    othersCores: Math.max(0, (machineBusy - machineIrq - total - selfCpu) / secs),
    coreBusyPct: s1.cores.map((c, i) => (100 * (c.busy - (s0.cores[i]?.busy ?? 0))) / Math.max(1e-9, c.total - (s0.cores[i]?.total ?? 0))),
    behind: why.length > 0,
    why,
    attempts: 1,
  };
}

function stepLine(r: AudioStepResult): string {
  const p = (s: string, n: number) => s.padStart(n);
  const wasmPerEnc = r.encoders > 0 ? (r.wasmMB * 1024) / r.encoders : NaN;
  const l = r.latencyMs;
  const cols = [
    p(String(r.streams), 9),
    p(f2(r.msPerStreamSecond.main), 9),
    p(f2(r.msPerStreamSecond.worker), 11),
    p(f2(r.msPerStreamSecond.other), 10),
    p(f1(r.cpuPct.main), 6),
    p(f1(r.cpuPct.worker), 8),
    p(f1(r.rssMB), 6),
    p(f1(wasmPerEnc), 11),
    p(`${f1(100 * r.keptUpShare)} %`, 7),
    p(`${f1(l.p50)} / ${f1(l.p99)} / ${f1(l.max)}`, 21),
    p(f1(l.growth), 6),
    p(f1(r.eventLoopP99Ms), 8),
    p(f1(r.generatorCpuPct), 5),
    p(r.workerMessagesPerSecond.toFixed(0), 6),
    r.coreBusyPct.map((c) => f1(c).padStart(5)).join(' '),
  ];
  const notes: string[] = [];
  if (r.behind) notes.push(`BEHIND: ${r.why.join('; ')}`);
  if (r.othersCores > 0.1) notes.push(`other processes used ${f2(r.othersCores)} cores${r.attempts > 1 ? ` (least of ${r.attempts} windows)` : ''}`);
  if (r.silentPlayers > 0) notes.push(`${r.silentPlayers} players got no audio`);
  if (r.aacFailures > 0) notes.push(`${r.aacFailures} AAC failures`);
  if (r.droppedFrames > 0) notes.push(`${r.droppedFrames} frames dropped at the terminals (gateway not reading)`);
  if (r.early > 0) notes.push(`${r.early} AAC frames earlier than the look-ahead model`);
  if (r.unmatched > 0) notes.push(`${r.unmatched} unmatched`);
  if (r.generatorCpuPct > 90) notes.push('load generator near 100 % of its core');
  return ` ${cols.join(' | ')}${notes.length ? `\n           ${notes.join('; ')}` : ''}`;
}

function summarise(o: AudioBenchOptions, r: AudioBenchResult): void {
  const ok = r.steps.filter((s) => !s.behind);
  const lines: string[] = [];
  const fit = (pick: (s: AudioStepResult) => number) =>
    slope(
      ok.map((s) => s.streams),
      ok.map((s) => pick(s) * s.streams),
    );
  if (ok.length >= 2) {
    r.marginalMs = { main: fit((s) => s.msPerStreamSecond.main), worker: fit((s) => s.msPerStreamSecond.worker), total: fit((s) => s.msPerStreamSecond.total) };
  }
  const best = ok[ok.length - 1];
  const first = r.steps.find((s) => s.behind);
  if (best) {
    const perCore = (ms: number) => 1000 / ms;
    const m = best.msPerStreamSecond;
    lines.push(
      `  at ${best.streams} streams (the largest step that kept up): main thread ${f2(m.main)} ms per stream-second (${f1(perCore(m.main))} streams per core), ` +
        (o.asReceived ? '' : `AAC worker ${f2(m.worker)} ms (${f1(perCore(m.worker))} streams per core), `) +
        `the rest of the process ${f2(m.other)} ms; the gateway in all ${f2(m.total)} ms (${f1(perCore(m.total))} streams per core)`,
    );
    if (r.marginalMs) {
      const mm = r.marginalMs;
      lines.push(
        `  at the margin (slope over ${ok.length} steps): main ${f2(mm.main)} ms, worker ${f2(mm.worker)} ms, all ${f2(mm.total)} ms per stream-second` +
          (o.asReceived ? '' : ` -> one worker thread holds ${f1(1000 / mm.worker)} streams at 100 % of a core`),
      );
    }
    const rssPer = ((best.rssMB - r.idleRssMB) * 1024) / best.streams;
    lines.push(
      `  memory: RSS ${f1(best.rssMB)} MB (${f1(rssPer)} KB per stream over the idle ${f1(r.idleRssMB)} MB)` +
        (best.encoders > 0
          ? `, wasm ${f1(best.wasmMB)} MB in ${best.wasmMemories} memories for ${best.encoders} encoders (${f1((best.wasmMB * 1024) / best.encoders)} KB each)`
          : ''),
    );
  }
  if (first) lines.push(`  fell behind at ${first.streams} streams: ${first.why.join('; ')}`);
  else lines.push(`  kept up at every step, up to ${r.steps[r.steps.length - 1]?.streams ?? 0} streams`);
  if (!o.asReceived && best) {
    const workerPerCore = 1000 / (r.marginalMs?.worker ?? best.msPerStreamSecond.worker);
    lines.push(
      `  target: ${TARGET_PER_CORE} streams per core for the AAC worker: ${workerPerCore >= TARGET_PER_CORE ? 'ok' : 'MISSED'} (${f1(workerPerCore)})`,
    );
  }
  console.log(lines.join('\n'));
}
