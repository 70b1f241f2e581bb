/**
 * Fan-out: one simulated terminal at ~1 Mbit/s (the padded capture ingest-flv sends), one stream, and N
 * players of it, HTTP-FLV by default or WS-FLV (--ws), each with its own open request (as N viewers would have).
 * The gateway runs as its own process pinned to core 0; the terminal runs here and the players in K child
 * processes (support/fanout-players.ts), all pinned to core 1. Reports the gateway's CPU and RSS, each player's
 * throughput, whether every player got every video frame the terminal sent in the window (once, in order; frames
 * and key frames counted per player), and the players' lag (terminal write -> player read, on the system-wide
 * monotonic clock, across processes).
 * Target: 2000 players under 60 % of one core, no frame dropped. `--floor` runs the bare relay (floor/bare-relay.ts)
 * in the gateway's place and `--vs-floor K` alternates the two: absolute CPU moves with this machine's speed, the
 * ratio does not (support/fanout-compare.ts).
 *
 *   node dist/test/bench/run.js fanout [--players N] [--seconds S] [--ws] [--procs K] [--warmup S] [--mbps X]
 *        [--capture FILE] [--floor | --vs-floor K] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
 */
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { scratchDir } from '../support/paths';
import { BenchArgs, captureFile, floorArg, loadArg, windowArg } from './support/bench-args';
import { vsFloor } from './support/fanout-compare';
import { PlayerProcs, type PlayerFigures } from './support/fanout-players';
import {
  Api,
  BOOT_TIMEOUT_MS,
  benchApplications,
  checkDeadline,
  connectTcp,
  f1,
  f2,
  freePort,
  gatewayCpu,
  gatewayRss,
  mb,
  pinSelf,
  pool,
  REQUESTS_PER_APP,
  runDeadline,
  startGateway,
  stopGateway,
  tail,
  waitHealthy,
  canPin,
  writeSite,
  profileDirFor,
  endScratch,
  printRunProfiles,
  FLOOR_MAIN,
  watchWindow,
} from './support/gateway-harness';
import {
  DISTURBED_CORES,
  firstAtOrAfter,
  perfToMonotonic,
  representativeStart,
  summarise,
  windowLoad,
  type CpuSnap,
  type SentFrames,
} from './support/perf-probes';
import { bucketsDelta, bucketsOf, coreTimes, cpuSeconds, histogramQuantile, sumDelta, sumOf, type Buckets } from './support/process-probe';
import { SENT_RING, SynthTerminal, synthesise, type SynthStream } from './support/synth-terminals';

export interface FanoutOptions {
  players: number;
  seconds: number;
  warmup: number;
  ws: boolean;
  procs: number;
  mbps: number;
  capture: string;
  profile: boolean;
  pin: boolean;
  keepDir: boolean;
  nodeOpts: string[];
  /** run the bare-relay floor instead of the gateway (HTTP-FLV only) */
  floor: boolean;
  /** rounds of gateway and floor alternated, then the CPU ratio (0: off) */
  vsFloor: number;
}

export interface FanoutResult {
  players: number;
  connected: number;
  seconds: number;
  mbpsIn: number;
  mbpsOut: number;
  gatewayMbpsOut: number;
  perPlayerMbps: { min: number; p50: number; max: number };
  cpuPct: number;
  threadCpuPct: { main: number; other: number };
  core0BusyPct: number;
  core1BusyPct: number;
  /** core 0's interrupt share, and what other processes took of it (busy - interrupts - the gateway) */
  core0IrqPct: number;
  othersOnCore0Pct: number;
  rssMB: number;
  peakRssMB: number;
  idleRssMB: number;
  /** video frames the terminal sent in the checked range, and key frames among them */
  sentFrames: number;
  sentKeyframes: number;
  /** players that read every one of them, once, in order */
  completePlayers: number;
  framesPerPlayer: { min: number; max: number };
  keyframesPerPlayer: { min: number; max: number };
  missingFrames: number;
  playersMissing: number;
  duplicates: number;
  unknown: number;
  keyMismatch: number;
  closedPlayers: number;
  lagMs: { p50: number; p99: number; max: number; count: number; negative: number };
  addedLatencyMs: { p50: number; p99: number };
  eventLoopDelayMs: { p99: number; max: number };
  playerProcsPct: number;
  playerLoopDelayMs: { p99: number; max: number };
  othersCores: number;
  irqCores: number;
  framesDroppedAtTerminal: number;
  profile?: string;
}

