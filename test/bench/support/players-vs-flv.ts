/**
 * What rtmp-players and webrtc-viewers share: N simulated terminals pushing JT/T 1078 over TCP (ingest-flv's load: the
 * padded capture, the same start phases), one player per stream, and K rounds of an HTTP-FLV run and a run of another
 * kind of player (and the bare-relay floor) alternated, each on a fresh gateway. Here: their command line, the rounds,
 * a run's frame (site, gateway, terminals ticking, clean-up), its window's gateway and load figures, and the lines of
 * the summary both print.
 */
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixturePath, scratchDir } from '../../support/paths';
import { alternate, othersNote, total } from './alternate';
import { BenchArgs, captureFile, loadArg, windowArg, type LoadBenchOptions, type WindowBenchOptions } from './bench-args';
import {
  Api,
  BOOT_TIMEOUT_MS,
  FLOOR_MAIN,
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
  printRunProfiles,
  profileDirFor,
  runDeadline,
  startGateway,
  stopGateway,
  waitHealthy,
  watchWindow,
  writeSite,
  type Gateway,
} from './gateway-harness';
import { keepAwake } from './keep-awake';
import { coreTimes } from './process-probe';
import type { StartPhases } from './start-phases';
import { SynthTerminal, speechPcm, synthesise, type SynthStream } from './synth-terminals';

export interface VsFlvOptions extends LoadBenchOptions, WindowBenchOptions {
  streams: number;
  rounds: number;
  /** terminals send G.711A too */
  audio: boolean;
  /** a floor run in each round (the machine's speed) */
  floor: boolean;
}

/** the bench, its other kind of player and how it names them */
export interface VsFlvBench<A extends string> {
  bench: string;
  alt: A;
  /** the other kind's name in the lines: RTMP, WebRTC */
  altName: string;
  /** player, viewer */
  noun: string;
  /** the header's note on audio, when the terminals send it */
  audioNote: string;
  /** pooled gateway CPU alt/FLV: this or less */
  target: number;
}

export type VsFlvKind<A extends string> = 'flv' | A | 'floor';

const MAX_SEND_BACKLOG = 1024 * 1024;
const TICK_MS = 4;
const SCRAPE_SETTLE_MS = 1000;

/** --streams N, --rounds K, --audio, --no-floor, windowArg's and loadArg's */
export function parseVsFlvArgs(args: string[], usage: string): VsFlvOptions {
  const o: VsFlvOptions = {
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
  const r = new BenchArgs(args, usage);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--streams':
        o.streams = r.num(a, 1, 2000, true);
        break;
      case '--rounds':
        o.rounds = r.num(a, 1, 20, true);
        break;
      case '--audio':
        o.audio = true;
        break;
      case '--no-floor':
        o.floor = false;
        break;
      default:
        if (!windowArg(a, r, o) && !loadArg(a, r, o)) r.unknown(a);
    }
  }
  o.capture = captureFile(o.capture);
  return o;
}

/** the load, then `o.rounds` rounds of FLV, the other kind and the floor alternated (FLV first); `summarise` after them */
export async function runRounds<A extends string, R>(
  o: VsFlvOptions,
  b: VsFlvBench<A>,
  runOnce: (stream: SynthStream, kind: VsFlvKind<A>, pin: boolean) => Promise<R>,
  summarise: (rounds: Array<Record<VsFlvKind<A>, R>>) => void,
): Promise<R[][]> {
  const audio = o.audio ? { pcm: speechPcm(fixturePath('g726/in_32.g726')), frameMs: 20 } : undefined;
  const stream = synthesise(o.capture, o.mbps, 950, audio);
  const pin = canPin(o.pin, b.bench, ' (CPU % is then less exact)');
  console.log(
    `${b.bench}: ${o.streams} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s (${path.basename(o.capture)}, ${f1(stream.framesPerSecond)} frames/s` +
      `${o.audio ? b.audioNote : ', video only'}), one ${b.noun} each; ${o.rounds} round(s) of HTTP-FLV, ${b.altName}` +
      `${o.floor ? ', floor' : ''}; warm-up ${o.warmup} s, measured ${o.seconds} s; gateway ${pin ? 'on core 0, this process on core 1' : 'unpinned'}`,
  );
  const runs = {
    flv: () => runOnce(stream, 'flv', pin),
    [b.alt]: () => runOnce(stream, b.alt, pin),
    ...(o.floor ? { floor: () => runOnce(stream, 'floor', pin) } : {}),
  };
  const rounds = await alternate(o.rounds, runs as Record<VsFlvKind<A>, () => Promise<R>>);
  summarise(rounds);
  return rounds.map((r) => Object.values(r));
}

/** a run's gateway, with the terminals this bench opens on it */
export interface GatewayRun {
  gw: Gateway;
  api: Api;
  deadline: AbortSignal;
  terminals: SynthTerminal[];
  /** the gateway's RSS once healthy */
  idleRss: number;
}

