/**
 * Open latency under load: while N simulated terminals push ~1 Mbit/s each with one HTTP-FLV player
 * each (the ingest-flv load, built from the same support modules), a probe in a process of its own sends
 * `POST /strm/open` at a steady rate for channels that are already live (a second request, of another
 * application, on a stream a terminal pushes: the answer is `ready: true` with its play URL at once) and closes
 * each probe request as soon as it is answered. The same probe runs first with only a few streams live (the
 * baseline), then during the measured window of the full load. Reports open (and close) latency p50/p99/max.
 * Target: open p99 under 10 ms while the load runs.
 *
 *   node dist/test/bench/run.js open-latency [--terminals N] [--seconds S] [--rate R] [--baseline-seconds S]
 *        [--warmup S] [--mbps X] [--capture FILE] [--workers N] [--profile] [--no-pin] [--idle-client] [--keep-dir]
 *        [--node-opt OPT]...
 */
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { scratchDir } from '../support/paths';
import { BenchArgs, captureFile, loadArg, windowArg } from './support/bench-args';
import { BenchPlayer } from './support/bench-player';
import {
  Api,
  BOOT_TIMEOUT_MS,
  Reservoir,
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
} from './support/gateway-harness';
import { IDLE_CLIENT_USAGE, keepAwake } from './support/keep-awake';
import { OpenProbe, PROBE_NICE, type ProbeResult } from './support/open-probe';
import { DISTURBED_CORES, summarise, windowLoad, type CpuSnap, type Summary, type WindowLoad } from './support/perf-probes';
import { coreTimes, cpuSeconds, quantile, sumOf } from './support/process-probe';
import { StartPhases } from './support/start-phases';
import { SynthTerminal, synthesise } from './support/synth-terminals';

export interface OpenLatencyOptions {
  terminals: number;
  seconds: number;
  rate: number;
  baselineSeconds: number;
  warmup: number;
  mbps: number;
  capture: string;
  workers: number;
  profile: boolean;
  pin: boolean;
  /** the load generator spins (support/keep-awake.ts; default); --idle-client lets it sleep between events */
  busyClient: boolean;
  keepDir: boolean;
  nodeOpts: string[];
}

export interface ProbeFigures {
  open: Summary;
  close: Summary;
  /** the probe's own start lateness p99, ms: when high, its process was late, not the gateway */
  lateP99: number;
  started: number;
  failed: number;
  notReady: number;
  ctrlTrue: number;
  notClosed: number;
  skipped: number;
  errors: string[];
  load: WindowLoad;
}

export interface OpenLatencyResult {
  terminals: number;
  /** the gateway on core 0, the rest on core 1 */
  pinned: boolean;
  baseline?: ProbeFigures & { streams: number };
  loaded: ProbeFigures;
  /** the load in the measured window */
  mbpsIn: number;
  mbpsOut: number;
  rssMB: number;
  eventLoopDelayMs: { p99: number; max: number };
  endToEndMs: { p50: number; p99: number; count: number };
  stalledPlayers: number;
  droppedFrames: number;
  profile?: string;
}

const TARGET = { terminals: 1000, p99Ms: 10 };
const TICK_MS = 4;
const OPEN_CONCURRENCY = 16;
const MAX_SEND_BACKLOG = 1024 * 1024;
/** streams live during the baseline probe */
const BASELINE_STREAMS = 10;
const MAX_IN_FLIGHT = 32;
const PROBE_APP = { appId: 'probe', user: 'probe', password: 'probe' };

export const USAGE = `usage: npm run bench -- open-latency [--terminals N] [--seconds S] [--rate R] [--baseline-seconds S] [--warmup S]
                       [--mbps X] [--capture FILE] [--workers N] [--profile] [--no-pin] [--idle-client] [--keep-dir]
                       [--node-opt OPT]...
  --terminals N         simulated terminals, one HTTP-FLV player each: the load (default 1000)
  --seconds S           measured window, the probe running throughout (default 30)
  --rate R              probe opens per second, each closed once answered (default 20)
  --baseline-seconds S  the same probe first with only ${BASELINE_STREAMS} streams live (default 15; 0: no baseline)
  --warmup S            load before the window opens (default 5)
  --mbps X              per-terminal rate, the capture's video padded up to it (default 1)
  --capture FILE        JT/T 1078 capture to re-pack (default shared/fixtures/jt1078/glaciall-cif-h264-2013.bin)
  --workers N           the gateway's worker processes (GW_WORKERS; default 1)
  --profile             run the gateway under node --cpu-prof and print its top self-time functions (whole run)
  --no-pin              do not pin the gateway to core 0 and the load generator and probe to core 1
${IDLE_CLIENT_USAGE}. The probe process runs at nice ${PROBE_NICE} either way
  --keep-dir            keep the scratch directory (site file, gateway log, data)
  --node-opt OPT        pass a node option to the gateway process`;