const TARGET = { players: 2000, cpuPct: 60 };
const LATENCY_METRIC = 'gw_flv_out_added_latency_seconds';
const TICK_MS = 4;
const OPEN_CONCURRENCY = 16;
/** the terminal drops a frame when its socket holds this much unsent (the gateway not reading) */
const MAX_SEND_BACKLOG = 1024 * 1024;
/** frames sent this long after the window opened are the first checked (players' 'start' has landed by then) */
const CHECK_FROM_MS = 200;
/** after the window, players keep reading this long so frames sent just before its end can still arrive */
const DRAIN_MS = 2000;

export const USAGE = `usage: npm run bench -- fanout [--players N] [--seconds S] [--ws] [--procs K] [--warmup S] [--mbps X]
                       [--capture FILE] [--floor | --vs-floor K] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
  --players N     players of the one stream, each with its own open request (default 2000)
  --seconds S     measured window (default 30)
  --ws            WS-FLV players instead of HTTP-FLV
  --procs K       player processes, all on the bench's core (default 2)
  --warmup S      seconds after the last player joined before the window opens (default 5)
  --mbps X        the terminal's rate, the capture's video padded up to it (default 1)
  --capture FILE  JT/T 1078 capture to re-pack (default shared/fixtures/jt1078/glaciall-cif-h264-2013.bin)
  --floor         run the bare-relay floor (test/bench/floor/bare-relay.ts) instead of the gateway, on the same load
  --vs-floor K    K rounds of the gateway and the floor alternated, then gateway CPU / floor CPU
  --profile       run the gateway under node --cpu-prof and print its top self-time functions (whole run)
  --no-pin        do not pin the gateway to core 0 and the bench and its players to core 1
  --keep-dir      keep the scratch directory (site file, gateway log, data)
  --node-opt OPT  pass a node option to the gateway process, e.g. --node-opt --trace-gc`;

export function parseArgs(args: string[]): FanoutOptions {
  const o: FanoutOptions = {
    players: 2000,
    seconds: 30,
    warmup: 5,
    ws: false,
    procs: 2,
    mbps: 1,
    capture: '',
    profile: false,
    pin: true,
    keepDir: false,
    nodeOpts: [],
    floor: false,
    vsFloor: 0,
  };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--players':
        o.players = r.num(a, 1, 20000, true);
        break;
      case '--procs':
        o.procs = r.num(a, 1, 16, true);
        break;
      case '--ws':
        o.ws = true;
        break;
      default:
        if (!floorArg(a, r, o) && !windowArg(a, r, o) && !loadArg(a, r, o)) r.unknown(a);
    }
  }
  if (o.floor && o.vsFloor > 0) throw r.error('--floor and --vs-floor: one or the other');
  if (o.ws && (o.floor || o.vsFloor > 0)) throw r.error('--ws: the floor serves HTTP-FLV only');
  o.capture = captureFile(o.capture);
  return o;
}

/**
 * The terminal's video frames as sent, copied out of its ring (512 frames, ~21 s) before it laps: media time, send
 * time on the monotonic clock, and whether the frame was a key frame (from the template it came from).
 */
class SentRecorder {
  readonly ts: number[] = [];
  readonly at: number[] = [];
  readonly key: boolean[] = [];
  private seen = 0;
  private readonly keyTimes: Set<number>;
  private readonly clock = perfToMonotonic();

  constructor(
    private readonly term: SynthTerminal,
    private readonly stream: SynthStream,
    private readonly tStart: number,
  ) {
    this.keyTimes = new Set(stream.frames.filter((f) => f.video && f.key).map((f) => Math.round(f.t)));
  }

