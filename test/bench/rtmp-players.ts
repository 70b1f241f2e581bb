/**
 * RTMP players against HTTP-FLV players: N simulated terminals pushing JT/T 1078 over TCP at ~1 Mbit/s
 * (ingest-flv's load: the padded capture, the same start phases), one player per stream, and K rounds of an HTTP-FLV
 * run (ingest-flv's counting players) and an RTMP run (support/bench-rtmp-player.ts: handshake, connect,
 * createStream, play with the URL's name and query, acknowledgements, then every message counted) alternated, each
 * on a fresh gateway with the same site (jt1078-ingest, flv-out and rtmp; audio-aac with --audio). The gateway runs
 * as its own process pinned to core 0; terminals and players run here, pinned to core 1. Each round also runs the
 * bare-relay floor (floor/bare-relay.ts) on the same load with FLV players: its CPU is this machine's speed at that
 * moment. Per run: gateway CPU and RSS, bytes and video frames per player (every player must get media), end to end.
 * Then RTMP CPU / FLV CPU per round and pooled. Target: 1.2 or less.
 *
 *   node dist/test/bench/run.js rtmp-players [--streams N] [--rounds K] [--seconds S] [--warmup S] [--audio] [--no-floor] ...
 */
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixturePath, scratchDir } from '../support/paths';
import { alternate, othersNote, total } from './support/alternate';
import { BenchArgs, captureFile, loadArg } from './support/bench-args';
import { BenchPlayer } from './support/bench-player';
import { RtmpBenchPlayer } from './support/bench-rtmp-player';
import {
  Api,
  BOOT_TIMEOUT_MS,
  FLOOR_MAIN,
  REQUESTS_PER_APP,
  Reservoir,
  benchApplications,
  canPin,
  checkDeadline,
  connectTcp,
  endScratch,
  f1,
  f2,
  freePort,
  gatewayCpu,
  gatewayRss,
  mb,
  pinSelf,
  pool,
  printRunProfiles,
  profileDirFor,
  runDeadline,
  startGateway,
  stopGateway,
  tail,
  waitHealthy,
  watchWindow,
  writeSite,
} from './support/gateway-harness';
import { keepAwake } from './support/keep-awake';
import { coreTimes, quantile, sumDelta, sumOf } from './support/process-probe';
import { StartPhases } from './support/start-phases';
import { SynthTerminal, speechPcm, synthesise, type SynthStream } from './support/synth-terminals';

export type Kind = 'flv' | 'rtmp' | 'floor';

export interface RtmpPlayersOptions {
  streams: number;
  rounds: number;
  seconds: number;
  warmup: number;
  mbps: number;
  capture: string;
  /** terminals send G.711A too and the site runs audio-aac: both kinds of player take AAC */
  audio: boolean;
  /** a floor run in each round (the machine's speed) */
  floor: boolean;
  profile: boolean;
  pin: boolean;
  keepDir: boolean;
  nodeOpts: string[];
}

export interface RunResult {
  kind: Kind;
  streams: number;
  seconds: number;
  /** % of one core, all the gateway's threads; main thread apart */
  cpuPct: number;
  mainPct: number;
  rssMB: number;
  peakRssMB: number;
  idleRssMB: number;
  mbpsIn: number;
  /** bytes read by the players, per second, all of them (protocol framing included) */
  bytesOutPerSec: number;
  /** the gateway's own count of bytes written to these players, per second (NaN for the floor) */
  gatewayBytesOutPerSec: number;
  /** players that read media in the window, and the least bytes any one read */
  playersWithMedia: number;
  minPlayerBytes: number;
  /** video frames (sequence headers apart) per player in the window: the fewest and the median */
  videoPerPlayer: { min: number; median: number; total: number };
  keyframesPerPlayerMin: number;
  /** video frames read / sent by the terminals in the window (pooled) */
  deliveredFraction: number;
  audioPerPlayerMin: number;
  errors: string[];
  e2eMs: { p50: number; p99: number; count: number };
  unmatched: number;
  acks: number;
  generatorLoopP99Ms: number;
  othersCores: number;
  droppedFrames: number;
}

const MAX_SEND_BACKLOG = 1024 * 1024;
const OPEN_CONCURRENCY = 16;
const TICK_MS = 4;
const SCRAPE_SETTLE_MS = 1000;
const OUT_METRIC: Record<Kind, string | undefined> = { flv: 'gw_flv_out_bytes_out', rtmp: 'gw_rtmp_bytes_out', floor: undefined };
const NAME: Record<Kind, string> = { flv: 'HTTP-FLV', rtmp: 'RTMP', floor: 'floor' };