export function parseArgs(args: string[]): OpenLatencyOptions {
  const o: OpenLatencyOptions = {
    terminals: 1000,
    seconds: 30,
    rate: 20,
    baselineSeconds: 15,
    warmup: 5,
    mbps: 1,
    capture: '',
    workers: 1,
    profile: false,
    pin: true,
    busyClient: true,
    keepDir: false,
    nodeOpts: [],
  };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--terminals':
        o.terminals = r.num(a, 1, 5000, true);
        break;
      case '--rate':
        o.rate = r.num(a, 0.1, 1000, false);
        break;
      case '--baseline-seconds':
        o.baselineSeconds = r.num(a, 0, 600, false);
        break;
      case '--workers':
        o.workers = r.num(a, 1, 64, true);
        break;
      case '--idle-client':
        o.busyClient = false;
        break;
      default:
        if (!windowArg(a, r, o) && !loadArg(a, r, o)) r.unknown(a);
    }
  }
  o.capture = captureFile(o.capture);
  return o;
}

function figures(r: ProbeResult, load: WindowLoad): ProbeFigures {
  return {
    open: summarise(r.open),
    close: summarise(r.close),
    lateP99: quantile(r.late, 0.99),
    started: r.started,
    failed: r.failed,
    notReady: r.notReady,
    ctrlTrue: r.ctrlTrue,
    notClosed: r.notClosed,
    skipped: r.skipped,
    errors: r.errors,
    load,
  };
}