  poll(): void {
    const t = this.term;
    if (t.sentCount - this.seen > SENT_RING) throw new Error('the terminal ring lapped before it was read');
    for (; this.seen < t.sentCount; this.seen++) {
      const k = this.seen % SENT_RING;
      const ts = t.sentT[k];
      this.ts.push(ts);
      this.at.push(t.sentAt[k] + this.clock);
      let inLoop = Math.round((ts + this.tStart) % this.stream.loopMs);
      if (inLoop === Math.round(this.stream.loopMs)) inLoop = 0;
      this.key.push(this.keyTimes.has(inLoop));
    }
  }

  get frames(): SentFrames {
    return { ts: this.ts, at: this.at, key: this.key };
  }
}

export async function run(args: string[]): Promise<FanoutResult> {
  const o = parseArgs(args);
  return o.vsFloor > 0 ? vsFloor(o, TARGET.cpuPct, runFanout) : runFanout(o);
}

/** one run of these options: the gateway, or the floor in its place */
async function runFanout(o: FanoutOptions): Promise<FanoutResult> {
  const stream = synthesise(o.capture, o.mbps, 950);
  const budgetMs = BOOT_TIMEOUT_MS + 120_000 + o.players * 100 + (o.warmup + o.seconds) * 1000 + DRAIN_MS + 60_000;
  const run = runDeadline(budgetMs);
  const deadline = run.signal;
  const dir = scratchDir('bench-fanout');
  const profileDir = profileDirFor(o.profile);
  const pin = canPin(o.pin, 'fanout');

  const httpPort = await freePort();
  const site = {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      applications: benchApplications(o.players),
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } },
      { name: 'flv-out', config: { port: 0, schemes: ['http', 'ws'] } },
    ],
  };
  const siteFile = writeSite(dir, site);
  const video = stream.frames.filter((f) => f.video);
  const videoFps = video.length / (stream.loopMs / 1000);
  console.log(
    `fanout: 1 terminal x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s (${path.basename(o.capture)} padded x${f2(stream.padFactor)}, ` +
      `${f1(videoFps)} video frames/s), ${o.players} ${o.ws ? 'WS-FLV' : 'HTTP-FLV'} players of its one stream (one request each) in ` +
      `${o.procs} player process(es); warm-up ${o.warmup} s, measured ${o.seconds} s`,
  );

  const gw = startGateway({ siteFile, dir, pin, profileDir, nodeOpts: o.nodeOpts, main: o.floor ? FLOOR_MAIN : undefined });
  if (o.floor) console.log('  the FLOOR runs instead of the gateway: a bare relay (packets to FLV tags, nothing else); gateway metrics read 0');
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  let procs: PlayerProcs | undefined;
  let term: SynthTerminal | undefined;
  let ticker: NodeJS.Timeout | undefined;
  let keeper: NodeJS.Timeout | undefined;
  let result: FanoutResult | undefined;
  try {
    await waitHealthy(gw, api, deadline);
    if (pin && !pinSelf(1)) console.warn('fanout: could not pin this process to core 1');
    const idleRss = gatewayRss(gw.pid);
    // forked after pinning: the players inherit core 1
    procs = new PlayerProcs(o.procs);
    console.log(`  gateway pid ${gw.pid}${pin ? ' on core 0; terminal, players and this process on core 1' : ' (unpinned)'}; idle RSS ${f1(mb(idleRss))} MB`);

    // --- the terminal: the first request, its push link, one timer pacing it
    const sim = '13900000000';
    const reqIds: string[][] = [];
    const urls: string[] = [];
    const first = await api.openLive(sim, 0);
    (reqIds[0] ??= []).push(first.reqId);
    urls.push(first.url.toString());
    const sock = await connectTcp(first.port, deadline);
    sock.on('error', () => undefined);
    sock.on('data', () => undefined);
    const t = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
    term = t;
    // the key frame from which the window (about 4 s of joins and the warm-up away) carries the capture's average rate
    const firstFrame = representativeStart(
      stream.frames.map((f) => ({ t: f.t, bytes: f.buf.length })),
      stream.loopMs,
      stream.keyframes,
      (o.warmup + 4) * 1000,
      o.seconds * 1000,
    );
    t.start(performance.now() + 10, firstFrame);
    ticker = setInterval(() => t.sendDue(performance.now(), 64), TICK_MS);
    const sent = new SentRecorder(t, stream, stream.frames[firstFrame].t);

    // --- the other requests, then every player
    const opened = performance.now();
    const rest = Array.from({ length: o.players - 1 }, (_x, i) => i + 1);
    await pool(
      rest,
      OPEN_CONCURRENCY,
      0,
      async (i) => {
        const app = Math.floor(i / REQUESTS_PER_APP);
        const r = await api.openLive(sim, app);
        (reqIds[app] ??= []).push(r.reqId);
        urls[i] = r.url.toString();
      },
      deadline,
    );
    const capacity = Math.ceil(videoFps * (o.seconds + DRAIN_MS / 1000 + 5) * 1.2) + 64;
    const conn = await procs.connect(urls, o.ws, capacity, deadline);
    console.log(
      `  ${o.players} requests opened and ${conn.ok} players playing in ${f1((performance.now() - opened) / 1000)} s` +
        (conn.failed ? `; ${conn.failed} failed: ${conn.errors.join('; ')}` : ''),
    );
    await api.keep(reqIds);
    keeper = setInterval(() => {
      api.keep(reqIds).catch((err) => console.warn(`fanout: keep failed: ${(err as Error).message}`));
    }, 300_000);
    const poller = setInterval(() => sent.poll(), 250);

    try {
      // --- warm-up
      await sleep(o.warmup * 1000, undefined, { signal: deadline });
      checkDeadline(deadline);
      if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

      // --- measured window
      const { metrics: m0, at: m0At } = await api.timedMetrics();
      await procs.start(deadline);
      const pids = procs.pids;
      const snap = (): CpuSnap & { threads: ReturnType<typeof gatewayCpu>; players: number; dropped: number; bytesIn: number } => {
        const threads = gatewayCpu(gw.pid);
        const self = process.cpuUsage();
        const players = pids.reduce((s, p) => {
          try {
            return s + cpuSeconds(p);
          } catch {
            return s;
          }
        }, 0);
        return {
          at: performance.now(),
          gateway: threads.total,
          bench: (self.user + self.system) / 1e6 + players,
          cores: coreTimes(),
          threads,
          players,
          dropped: t.dropped,
          bytesIn: t.bytes,
        };
      };
      const s0 = snap();
      const clock = perfToMonotonic();
      const { lastRss, peakRss } = await watchWindow(gw, s0.at + o.seconds * 1000, deadline);
      const s1 = snap();
      const marks = await procs.mark(deadline);
      const { metrics: m1, at: m1At } = await api.timedMetrics();
      // the gateway's counters span scrape to scrape, not the window: their rates are over that span
      const gwSecs = (m1At - m0At) / 1000;
      // players keep reading while the frames sent just before the end arrive
      await sleep(DRAIN_MS, undefined, { signal: deadline });
      await procs.stop(deadline);
      sent.poll();

      // --- every frame to every player
      const frames = sent.frames;
      const from = firstAtOrAfter(frames.at, s0.at + clock + CHECK_FROM_MS);
      const to = firstAtOrAfter(frames.at, s1.at + clock) - 1;
      const check = await procs.check(frames, from, to, deadline);
      const load = windowLoad(s0, s1);
      const secs = load.seconds;
      const lat = bucketsDelta(bucketsOf(m1, LATENCY_METRIC) ?? { le: [Infinity], counts: [0] }, bucketsOf(m0, LATENCY_METRIC) as Buckets | undefined);
      const ps = check.players;
      const playerSecs = marks.reduce((s, m) => s + m.seconds, 0) / Math.max(1, marks.length);
      const mbps = ps.map((p) => (p.bytes * 8) / playerSecs / 1e6);
      const mbpsSummary = summarise(mbps);
      const sentKey = sent.key.slice(from, to + 1).filter(Boolean).length;
      // the floor's tags are packets: a frame's later packets read as repeats of its first
      const complete = (p: PlayerFigures) => p.missing === 0 && (o.floor || p.duplicates === 0) && p.unknown === 0 && p.frames === to - from + 1;
      result = {
        players: o.players,
        connected: conn.ok,
        seconds: secs,
        mbpsIn: ((s1.bytesIn - s0.bytesIn) * 8) / secs / 1e6,
        mbpsOut: (ps.reduce((s, p) => s + p.bytes, 0) * 8) / playerSecs / 1e6,
        gatewayMbpsOut: (sumDelta(m1, m0, 'gw_flv_out_bytes_out') * 8) / gwSecs / 1e6,
        perPlayerMbps: { min: Math.min(...mbps), p50: mbpsSummary.p50, max: Math.max(...mbps) },
        cpuPct: load.gatewayPct,
        threadCpuPct: {
          main: (100 * (s1.threads.main - s0.threads.main)) / secs,
          other: (100 * (s1.threads.total - s0.threads.total - (s1.threads.main - s0.threads.main))) / secs,
        },
        core0BusyPct: load.coreBusyPct[0] ?? NaN,
        core1BusyPct: load.coreBusyPct[1] ?? NaN,
        core0IrqPct: load.coreIrqPct[0] ?? NaN,
        othersOnCore0Pct: pin ? Math.max(0, (load.coreBusyPct[0] ?? 0) - (load.coreIrqPct[0] ?? 0) - load.gatewayPct) : 0,
        rssMB: mb(lastRss),
        peakRssMB: mb(peakRss),
        idleRssMB: mb(idleRss),
        sentFrames: Math.max(0, to - from + 1),
        sentKeyframes: sentKey,
        completePlayers: ps.filter(complete).length,
        framesPerPlayer: { min: Math.min(...ps.map((p) => p.frames)), max: Math.max(...ps.map((p) => p.frames)) },
        keyframesPerPlayer: { min: Math.min(...ps.map((p) => p.keyframes)), max: Math.max(...ps.map((p) => p.keyframes)) },
        missingFrames: ps.reduce((s, p) => s + p.missing, 0),
        playersMissing: ps.filter((p) => p.missing > 0).length,
        duplicates: ps.reduce((s, p) => s + p.duplicates, 0),
        unknown: ps.reduce((s, p) => s + p.unknown, 0),
        keyMismatch: ps.reduce((s, p) => s + p.keyMismatch, 0),
        closedPlayers: ps.filter((p) => p.closed).length,
        lagMs: {
          p50: check.latency.quantile(0.5),
          p99: check.latency.quantile(0.99),
          max: check.latency.max,
          count: check.latency.count,
          negative: check.latency.negative,
        },
        addedLatencyMs: { p50: histogramQuantile(lat, 0.5) * 1000, p99: histogramQuantile(lat, 0.99) * 1000 },
        eventLoopDelayMs: {
          p99: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p99_seconds') * 1000,
          max: sumOf(m1, 'gw_process_nodejs_eventloop_lag_max_seconds') * 1000,
        },
        playerProcsPct: (100 * (s1.players - s0.players)) / secs,
        playerLoopDelayMs: { p99: Math.max(...marks.map((m) => m.loopP99)), max: Math.max(...marks.map((m) => m.loopMax)) },
        othersCores: load.othersCores,
        irqCores: load.irqCores,
        framesDroppedAtTerminal: s1.dropped - s0.dropped,
      };
      const errors = [...new Set(ps.map((p) => p.error).filter((e): e is string => e !== undefined))];
      report(result, o, errors);
    } finally {
      clearInterval(poller);
    }
  } catch (err) {
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    if (keeper) clearInterval(keeper);
    await procs?.close();
    term?.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    run.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) {
    const main = printRunProfiles(profileDir, 'fanout', 'main thread (the whole run: opens, joins and the window)');
    if (main && result) result.profile = main;
  }
  if (!result) throw new Error('no result');
  return result;
}