export const USAGE = `usage: npm run bench -- rtmp-players [--streams N] [--rounds K] [--seconds S] [--warmup S] [--mbps X] [--audio]
                       [--no-floor] [--capture FILE] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
  --streams N     simulated terminals (one stream each), one player per stream (default 200)
  --rounds K      rounds of an HTTP-FLV run and an RTMP run alternated, FLV first (default 3)
  --seconds S     measured window of each run (default 20); --warmup S: load before it (default 5)
  --mbps X        rate per terminal on the wire (default 1)
  --audio         terminals send G.711A speech too and the site runs audio-aac: both players take AAC
  --no-floor      no bare-relay floor run in each round (its CPU is the machine's speed at that moment)
  --profile       the gateway under node --cpu-prof in the FLV and RTMP runs: top self-time functions after each
  --no-pin        by default the gateway runs on core 0 and this process on core 1
  --keep-dir, --node-opt OPT, --capture FILE: as ingest-flv's`;

export function parseArgs(args: string[]): RtmpPlayersOptions {
  const o: RtmpPlayersOptions = {
    streams: 200,
    rounds: 3,
    seconds: 20,
    warmup: 5,
    mbps: 1,
    capture: '',
    audio: false,
    floor: true,
    profile: false,
    pin: true,
    keepDir: false,
    nodeOpts: [],
  };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--streams':
        o.streams = r.num(a, 1, 2000, true);
        break;
      case '--rounds':
        o.rounds = r.num(a, 1, 20, true);
        break;
      case '--seconds':
        o.seconds = r.num(a, 1, 3600, false);
        break;
      case '--warmup':
        o.warmup = r.num(a, 0, 600, false);
        break;
      case '--mbps':
        o.mbps = r.num(a, 0.01, 100, false);
        break;
      case '--audio':
        o.audio = true;
        break;
      case '--no-floor':
        o.floor = false;
        break;
      default:
        if (!loadArg(a, r, o)) r.unknown(a);
    }
  }
  o.capture = captureFile(o.capture);
  return o;
}

export async function run(args: string[]): Promise<RunResult[][]> {
  return runOptions(parseArgs(args));
}

export async function runOptions(o: RtmpPlayersOptions): Promise<RunResult[][]> {
  const audio = o.audio ? { pcm: speechPcm(fixturePath('g726/in_32.g726')), frameMs: 20 } : undefined;
  const stream = synthesise(o.capture, o.mbps, 950, audio);
  const pin = canPin(o.pin, 'rtmp-players', ' (CPU % is then less exact)');
  console.log(
    `rtmp-players: ${o.streams} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s (${path.basename(o.capture)}, ${f1(stream.framesPerSecond)} frames/s` +
      `${o.audio ? ', G.711A speech: players take AAC from audio-aac' : ', video only'}), one player each; ${o.rounds} round(s) of HTTP-FLV, RTMP` +
      `${o.floor ? ', floor' : ''}; warm-up ${o.warmup} s, measured ${o.seconds} s; gateway ${pin ? 'on core 0, this process on core 1' : 'unpinned'}`,
  );
  const runs = {
    flv: () => runOnce(o, stream, 'flv', pin),
    rtmp: () => runOnce(o, stream, 'rtmp', pin),
    ...(o.floor ? { floor: () => runOnce(o, stream, 'floor', pin) } : {}),
  };
  const rounds = await alternate(o.rounds, runs as Record<Kind, () => Promise<RunResult>>);
  summarise(o, rounds);
  return rounds.map((r) => Object.values(r));
}