export async function run(args: string[]): Promise<OpenLatencyResult> {
  const o = parseArgs(args);
  const stream = synthesise(o.capture, o.mbps, 950);
  const budgetMs = BOOT_TIMEOUT_MS + 120_000 + o.terminals * 200 + (o.baselineSeconds + o.warmup + o.seconds) * 1000 + 60_000;
  const run = runDeadline(budgetMs);
  const deadline = run.signal;
  const dir = scratchDir('bench-open-latency');
  const profileDir = profileDirFor(o.profile);
  const pin = canPin(o.pin, 'open-latency');

  const httpPort = await freePort();
  const site = {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      applications: [...benchApplications(o.terminals), PROBE_APP],
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } },
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
    ],
  };
  const siteFile = writeSite(dir, site);
  console.log(
    `open-latency: ${o.terminals} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s, one HTTP-FLV player each; probe ${o.rate} opens/s ` +
      `of live channels (application 'probe', a new request on a stream the load's request holds), each closed once answered; ` +
      `baseline ${o.baselineSeconds} s with ${Math.min(BASELINE_STREAMS, o.terminals)} streams live, warm-up ${o.warmup} s, measured ${o.seconds} s`,
  );

  const gw = startGateway({ siteFile, dir, pin, profileDir, nodeOpts: o.nodeOpts, workers: o.workers });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  const players: BenchPlayer[] = [];
  const e2e = new Reservoir();
  let probe: OpenProbe | undefined;
  let ticker: NodeJS.Timeout | undefined;
  let keeper: NodeJS.Timeout | undefined;
  let stopSpinning: (() => void) | undefined;
  let result: OpenLatencyResult | undefined;
  try {
    await waitHealthy(gw, api, deadline);
    if (pin && !pinSelf(1)) console.warn('open-latency: could not pin this process to core 1');
    probe = new OpenProbe(); // forked after pinning: it inherits core 1
    const probePid = probe.pid;
    console.log(
      `  gateway pid ${gw.pid}${pin ? ' on core 0; load generator, players and the probe process on core 1' : ' (unpinned)'}` +
        `; load generator ${o.busyClient ? 'spinning, so no write wakes it' : 'sleeping between events (--idle-client)'}; probe process at ${probe.niced ? `nice ${PROBE_NICE}` : "the bench's priority (could not renice it)"}` +
        (o.workers > 1 ? `; ${o.workers} worker processes (CPU and RSS add them up)` : ''),
    );

    if (o.busyClient) stopSpinning = keepAwake();
    ticker = setInterval(() => {
      const now = performance.now();
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    const reqIds: string[][] = [];
    const phases = new StartPhases(stream, o.terminals, performance.now());
    const sims = Array.from({ length: o.terminals }, (_x, i) => String(13900000000 + i));
    const addTerminals = (idx: number[]) =>
      pool(
        idx,
        OPEN_CONCURRENCY,
        0,
        async (i) => {
          const sim = sims[i];
          const app = Math.floor(i / REQUESTS_PER_APP);
          const r = await api.openLive(sim, app);
          (reqIds[app] ??= []).push(r.reqId);
          const sock = await connectTcp(r.port, deadline);
          sock.on('error', () => undefined);
          sock.on('data', () => undefined);
          const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
          // each at its own phase of the GOP and of the frame interval (start-phases.ts)
          term.start(phases.at(i, performance.now()), stream.keyframes[(i * 7) % stream.keyframes.length]);
          terminals.push(term);
          const player = new BenchPlayer(term, { video: (ms) => e2e.add(ms) });
          players.push(player);
          await player.connect(r.url, deadline);
        },
        deadline,
      );
    const snap = (): CpuSnap => {
      const self = process.cpuUsage();
      let probeCpu = 0;
      try {
        probeCpu = probePid ? cpuSeconds(probePid) : 0;
      } catch {
        /* gone */
      }
      return { at: performance.now(), gateway: gatewayCpu(gw.pid).total, bench: (self.user + self.system) / 1e6 + probeCpu, cores: coreTimes() };
    };
    const probeJob = (n: number, seconds: number) => ({
      port: httpPort,
      user: PROBE_APP.user,
      password: PROBE_APP.password,
      sims: sims.slice(0, n),
      rate: o.rate,
      seconds,
      maxInFlight: MAX_IN_FLIGHT,
    });

    // --- baseline: a few streams live, nothing else
    const nBase = Math.min(BASELINE_STREAMS, o.terminals);
    await addTerminals(Array.from({ length: nBase }, (_x, i) => i));
    // every stream has started (within a GOP: its phase) and sent its first key frame
    await sleep(phases.gopMs + 500, undefined, { signal: deadline });
    let baseline: OpenLatencyResult['baseline'];
    if (o.baselineSeconds > 0) {
      const b0 = snap();
      const r = await probe.run(probeJob(nBase, o.baselineSeconds), deadline);
      baseline = { ...figures(r, windowLoad(b0, snap())), streams: nBase };
    }

    // --- the load
    const opened = performance.now();
    await addTerminals(Array.from({ length: o.terminals - nBase }, (_x, i) => i + nBase));
    console.log(`  ${o.terminals} terminals pushing and playing (${o.terminals - nBase} opened in ${f1((performance.now() - opened) / 1000)} s)`);
    await api.keep(reqIds);
    keeper = setInterval(() => {
      api.keep(reqIds).catch((err) => console.warn(`open-latency: keep failed: ${(err as Error).message}`));
    }, 300_000);
    await sleep(o.warmup * 1000, undefined, { signal: deadline });
    checkDeadline(deadline);
    if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

    // --- the window: the load and the probe together
    await api.metrics(); // also resets the gateway's event-loop delay window
    for (const p of players) {
      p.measuring = true;
      p.videoInWindow = 0;
    }
    e2e.reset();
    const bytes = () => ({
      in: terminals.reduce((s, t) => s + t.bytes, 0),
      out: players.reduce((s, p) => s + p.counter.bytes, 0),
      dropped: terminals.reduce((s, t) => s + t.dropped, 0),
    });
    const c0 = bytes();
    const s0 = snap();
    let lastRss = 0;
    let probing = true;
    const rssLoop = (async () => {
      while (probing) {
        lastRss = gatewayRss(gw.pid);
        await sleep(1000);
      }
    })();
    let loadedRaw: ProbeResult;
    try {
      loadedRaw = await probe.run(probeJob(o.terminals, o.seconds), deadline);
    } finally {
      probing = false;
      await rssLoop;
    }
    const s1 = snap();
    const c1 = bytes();
    for (const p of players) p.measuring = false;
    const m1 = await api.metrics();
    const load = windowLoad(s0, s1);
    const e2eVals = e2e.values();
    result = {
      terminals: o.terminals,
      pinned: pin,
      baseline,
      loaded: figures(loadedRaw, load),
      mbpsIn: ((c1.in - c0.in) * 8) / load.seconds / 1e6,
      mbpsOut: ((c1.out - c0.out) * 8) / load.seconds / 1e6,
      rssMB: mb(lastRss),
      eventLoopDelayMs: {
        p99: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p99_seconds') * 1000,
        max: sumOf(m1, 'gw_process_nodejs_eventloop_lag_max_seconds') * 1000,
      },
      endToEndMs: { p50: quantile(e2eVals, 0.5), p99: quantile(e2eVals, 0.99), count: e2e.seen },
      stalledPlayers: players.filter((p) => p.videoInWindow === 0).length,
      droppedFrames: c1.dropped - c0.dropped,
    };
    report(result, o);
  } catch (err) {
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    if (keeper) clearInterval(keeper);
    stopSpinning?.();
    await probe?.close();
    for (const p of players) p.socket?.destroy();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    run.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) {
    const main = printRunProfiles(profileDir, 'open-latency', 'main thread (the whole run)');
    if (main && result) result.profile = main;
  }
  if (!result) throw new Error('no result');
  return result;
}

/** other processes past DISTURBED_CORES, or past 5 % of core 0 (the gateway's, when pinned: busy - interrupts - gateway) */
function disturbed(l: WindowLoad, pinned: boolean): boolean {
  const onCore0 = (l.coreBusyPct[0] ?? 0) - (l.coreIrqPct[0] ?? 0) - l.gatewayPct;
  return l.othersCores > DISTURBED_CORES || (pinned && onCore0 > 5);
}

function probeLines(label: string, f: ProbeFigures, pinned: boolean): string[] {
  const lines = [
    `  ${label}: ${f.open.count} opens answered of ${f.started} started (${f.failed} failed, ${f.skipped} skipped at ${MAX_IN_FLIGHT} in flight)` +
      `; open p50 ${f2(f.open.p50)} ms, p99 ${f2(f.open.p99)} ms, max ${f2(f.open.max)} ms; close p50 ${f2(f.close.p50)} ms, p99 ${f2(f.close.p99)} ms, max ${f2(f.close.max)} ms`,
    `    answers: ${f.open.count - f.notReady} ready at once, ${f.notReady} not ready, ${f.ctrlTrue} with ctrl true, ${f.notClosed} closes not confirmed` +
      (f.errors.length ? `; errors: ${f.errors.join('; ')}` : '') +
      `; probe started late p99 ${f2(f.lateP99)} ms (its own process)`,
    `    machine: gateway ${f1(f.load.gatewayPct)} % of a core, core 0 ${f1(f.load.coreBusyPct[0] ?? NaN)} % busy (interrupts ${f1(f.load.coreIrqPct[0] ?? NaN)} %); ` +
      `other processes ${f2(f.load.othersCores)} cores` +
      (disturbed(f.load, pinned) ? ' -- DISTURBED: run it again' : ''),
  ];
  return lines;
}

function report(r: OpenLatencyResult, o: OpenLatencyOptions): void {
  const ok = (b: boolean) => (b ? 'ok' : 'MISSED');
  const lines: string[] = [];
  if (r.baseline) lines.push(...probeLines(`baseline (${r.baseline.streams} streams live, no other load)`, r.baseline, r.pinned));
  const l = r.loaded.load;
  lines.push(
    `  load in the window: ${f1(r.mbpsIn)} Mbit/s in, ${f1(r.mbpsOut)} Mbit/s to the players; gateway ${f1(l.gatewayPct)} % of a core, ` +
      `RSS ${f1(r.rssMB)} MB, event-loop delay p99 ${f2(r.eventLoopDelayMs.p99)} ms (max ${f2(r.eventLoopDelayMs.max)}); players end to end ` +
      `p50 ${f2(r.endToEndMs.p50)} ms, p99 ${f2(r.endToEndMs.p99)} ms; ${r.stalledPlayers} players got no video, ${r.droppedFrames} frames dropped at terminals; ` +
      `core 1 ${f1(l.coreBusyPct[1] ?? NaN)} % busy`,
    ...probeLines(`under load (${r.terminals} terminals)`, r.loaded, r.pinned),
  );
  if ((l.coreBusyPct[0] ?? 0) > 97) lines.push('  NOTE: core 0 was saturated: the gateway could not keep up with this load on one core');
  lines.push(
    `  target: open p99 < ${TARGET.p99Ms} ms while ${TARGET.terminals} terminals push: ${ok(r.loaded.open.p99 < TARGET.p99Ms && r.loaded.failed === 0)}` +
      (r.terminals !== TARGET.terminals ? ` (this run: ${r.terminals} terminals)` : '') +
      (r.baseline ? `; baseline p99 < ${TARGET.p99Ms} ms: ${ok(r.baseline.open.p99 < TARGET.p99Ms)}` : '') +
      (o.workers > 1 ? ` (${o.workers} workers)` : ''),
  );
  console.log(lines.join('\n'));
}