function report(r: FanoutResult, o: FanoutOptions, errors: string[]): void {
  const ok = (b: boolean) => (b ? 'ok' : 'MISSED');
  const every = r.completePlayers === r.players;
  const lines = [
    `  players: ${r.connected} of ${r.players} connected; ${r.closedPlayers} closed before the end` +
      (errors.length ? ` (errors: ${errors.slice(0, 3).join('; ')})` : ''),
    `  in:  ${f2(r.mbpsIn)} Mbit/s from the terminal (${r.framesDroppedAtTerminal} frames dropped at the terminal on backpressure)`,
    `  out: ${f1(r.mbpsOut)} Mbit/s of FLV read by the players (gateway wrote ${f1(r.gatewayMbpsOut)}); per player ` +
      `min ${f2(r.perPlayerMbps.min)} / median ${f2(r.perPlayerMbps.p50)} / max ${f2(r.perPlayerMbps.max)} Mbit/s`,
    `  gateway CPU: ${f1(r.cpuPct)} % of one core over ${f1(r.seconds)} s (main thread ${f1(r.threadCpuPct.main)} %, other threads ` +
      `${f1(r.threadCpuPct.other)} %) -> ${f1(r.players / (r.cpuPct / 100))} players per core at this rate; ` +
      `core 0 ${f1(r.core0BusyPct)} % busy, of which interrupts ${f1(r.core0IrqPct)} % (loopback delivery, charged to no process)`,
    `  gateway RSS: ${f1(r.rssMB)} MB at the end, ${f1(r.peakRssMB)} MB peak in the window (${f1(r.idleRssMB)} MB idle)`,
    // the floor's tags are packets: a frame's later packets read as repeats of its first, so no duplicates are counted
    `  frames: the terminal sent ${r.sentFrames} video frames (${r.sentKeyframes} key frames) in the checked part of the window; ` +
      (o.floor ? "the floor writes each packet as a tag, so a frame counts by its first packet's: " : '') +
      `${r.completePlayers} of ${r.players} players read every ${o.floor ? 'frame, in order' : 'one once and in order'}; ` +
      `per player ${r.framesPerPlayer.min}-${r.framesPerPlayer.max} frames, ${r.keyframesPerPlayer.min}-${r.keyframesPerPlayer.max} key frames; ` +
      `${r.missingFrames} missing (${r.playersMissing} players), ${o.floor ? '' : `${r.duplicates} duplicate or out of order, `}` +
      `${r.unknown} never sent, ${r.keyMismatch} key flags wrong`,
    `  lag, terminal write -> player read (${r.lagMs.count} frames, every player): p50 ${f2(r.lagMs.p50)} ms, p99 ${f2(r.lagMs.p99)} ms, ` +
      `max ${f2(r.lagMs.max)} ms` +
      (r.lagMs.negative ? ` (${r.lagMs.negative} negative: clocks disagree)` : ''),
    ...(o.floor
      ? []
      : [
          `  gateway: added latency (frame read -> its bytes handed to every player's socket, the tick's writes done) p50 ${f2(r.addedLatencyMs.p50)} ms, ` +
            `p99 ${f2(r.addedLatencyMs.p99)} ms; event-loop delay p99 ${f2(r.eventLoopDelayMs.p99)} ms, max ${f2(r.eventLoopDelayMs.max)} ms (a 10 ms timer)`,
        ]),
    `  players' ${o.procs} process(es): ${f1(r.playerProcsPct)} % of a core, event-loop delay p99 ${f2(r.playerLoopDelayMs.p99)} ms, ` +
      `max ${f2(r.playerLoopDelayMs.max)} ms; core 1 ${f1(r.core1BusyPct)} % busy`,
    `  machine: other processes used ${f2(r.othersCores)} cores in the window, interrupts ${f2(r.irqCores)}`,
  ];
  if (r.othersCores > DISTURBED_CORES) lines.push(`  DISTURBED: other processes used over ${DISTURBED_CORES} core: run it again`);
  // core 0 busier than the gateway and the interrupts there explain: someone else ran on the gateway's core
  else if (r.othersOnCore0Pct > 5) lines.push(`  DISTURBED: other processes took ${f1(r.othersOnCore0Pct)} % of core 0, the gateway's: run it again`);
  if (r.core1BusyPct > 95)
    lines.push('  WARNING: core 1 (terminal and players) was saturated: lag and throughput may be limited by the players, not the gateway');
  if (o.floor) lines.push(`  the floor, not the gateway: no target (fanout --vs-floor K compares the two)`);
  else
    lines.push(
      `  target (${TARGET.players} players): gateway CPU < ${TARGET.cpuPct} % of a core: ${ok(r.cpuPct < TARGET.cpuPct)}; ` +
        `every player got every frame: ${ok(every)}` +
        (r.players !== TARGET.players ? ` (this run: ${r.players} players)` : ''),
    );
  console.log(lines.join('\n'));
}