function summarise(o: RtmpPlayersOptions, rounds: Array<Record<Kind, RunResult>>): void {
  console.log(`\nrtmp-players: RTMP vs HTTP-FLV players, ${o.streams} streams, ${rounds.length} round(s) alternated (FLV first), ${o.seconds} s windows:`);
  for (const [k, r] of rounds.entries()) {
    console.log(
      `  round ${k + 1}: FLV ${f1(r.flv.cpuPct)} %, RTMP ${f1(r.rtmp.cpuPct)} % -> RTMP/FLV ${f2(r.rtmp.cpuPct / r.flv.cpuPct)}; ` +
        `RSS ${f1(r.flv.rssMB)} / ${f1(r.rtmp.rssMB)} MB` +
        (r.floor ? `; floor ${f1(r.floor.cpuPct)} %` : '') +
        othersNote(r.flv, r.rtmp),
    );
  }
  const sum = (f: (r: Record<Kind, RunResult>) => number) => total(rounds, f);
  const ratio = sum((r) => r.rtmp.cpuPct) / sum((r) => r.flv.cpuPct);
  const per = rounds.map((r) => r.rtmp.cpuPct / r.flv.cpuPct);
  console.log(
    `  pooled gateway CPU RTMP/FLV: ${f2(ratio)} (rounds ${f2(Math.min(...per))}-${f2(Math.max(...per))}; target 1.2 or less): ${ratio <= 1.2 ? 'ok' : 'MISSED'}`,
  );
  console.log(
    `  main thread RTMP/FLV: ${f2(sum((r) => r.rtmp.mainPct) / sum((r) => r.flv.mainPct))}; RSS at the end RTMP/FLV: ${f2(sum((r) => r.rtmp.rssMB) / sum((r) => r.flv.rssMB))} ` +
      `(${f1(sum((r) => r.flv.rssMB) / rounds.length)} / ${f1(sum((r) => r.rtmp.rssMB) / rounds.length)} MB, idle ${f1(sum((r) => r.flv.idleRssMB) / rounds.length)} MB)`,
  );
  const bps = (k: 'flv' | 'rtmp') => sum((r) => r[k].bytesOutPerSec) / rounds.length;
  console.log(
    `  read by the players: FLV ${f1(bps('flv') / 1e6)} MB/s (${f1(bps('flv') / o.streams / 1e3)} kB/s a player), ` +
      `RTMP ${f1(bps('rtmp') / 1e6)} MB/s (${f1(bps('rtmp') / o.streams / 1e3)} kB/s a player): RTMP/FLV bytes ${f2(bps('rtmp') / bps('flv'))}`,
  );
  const media = rounds.every(
    (r) => r.flv.playersWithMedia === o.streams && r.rtmp.playersWithMedia === o.streams && r.flv.errors.length + r.rtmp.errors.length === 0,
  );
  console.log(`  every player of every run got media, without an error: ${media ? 'yes' : 'NO (see the runs above)'}`);
  if (rounds[0].floor) {
    const fl = rounds.map((r) => r.floor.cpuPct);
    console.log(
      `  machine speed: the floor took ${fl.map(f1).join(' / ')} % of a core on this load (FLV/floor ${f2(sum((r) => r.flv.cpuPct) / sum((r) => r.floor.cpuPct))})`,
    );
  }
}