export interface RunFrame {
  bench: string;
  kind: string;
  /** the kind's name in the lines */
  name: string;
  pin: boolean;
  /** beyond the gateway's boot: the run fails past it */
  budgetMs: number;
  /** the site's plugins after jt1078-ingest: the same for every kind of run, only who plays differs */
  plugins: () => Promise<unknown[]>;
  /** the players' clean-up, before the terminals' */
  close: () => void;
}

/**
 * One run on a fresh gateway (the floor for kind 'floor') in its own scratch directory: the gateway healthy, this
 * process pinned to core 1, the terminals sent to every 4 ms, then `body`; whatever happens, the players, terminals
 * and gateway stopped. With --profile, the gateway's top functions after a FLV or other run.
 */
export async function gatewayRun<T>(o: VsFlvOptions, f: RunFrame, body: (run: GatewayRun) => Promise<T>): Promise<T> {
  const run = runDeadline(BOOT_TIMEOUT_MS + f.budgetMs);
  const deadline = run.signal;
  const dir = scratchDir(`bench-${f.bench}-${f.kind}`);
  const profileDir = profileDirFor(o.profile && f.kind !== 'floor');
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
    plugins: [{ name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } }, ...(await f.plugins())],
  });
  const gw = startGateway({ siteFile, dir, pin: f.pin, profileDir, nodeOpts: o.nodeOpts, main: f.kind === 'floor' ? FLOOR_MAIN : undefined });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  let ticker: NodeJS.Timeout | undefined;
  let stopSpinning: (() => void) | undefined;
  let result: T;
  try {
    await waitHealthy(gw, api, deadline);
    if (f.pin && !pinSelf(1)) console.warn(`${f.bench}: could not pin this process to core 1`);
    const idleRss = gatewayRss(gw.pid);
    ticker = setInterval(() => {
      const now = performance.now();
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    stopSpinning = keepAwake();
    result = await body({ gw, api, deadline, terminals, idleRss });
  } catch (err) {
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    stopSpinning?.();
    f.close();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    run.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) printRunProfiles(profileDir, f.bench, `main thread, ${f.name} run`);
  return result;
}

/** terminal `i` on the port its open answered, started at its own GOP phase from a different I frame (as ingest-flv) */
export async function startTerminal(run: GatewayRun, stream: SynthStream, phases: StartPhases, sim: string, i: number, port: number): Promise<SynthTerminal> {
  const sock = await connectTcp(port, run.deadline);
  sock.on('error', () => undefined);
  sock.on('data', () => undefined);
  const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
  const first = stream.keyframes[(i * 7) % stream.keyframes.length];
  term.start(phases.at(i, performance.now()), first);
  run.terminals.push(term);
  return term;
}

/** the gateway's and the load's figures of a window */
export interface WindowFigures {
  seconds: number;
  /** % of one core, all the gateway's threads; main thread apart */
  cpuPct: number;
  mainPct: number;
  rssMB: number;
  peakRssMB: number;
  idleRssMB: number;
  mbpsIn: number;
  generatorLoopP99Ms: number;
  othersCores: number;
  droppedFrames: number;
}

type Metrics = Awaited<ReturnType<Api['timedMetrics']>>['metrics'];

export interface Window<E> {
  figures: WindowFigures;
  /** `players`' snapshot at the window's start and end */
  before: E;
  after: E;
  /** the gateway's metrics scraped before and after the window, and the seconds between the two scrapes */
  m0: Metrics;
  m1: Metrics;
  scrapeSecs: number;
  /** `atScrape` as each scrape answered */
  scraped: [number, number];
  /** video frames the terminals sent in the window */
  sent: number;
  lastRss: number;
  /** this process's CPU seconds in the window */
  selfSecs: number;
}

/**
 * The window (from a second after the scrape that opens it, as ingest-flv): `players` snapshot at its start and end,
 * `measuring` on through it, `atScrape` read as each scrape answers.
 */
export async function measureWindow<E>(
  run: GatewayRun,
  seconds: number,
  players: { snap: () => E; measuring: (on: boolean) => void; atScrape?: () => number },
): Promise<Window<E>> {
  const { gw, api, deadline, terminals } = run;
  const { metrics: m0, at: m0At } = await api.timedMetrics();
  const scraped0 = players.atScrape?.() ?? 0;
  await sleep(SCRAPE_SETTLE_MS, undefined, { signal: deadline });
  const snap = () => ({
    at: performance.now(),
    threads: gatewayCpu(gw.pid),
    self: process.cpuUsage(),
    cores: coreTimes(),
    players: players.snap(),
    sent: terminals.reduce((s, t) => s + t.sentCount, 0),
    bytesIn: terminals.reduce((s, t) => s + t.bytes, 0),
    dropped: terminals.reduce((s, t) => s + t.dropped, 0),
  });
  players.measuring(true);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const s0 = snap();
  const { lastRss, peakRss } = await watchWindow(gw, s0.at + seconds * 1000, deadline);
  const s1 = snap();
  loop.disable();
  players.measuring(false);
  const { metrics: m1, at: m1At } = await api.timedMetrics();
  const scraped1 = players.atScrape?.() ?? 0;
  const secs = (s1.at - s0.at) / 1000;
  const gwCpu = s1.threads.total - s0.threads.total;
  const self = (s1.self.user - s0.self.user + s1.self.system - s0.self.system) / 1e6;
  const busy = s1.cores.reduce((n, c, i) => n + c.busy - c.irq - ((s0.cores[i]?.busy ?? 0) - (s0.cores[i]?.irq ?? 0)), 0);
  return {
    figures: {
      seconds: secs,
      cpuPct: (100 * gwCpu) / secs,
      mainPct: (100 * (s1.threads.main - s0.threads.main)) / secs,
      rssMB: mb(lastRss),
      peakRssMB: mb(peakRss),
      idleRssMB: mb(run.idleRss),
      mbpsIn: ((s1.bytesIn - s0.bytesIn) * 8) / secs / 1e6,
      generatorLoopP99Ms: loop.percentile(99) / 1e6,
      othersCores: Math.max(0, (busy - gwCpu - self) / secs),
      droppedFrames: s1.dropped - s0.dropped,
    },
    before: s0.players,
    after: s1.players,
    m0,
    m1,
    scrapeSecs: (m1At - m0At) / 1000,
    scraped: [scraped0, scraped1],
    sent: s1.sent - s0.sent,
    lastRss,
    selfSecs: self,
  };
}

/** what the summary reads of a run */
export interface VsFlvRun {
  cpuPct: number;
  rssMB: number;
  bytesOutPerSec: number;
  othersCores: number;
  errors: string[];
}

/** the other kind over FLV, per round and pooled (sums over the rounds), of a figure of both runs */
export function ratios<A extends string, R>(rounds: ReadonlyArray<Record<'flv' | A, R>>, alt: A, f: (r: R) => number): { per: number[]; pooled: number } {
  return {
    per: rounds.map((r) => f(r[alt]) / f(r.flv)),
    pooled: total(rounds, (r) => f(r[alt])) / total(rounds, (r) => f(r.flv)),
  };
}

/**
 * The summary: a line a round (`round` says what comes between its CPU and the floor's), the pooled CPU ratio against
 * the target, `detail`'s line, the bytes the players read (`readNote` after the other kind's per player), whether
 * every player got media (`withMedia`), and the floor's CPU.
 */
export function summariseVsFlv<A extends string, R extends VsFlvRun>(
  o: VsFlvOptions,
  b: VsFlvBench<A>,
  rounds: Array<Record<VsFlvKind<A>, R>>,
  lines: { round: (r: Record<VsFlvKind<A>, R>) => string; detail: string; readNote: string; withMedia: (r: R) => number },
): void {
  const alt = b.altName;
  console.log(`\n${b.bench}: ${alt} vs HTTP-FLV ${b.noun}s, ${o.streams} streams, ${rounds.length} round(s) alternated (FLV first), ${o.seconds} s windows:`);
  for (const [k, r] of rounds.entries()) {
    console.log(`  round ${k + 1}: ${lines.round(r)}` + (r.floor ? `; floor ${f1(r.floor.cpuPct)} %` : '') + othersNote(r.flv, r[b.alt]));
  }
  const cpu = ratios(rounds, b.alt, (r) => r.cpuPct);
  console.log(
    `  pooled gateway CPU ${alt}/FLV: ${f2(cpu.pooled)} (rounds ${f2(Math.min(...cpu.per))}-${f2(Math.max(...cpu.per))}; target ${b.target} or less): ${cpu.pooled <= b.target ? 'ok' : 'MISSED'}`,
  );
  console.log(lines.detail);
  const sum = (f: (r: Record<VsFlvKind<A>, R>) => number) => total(rounds, f);
  const bps = (k: 'flv' | A) => sum((r) => r[k].bytesOutPerSec) / rounds.length;
  const [flv, other] = [bps('flv'), bps(b.alt)];
  console.log(
    `  read by the ${b.noun}s: FLV ${f1(flv / 1e6)} MB/s (${f1(flv / o.streams / 1e3)} kB/s a ${b.noun}), ` +
      `${alt} ${f1(other / 1e6)} MB/s (${f1(other / o.streams / 1e3)} kB/s a ${b.noun}${lines.readNote}): ${alt}/FLV bytes ${f2(other / flv)}`,
  );
  const media = rounds.every(
    (r) => lines.withMedia(r.flv) === o.streams && lines.withMedia(r[b.alt]) === o.streams && r.flv.errors.length + r[b.alt].errors.length === 0,
  );
  console.log(`  every ${b.noun} of every run got media, without an error: ${media ? 'yes' : 'NO (see the runs above)'}`);
  if (rounds[0].floor) {
    const fl = rounds.map((r) => r.floor.cpuPct);
    console.log(
      `  machine speed: the floor took ${fl.map(f1).join(' / ')} % of a core on this load (FLV/floor ${f2(sum((r) => r.flv.cpuPct) / sum((r) => r.floor.cpuPct))})`,
    );
  }
}