async function runOnce(o: RtmpPlayersOptions, stream: SynthStream, kind: Kind, pin: boolean): Promise<RunResult> {
  const budgetMs = BOOT_TIMEOUT_MS + 60_000 + o.streams * 200 + (o.warmup + o.seconds) * 1000 + 60_000;
  const run = runDeadline(budgetMs);
  const deadline = run.signal;
  const dir = scratchDir(`bench-rtmp-players-${kind}`);
  const profileDir = profileDirFor(o.profile && kind !== 'floor');
  const httpPort = await freePort();
  const siteFile = writeSite(dir, {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      applications: benchApplications(o.streams),
    },
    // the same site for both kinds of player: only who plays differs
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
      { name: 'rtmp', config: { port: 0, host: '127.0.0.1' } },
      ...(o.audio ? [{ name: 'audio-aac', config: {} }] : []),
    ],
  });
  const gw = startGateway({ siteFile, dir, pin, profileDir, nodeOpts: o.nodeOpts, main: kind === 'floor' ? FLOOR_MAIN : undefined });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  const flv: BenchPlayer[] = [];
  const rtmp: RtmpBenchPlayer[] = [];
  const e2e = new Reservoir();
  let ticker: NodeJS.Timeout | undefined;
  let stopSpinning: (() => void) | undefined;
  let result: RunResult | undefined;
  try {
    await waitHealthy(gw, api, deadline);
    if (pin && !pinSelf(1)) console.warn('rtmp-players: could not pin this process to core 1');
    const idleRss = gatewayRss(gw.pid);
    ticker = setInterval(() => {
      const now = performance.now();
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    stopSpinning = keepAwake();

    // --- open, push, play (as ingest-flv: each terminal at its own GOP phase, from a different I frame)
    const phases = new StartPhases(stream, o.streams, performance.now());
    const sims = Array.from({ length: o.streams }, (_x, i) => String(13900000000 + i));
    await pool(
      sims,
      OPEN_CONCURRENCY,
      0,
      async (sim, i) => {
        const r = await api.openLive(sim, Math.floor(i / REQUESTS_PER_APP), kind === 'rtmp' ? { fmt: 0, scheme: 'rtmp' } : undefined);
        const sock = await connectTcp(r.port, deadline);
        sock.on('error', () => undefined);
        sock.on('data', () => undefined);
        const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
        const first = stream.keyframes[(i * 7) % stream.keyframes.length];
        term.start(phases.at(i, performance.now()), first);
        terminals.push(term);
        if (kind === 'rtmp') {
          const p = new RtmpBenchPlayer(term, (ms) => e2e.add(ms));
          rtmp.push(p);
          await p.connect(r.url, deadline);
        } else {
          const p = new BenchPlayer(term, { video: (ms) => e2e.add(ms) });
          flv.push(p);
          await p.connect(r.url, deadline);
        }
      },
      deadline,
    );
    // every player has video before the warm-up counts
    const readyBy = performance.now() + 30_000 + o.streams * 50;
    const waiting = () =>
      kind === 'rtmp'
        ? rtmp.filter((p) => p.videoFrames === 0 && p.error === undefined).length
        : flv.filter((p) => p.counter.videoTags === 0 && !p.closed).length;
    while (waiting() > 0 && performance.now() < readyBy) await sleep(100, undefined, { signal: deadline });
    if (waiting() > 0)
      console.warn(
        `rtmp-players: ${waiting()} ${NAME[kind]} players still without video after ${f1((readyBy - performance.now()) / 1000 + 30 + o.streams * 0.05)} s`,
      );

    await sleep(o.warmup * 1000, undefined, { signal: deadline });
    checkDeadline(deadline);
    if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

    // --- the window (from a second after the scrape that opens it, as ingest-flv)
    const { metrics: m0, at: m0At } = await api.timedMetrics();
    await sleep(SCRAPE_SETTLE_MS, undefined, { signal: deadline });
    const playerBytes = () => (kind === 'rtmp' ? rtmp.map((p) => p.bytes) : flv.map((p) => p.counter.bytes));
    const snap = () => ({
      at: performance.now(),
      threads: gatewayCpu(gw.pid),
      self: process.cpuUsage(),
      cores: coreTimes(),
      players: playerBytes(),
      sent: terminals.reduce((s, t) => s + t.sentCount, 0),
      bytesIn: terminals.reduce((s, t) => s + t.bytes, 0),
      dropped: terminals.reduce((s, t) => s + t.dropped, 0),
    });
    for (const p of [...flv, ...rtmp]) p.measuring = true;
    e2e.reset();
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const s0 = snap();
    const { lastRss, peakRss } = await watchWindow(gw, s0.at + o.seconds * 1000, deadline);
    const s1 = snap();
    loop.disable();
    for (const p of [...flv, ...rtmp]) p.measuring = false;
    const { metrics: m1, at: m1At } = await api.timedMetrics();
    const secs = (s1.at - s0.at) / 1000;
    const gwCpu = s1.threads.total - s0.threads.total;
    const self = (s1.self.user - s0.self.user + s1.self.system - s0.self.system) / 1e6;
    const busy = s1.cores.reduce((n, c, i) => n + c.busy - c.irq - ((s0.cores[i]?.busy ?? 0) - (s0.cores[i]?.irq ?? 0)), 0);
    const got = s1.players.map((b, i) => b - s0.players[i]);
    const video = kind === 'rtmp' ? rtmp.map((p) => p.videoInWindow) : flv.map((p) => p.videoInWindow);
    const sortedVideo = [...video].sort((a, b) => a - b);
    const outMetric = OUT_METRIC[kind];
    result = {
      kind,
      streams: o.streams,
      seconds: secs,
      cpuPct: (100 * gwCpu) / secs,
      mainPct: (100 * (s1.threads.main - s0.threads.main)) / secs,
      rssMB: mb(lastRss),
      peakRssMB: mb(peakRss),
      idleRssMB: mb(idleRss),
      mbpsIn: ((s1.bytesIn - s0.bytesIn) * 8) / secs / 1e6,
      bytesOutPerSec: got.reduce((a, b) => a + b, 0) / secs,
      gatewayBytesOutPerSec: outMetric ? sumDelta(m1, m0, outMetric) / ((m1At - m0At) / 1000) : NaN,
      playersWithMedia: got.filter((b, i) => b > 0 && video[i] > 0).length,
      minPlayerBytes: Math.min(...got),
      videoPerPlayer: { min: sortedVideo[0] ?? 0, median: sortedVideo[sortedVideo.length >> 1] ?? 0, total: video.reduce((a, b) => a + b, 0) },
      keyframesPerPlayerMin: kind === 'rtmp' ? Math.min(...rtmp.map((p) => p.keyframesInWindow)) : NaN,
      deliveredFraction: video.reduce((a, b) => a + b, 0) / Math.max(1, s1.sent - s0.sent),
      audioPerPlayerMin: Math.min(...(kind === 'rtmp' ? rtmp.map((p) => p.audioInWindow) : flv.map((p) => p.audioInWindow))),
      errors:
        kind === 'rtmp'
          ? rtmp.flatMap((p) => (p.error !== undefined ? [p.error] : p.closed ? ['closed'] : []))
          : flv.flatMap((p) => (p.counter.error !== undefined ? [p.counter.error] : p.closed ? ['closed'] : [])),
      e2eMs: { p50: quantile(e2e.values(), 0.5), p99: quantile(e2e.values(), 0.99), count: e2e.seen },
      unmatched: kind === 'rtmp' ? rtmp.reduce((n, p) => n + p.unmatched, 0) : flv.reduce((n, p) => n + p.unmatched, 0),
      acks: rtmp.reduce((n, p) => n + p.acksSent, 0),
      generatorLoopP99Ms: loop.percentile(99) / 1e6,
      othersCores: Math.max(0, (busy - gwCpu - self) / secs),
      droppedFrames: s1.dropped - s0.dropped,
    };
    printRun(result, o, kind === 'floor' ? undefined : sumOf(m1, kind === 'rtmp' ? 'gw_rtmp_players' : 'gw_flv_out_players'));
  } catch (err) {
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    stopSpinning?.();
    for (const p of flv) p.socket?.destroy();
    for (const p of rtmp) p.socket?.destroy();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    run.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) printRunProfiles(profileDir, 'rtmp-players', `main thread, ${NAME[kind]} run`);
  if (!result) throw new Error('no result'); // unreachable: every path without one throws above
  return result;
}

function printRun(r: RunResult, o: RtmpPlayersOptions, gwPlayers: number | undefined): void {
  const n = r.streams;
  const lines = [
    `  ${NAME[r.kind].padEnd(8)} gateway ${f1(r.cpuPct)} % of a core (main thread ${f1(r.mainPct)}), RSS ${f1(r.rssMB)} MB (peak ${f1(r.peakRssMB)}, idle ${f1(r.idleRssMB)}); ` +
      `in ${f1(r.mbpsIn)} Mbit/s, players read ${f1(r.bytesOutPerSec / 1e6)} MB/s (${f1(r.bytesOutPerSec / n / 1e3)} kB/s each, least ${f1(r.minPlayerBytes / r.seconds / 1e3)})` +
      (Number.isFinite(r.gatewayBytesOutPerSec) ? `, gateway says ${f1(r.gatewayBytesOutPerSec / 1e6)} MB/s` : ''),
    `           ${r.playersWithMedia}/${n} players with media${gwPlayers !== undefined ? ` (gateway counts ${gwPlayers})` : ''}, video frames a player ${r.videoPerPlayer.min}-${r.videoPerPlayer.median} (min-median; ` +
      `${f1(100 * r.deliveredFraction)} % of those sent)` +
      (Number.isFinite(r.keyframesPerPlayerMin) ? `, key frames at least ${r.keyframesPerPlayerMin}` : '') +
      (o.audio ? `, audio frames at least ${r.audioPerPlayerMin}` : '') +
      `; e2e p50 ${f1(r.e2eMs.p50)} / p99 ${f1(r.e2eMs.p99)} ms (${r.unmatched} unmatched)` +
      (r.kind === 'rtmp' ? `; ${r.acks} acks sent` : '') +
      `; load generator loop p99 ${f1(r.generatorLoopP99Ms)} ms, others ${f2(r.othersCores)} cores` +
      (r.droppedFrames > 0 ? `, ${r.droppedFrames} frames DROPPED at the terminals` : ''),
  ];
  if (r.errors.length > 0) lines.push(`           ${r.errors.length} player ERRORS, e.g. ${[...new Set(r.errors)].slice(0, 3).join('; ')}`);
  if (r.playersWithMedia < n) lines.push(`           ${n - r.playersWithMedia} players got NO media in the window`);
  console.log(lines.join('\n'));
}
