/**
 * WebRTC viewers against HTTP-FLV players: N simulated terminals pushing JT/T 1078 over TCP at ~1 Mbit/s (ingest-flv's
 * load: the padded capture, the same start phases), one viewer per stream, and K rounds of an HTTP-FLV run (ingest-flv's
 * counting players) and a WebRTC run (support/bench-webrtc-viewer.ts: a node-datachannel peer connection per viewer,
 * recvonly H.264 and PCMA, its offer POSTed to the WHEP play URL, every RTP packet counted) alternated, each on a fresh
 * gateway with the same site (jt1078-ingest, flv-out and webrtc, one process). The gateway runs as its own process
 * pinned to core 0; terminals and viewers (their libdatachannel threads too) run here, pinned to core 1. Each round
 * also runs the bare-relay floor (floor/bare-relay.ts) on the same load with FLV players: this machine's speed then.
 *
 * Per run: gateway CPU (every thread of the process: libdatachannel's ICE, DTLS and SRTP run in threads of its own),
 * gateway RSS before the viewers came (the streams alone) and at the end of the window, so RSS per viewer; bytes,
 * packets (RTP for WebRTC, FLV tags for FLV) and video frames per viewer; viewers that got no media, named. Then
 * WebRTC CPU / FLV CPU per round and pooled. Target (the issue): 2 or less.
 *
 *   node dist/test/bench/run.js webrtc-viewers [--streams N] [--rounds K] [--seconds S] [--warmup S] [--audio] [--no-floor] ...
 */
import * as dgram from 'node:dgram';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as ndc from 'node-datachannel';
import { fixturePath, scratchDir } from '../support/paths';
import { alternate, othersNote, total } from './support/alternate';
import { BenchArgs, captureFile, loadArg } from './support/bench-args';
import { BenchPlayer } from './support/bench-player';
import { WebrtcBenchViewer } from './support/bench-webrtc-viewer';
import {
  Api,
  BOOT_TIMEOUT_MS,
  FLOOR_MAIN,
  REQUESTS_PER_APP,
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
import { coreTimes, sumDelta, sumOf } from './support/process-probe';
import { StartPhases } from './support/start-phases';
import { SynthTerminal, speechPcm, synthesise, type SynthStream } from './support/synth-terminals';

export type Kind = 'flv' | 'webrtc' | 'floor';

export interface WebrtcViewersOptions {
  streams: number;
  rounds: number;
  seconds: number;
  warmup: number;
  mbps: number;
  capture: string;
  /** terminals send G.711A too: FLV players take it as received, WebRTC viewers as PCMA */
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
  /** RSS with the streams live and no viewer yet */
  streamsRssMB: number;
  /** (RSS at the end of the window - streamsRss) / viewers, KiB */
  rssPerViewerKB: number;
  mbpsIn: number;
  /** bytes read by the viewers, per second, all of them (FLV: HTTP framing included; WebRTC: RTP packets after SRTP) */
  bytesOutPerSec: number;
  /** the gateway's own count of bytes (FLV) or RTP packets (WebRTC) it sent these viewers, per second; NaN for the floor */
  gatewayOutPerSec: number;
  /** viewers that read media in the window; those that read none, by name */
  viewersWithMedia: number;
  withoutMedia: string[];
  minViewerBytes: number;
  /** packets per viewer per second in the window (WebRTC: RTP packets; FLV: tags), all viewers' mean and the least */
  packetsPerViewerPerSec: { mean: number; min: number };
  /** video frames (WebRTC: RTP marker bits; FLV: video tags) per viewer in the window: the fewest and the median */
  videoPerViewer: { min: number; median: number; total: number };
  /** video frames read / sent by the terminals in the window (pooled) */
  deliveredFraction: number;
  /** WebRTC: RTP packets read by the viewers / sent by the gateway in the window (NaN otherwise) */
  rtpReceivedFraction: number;
  keyframesPerViewerMin: number;
  audioPerViewerMin: number;
  errors: string[];
  /** load process: its CPU % (all threads: libdatachannel's receiving side for WebRTC) and its event loop's p99 */
  loadCpuPct: number;
  generatorLoopP99Ms: number;
  othersCores: number;
  droppedFrames: number;
  /** seconds from the first viewer's connect to every viewer having video */
  setupSeconds: number;
  /** WebRTC viewers whose first answer libdatachannel refused and that connected on a second try (their first error) */
  retried: string[];
}

const MAX_SEND_BACKLOG = 1024 * 1024;
const OPEN_CONCURRENCY = 16;
const TICK_MS = 4;
const SCRAPE_SETTLE_MS = 1000;
/** streams live this long (past a GOP: each has its key frame cached) before the RSS taken as the streams' alone */
const STREAMS_SETTLE_MS = 3000;
const NAME: Record<Kind, string> = { flv: 'HTTP-FLV', webrtc: 'WebRTC', floor: 'floor' };
/** the ratio of CPU the issue allows WebRTC over FLV */
export const TARGET = 2;

export const USAGE = `usage: npm run bench -- webrtc-viewers [--streams N] [--rounds K] [--seconds S] [--warmup S] [--mbps X] [--audio]
                       [--no-floor] [--capture FILE] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
  --streams N     simulated terminals (one stream each), one viewer per stream (default 200)
  --rounds K      rounds of an HTTP-FLV run and a WebRTC run alternated, FLV first (default 3)
  --seconds S     measured window of each run (default 20); --warmup S: load before it (default 5)
  --mbps X        rate per terminal on the wire (default 1)
  --audio         terminals send G.711A speech too: FLV players take it as received, WebRTC viewers as PCMA
  --no-floor      no bare-relay floor run in each round (its CPU is the machine's speed at that moment)
  --profile       the gateway under node --cpu-prof in the FLV and WebRTC runs: top self-time functions after each
  --no-pin        by default the gateway runs on core 0 and this process (viewers' libdatachannel threads too) on core 1
  --keep-dir, --node-opt OPT, --capture FILE: as ingest-flv's`;

export function parseArgs(args: string[]): WebrtcViewersOptions {
  const o: WebrtcViewersOptions = {
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

export async function runOptions(o: WebrtcViewersOptions): Promise<RunResult[][]> {
  const audio = o.audio ? { pcm: speechPcm(fixturePath('g726/in_32.g726')), frameMs: 20 } : undefined;
  const stream = synthesise(o.capture, o.mbps, 950, audio);
  const pin = canPin(o.pin, 'webrtc-viewers', ' (CPU % is then less exact)');
  console.log(
    `webrtc-viewers: ${o.streams} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s (${path.basename(o.capture)}, ${f1(stream.framesPerSecond)} frames/s` +
      `${o.audio ? ', G.711A speech as received' : ', video only'}), one viewer each; ${o.rounds} round(s) of HTTP-FLV, WebRTC` +
      `${o.floor ? ', floor' : ''}; warm-up ${o.warmup} s, measured ${o.seconds} s; gateway ${pin ? 'on core 0, this process on core 1' : 'unpinned'}`,
  );
  const runs = {
    flv: () => runOnce(o, stream, 'flv', pin),
    webrtc: () => runOnce(o, stream, 'webrtc', pin),
    ...(o.floor ? { floor: () => runOnce(o, stream, 'floor', pin) } : {}),
  };
  const rounds = await alternate(o.rounds, runs as Record<Kind, () => Promise<RunResult>>);
  summarise(o, rounds);
  return rounds.map((r) => Object.values(r));
}

/** WebRTC over FLV, per round and pooled (sums over the rounds), of a figure of both runs */
export function ratios(rounds: ReadonlyArray<Record<'flv' | 'webrtc', RunResult>>, f: (r: RunResult) => number): { per: number[]; pooled: number } {
  return {
    per: rounds.map((r) => f(r.webrtc) / f(r.flv)),
    pooled: total(rounds, (r) => f(r.webrtc)) / total(rounds, (r) => f(r.flv)),
  };
}

function summarise(o: WebrtcViewersOptions, rounds: Array<Record<Kind, RunResult>>): void {
  console.log(`\nwebrtc-viewers: WebRTC vs HTTP-FLV viewers, ${o.streams} streams, ${rounds.length} round(s) alternated (FLV first), ${o.seconds} s windows:`);
  for (const [k, r] of rounds.entries()) {
    console.log(
      `  round ${k + 1}: FLV ${f1(r.flv.cpuPct)} %, WebRTC ${f1(r.webrtc.cpuPct)} % (main thread ${f1(r.webrtc.mainPct)}) -> WebRTC/FLV ${f2(r.webrtc.cpuPct / r.flv.cpuPct)}; ` +
        `RSS ${f1(r.flv.rssMB)} / ${f1(r.webrtc.rssMB)} MB, per viewer ${f1(r.flv.rssPerViewerKB)} / ${f1(r.webrtc.rssPerViewerKB)} KiB; ` +
        `RTP packets a viewer ${f1(r.webrtc.packetsPerViewerPerSec.mean)}/s; without media ${r.flv.streams - r.flv.viewersWithMedia} / ${r.webrtc.streams - r.webrtc.viewersWithMedia}` +
        (r.floor ? `; floor ${f1(r.floor.cpuPct)} %` : '') +
        othersNote(r.flv, r.webrtc),
    );
  }
  const cpu = ratios(rounds, (r) => r.cpuPct);
  console.log(
    `  pooled gateway CPU WebRTC/FLV: ${f2(cpu.pooled)} (rounds ${f2(Math.min(...cpu.per))}-${f2(Math.max(...cpu.per))}; target ${TARGET} or less): ${cpu.pooled <= TARGET ? 'ok' : 'MISSED'}`,
  );
  const sum = (f: (r: Record<Kind, RunResult>) => number) => total(rounds, f);
  const n = rounds.length;
  console.log(
    `  per viewer: FLV ${f2(sum((r) => r.flv.cpuPct) / n / o.streams)} %, WebRTC ${f2(sum((r) => r.webrtc.cpuPct) / n / o.streams)} % of a core; ` +
      `main thread WebRTC/FLV ${f2(ratios(rounds, (r) => r.mainPct).pooled)}; ` +
      `RSS per viewer FLV ${f1(sum((r) => r.flv.rssPerViewerKB) / n)} KiB, WebRTC ${f1(sum((r) => r.webrtc.rssPerViewerKB) / n)} KiB ` +
      `((WebRTC RSS - FLV RSS) / viewers: ${f1((sum((r) => r.webrtc.rssMB - r.flv.rssMB) / n / o.streams) * 1024)} KiB)`,
  );
  const bps = (k: 'flv' | 'webrtc') => sum((r) => r[k].bytesOutPerSec) / n;
  console.log(
    `  read by the viewers: FLV ${f1(bps('flv') / 1e6)} MB/s (${f1(bps('flv') / o.streams / 1e3)} kB/s a viewer), ` +
      `WebRTC ${f1(bps('webrtc') / 1e6)} MB/s (${f1(bps('webrtc') / o.streams / 1e3)} kB/s a viewer, ${f1(sum((r) => r.webrtc.packetsPerViewerPerSec.mean) / n)} RTP packets/s): ` +
      `WebRTC/FLV bytes ${f2(bps('webrtc') / bps('flv'))}`,
  );
  const media = rounds.every(
    (r) => r.flv.viewersWithMedia === o.streams && r.webrtc.viewersWithMedia === o.streams && r.flv.errors.length + r.webrtc.errors.length === 0,
  );
  console.log(`  every viewer of every run got media, without an error: ${media ? 'yes' : 'NO (see the runs above)'}`);
  if (rounds[0].floor) {
    const fl = rounds.map((r) => r.floor.cpuPct);
    console.log(
      `  machine speed: the floor took ${fl.map(f1).join(' / ')} % of a core on this load (FLV/floor ${f2(sum((r) => r.flv.cpuPct) / sum((r) => r.floor.cpuPct))})`,
    );
  }
}

/** a UDP port free now on loopback (for the site's webrtc udpPort) */
async function freeUdpPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
  const port = s.address().port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function runOnce(o: WebrtcViewersOptions, stream: SynthStream, kind: Kind, pin: boolean): Promise<RunResult> {
  const budgetMs = BOOT_TIMEOUT_MS + 90_000 + o.streams * 300 + (o.warmup + o.seconds) * 1000 + STREAMS_SETTLE_MS + 60_000;
  const run = runDeadline(budgetMs);
  const deadline = run.signal;
  const dir = scratchDir(`bench-webrtc-viewers-${kind}`);
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
    // the same site for both kinds of viewer: only who plays differs
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0, schemes: ['http'], ...(o.audio ? { audio: 'as-received', audioCodecs: ['aac', 'g711a', 'g711u'] } : {}) } },
      { name: 'webrtc', config: { udpPort: await freeUdpPort(), host: '127.0.0.1', publicHost: '127.0.0.1' } },
    ],
  });
  const gw = startGateway({ siteFile, dir, pin, profileDir, nodeOpts: o.nodeOpts, main: kind === 'floor' ? FLOOR_MAIN : undefined });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  const flv: BenchPlayer[] = [];
  const rtc: WebrtcBenchViewer[] = [];
  let ticker: NodeJS.Timeout | undefined;
  let stopSpinning: (() => void) | undefined;
  let result: RunResult | undefined;
  try {
    await waitHealthy(gw, api, deadline);
    if (pin && !pinSelf(1)) console.warn('webrtc-viewers: could not pin this process to core 1');
    const idleRss = gatewayRss(gw.pid);
    ticker = setInterval(() => {
      const now = performance.now();
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    stopSpinning = keepAwake();

    // --- open and push (as ingest-flv: each terminal at its own GOP phase, from a different I frame); no viewer yet
    const phases = new StartPhases(stream, o.streams, performance.now());
    const sims = Array.from({ length: o.streams }, (_x, i) => String(13900000000 + i));
    const urls: URL[] = new Array<URL>(o.streams);
    const termOf: SynthTerminal[] = new Array<SynthTerminal>(o.streams);
    await pool(
      sims,
      OPEN_CONCURRENCY,
      0,
      async (sim, i) => {
        const r = await api.openLive(sim, Math.floor(i / REQUESTS_PER_APP), kind === 'webrtc' ? { fmt: 0, scheme: 'webrtc' } : undefined);
        if (kind === 'webrtc' && !/\/webrtc\/[^/]+\/whep$/.test(r.url.pathname)) throw new Error(`open ${sim}: ${r.playUrl} is no WHEP URL`);
        urls[i] = r.url;
        const sock = await connectTcp(r.port, deadline);
        sock.on('error', () => undefined);
        sock.on('data', () => undefined);
        const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
        const first = stream.keyframes[(i * 7) % stream.keyframes.length];
        term.start(phases.at(i, performance.now()), first);
        terminals.push(term);
        termOf[i] = term;
      },
      deadline,
    );
    // every terminal has started (each waits up to a GOP for its phase) and every stream holds a GOP: the streams' RSS
    await sleep(phases.gopMs + STREAMS_SETTLE_MS, undefined, { signal: deadline });
    const streamsRss = gatewayRss(gw.pid);

    // --- the viewers
    const setupStart = performance.now();
    await pool(
      sims,
      OPEN_CONCURRENCY,
      0,
      async (sim, i) => {
        if (kind === 'webrtc') {
          const v = new WebrtcBenchViewer(sim);
          rtc[i] = v;
          // a viewer that cannot connect is one without media, named in the report: the others still count
          await v.connect(urls[i], deadline).catch((err: unknown) => {
            if (deadline.aborted) throw err;
            v.error ??= (err as Error).message;
            console.warn(`webrtc-viewers: viewer ${sim} failed: ${v.error}`);
          });
        } else {
          const p = new BenchPlayer(termOf[i], {});
          flv[i] = p;
          await p.connect(urls[i], deadline);
        }
      },
      deadline,
    );
    // every viewer has video before the warm-up counts
    const waitMs = 30_000 + o.streams * 50;
    const readyBy = performance.now() + waitMs;
    const waiting = () =>
      kind === 'webrtc'
        ? rtc.filter((v) => v.count.videoFrames === 0 && v.error === undefined && !v.closed).length
        : flv.filter((p) => p.counter.videoTags === 0 && !p.closed).length;
    while (waiting() > 0 && performance.now() < readyBy) await sleep(100, undefined, { signal: deadline });
    const setupSeconds = (performance.now() - setupStart) / 1000;
    if (waiting() > 0) console.warn(`webrtc-viewers: ${waiting()} ${NAME[kind]} viewers still without video after ${f1(waitMs / 1000)} s`);

    await sleep(o.warmup * 1000, undefined, { signal: deadline });
    checkDeadline(deadline);
    if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

    // --- the window (from a second after the scrape that opens it, as ingest-flv)
    const packetsRead = () => (kind === 'webrtc' ? rtc.reduce((n, v) => n + v.count.packets, 0) : 0);
    const { metrics: m0, at: m0At } = await api.timedMetrics();
    const scraped0 = packetsRead();
    await sleep(SCRAPE_SETTLE_MS, undefined, { signal: deadline });
    const viewerBytes = () => (kind === 'webrtc' ? rtc.map((v) => v.count.bytes) : flv.map((p) => p.counter.bytes));
    const viewerPackets = () => (kind === 'webrtc' ? rtc.map((v) => v.count.packets) : flv.map((p) => p.counter.tags));
    const snap = () => ({
      at: performance.now(),
      threads: gatewayCpu(gw.pid),
      self: process.cpuUsage(),
      cores: coreTimes(),
      bytes: viewerBytes(),
      packets: viewerPackets(),
      sent: terminals.reduce((s, t) => s + t.sentCount, 0),
      bytesIn: terminals.reduce((s, t) => s + t.bytes, 0),
      dropped: terminals.reduce((s, t) => s + t.dropped, 0),
    });
    const measuring = (on: boolean) => {
      for (const p of flv) p.measuring = on;
      for (const v of rtc) v.measuring = on;
    };
    measuring(true);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const s0 = snap();
    const { lastRss, peakRss } = await watchWindow(gw, s0.at + o.seconds * 1000, deadline);
    const s1 = snap();
    loop.disable();
    measuring(false);
    const { metrics: m1, at: m1At } = await api.timedMetrics();
    const scraped1 = packetsRead();
    const secs = (s1.at - s0.at) / 1000;
    const scrapeSecs = (m1At - m0At) / 1000;
    const gwCpu = s1.threads.total - s0.threads.total;
    const self = (s1.self.user - s0.self.user + s1.self.system - s0.self.system) / 1e6;
    const busy = s1.cores.reduce((n, c, i) => n + c.busy - c.irq - ((s0.cores[i]?.busy ?? 0) - (s0.cores[i]?.irq ?? 0)), 0);
    const got = s1.bytes.map((b, i) => b - s0.bytes[i]);
    const packets = s1.packets.map((p, i) => p - s0.packets[i]);
    const video = kind === 'webrtc' ? rtc.map((v) => v.count.videoFramesInWindow) : flv.map((p) => p.videoInWindow);
    const sortedVideo = [...video].sort((a, b) => a - b);
    const withMedia = got.map((b, i) => b > 0 && video[i] > 0);
    const gwOut = kind === 'webrtc' ? sumDelta(m1, m0, 'gw_webrtc_packets_total') : kind === 'flv' ? sumDelta(m1, m0, 'gw_flv_out_bytes_out') : Number.NaN;
    const rtpRead = packets.reduce((a, b) => a + b, 0);
    result = {
      kind,
      streams: o.streams,
      seconds: secs,
      cpuPct: (100 * gwCpu) / secs,
      mainPct: (100 * (s1.threads.main - s0.threads.main)) / secs,
      rssMB: mb(lastRss),
      peakRssMB: mb(peakRss),
      idleRssMB: mb(idleRss),
      streamsRssMB: mb(streamsRss),
      rssPerViewerKB: (lastRss - streamsRss) / 1024 / o.streams,
      mbpsIn: ((s1.bytesIn - s0.bytesIn) * 8) / secs / 1e6,
      bytesOutPerSec: got.reduce((a, b) => a + b, 0) / secs,
      gatewayOutPerSec: gwOut / scrapeSecs,
      viewersWithMedia: withMedia.filter(Boolean).length,
      withoutMedia: sims.filter((_s, i) => !withMedia[i]),
      minViewerBytes: Math.min(...got),
      packetsPerViewerPerSec: { mean: rtpRead / o.streams / secs, min: Math.min(...packets) / secs },
      videoPerViewer: { min: sortedVideo[0] ?? 0, median: sortedVideo[sortedVideo.length >> 1] ?? 0, total: video.reduce((a, b) => a + b, 0) },
      deliveredFraction: video.reduce((a, b) => a + b, 0) / Math.max(1, s1.sent - s0.sent),
      // between the two scrapes (read here as each answered): what the viewers read of what the gateway sent
      rtpReceivedFraction: kind === 'webrtc' ? (scraped1 - scraped0) / gwOut : Number.NaN,
      keyframesPerViewerMin: kind === 'webrtc' ? Math.min(...rtc.map((v) => v.count.keyframes)) : Number.NaN,
      audioPerViewerMin: Math.min(...(kind === 'webrtc' ? rtc.map((v) => v.count.audioPacketsInWindow) : flv.map((p) => p.audioInWindow))),
      errors:
        kind === 'webrtc'
          ? rtc.flatMap((v) => (v.error !== undefined ? [`${v.name}: ${v.error}`] : v.closed ? [`${v.name}: ${v.state}`] : []))
          : flv.flatMap((p) => (p.counter.error !== undefined ? [p.counter.error] : p.closed ? ['closed'] : [])),
      loadCpuPct: (100 * self) / secs,
      generatorLoopP99Ms: loop.percentile(99) / 1e6,
      othersCores: Math.max(0, (busy - gwCpu - self) / secs),
      droppedFrames: s1.dropped - s0.dropped,
      setupSeconds,
      retried: rtc.flatMap((v) => (v.retried !== undefined ? [`${v.name}: ${v.retried}`] : [])),
    };
    printRun(result, o, kind === 'floor' ? undefined : sumOf(m1, kind === 'webrtc' ? 'gw_webrtc_sessions' : 'gw_flv_out_players'));
    if (kind === 'webrtc' && rtc.some((v) => v.count.strange > 0))
      console.warn(`webrtc-viewers: ${rtc.reduce((n, v) => n + v.count.strange, 0)} packets of a payload type not offered (or not RTP)`);
  } catch (err) {
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    stopSpinning?.();
    for (const p of flv) p?.socket?.destroy();
    for (const v of rtc) v?.close();
    // libdatachannel's threads and callbacks go with its last peer connection only when told
    if (rtc.length > 0) ndc.cleanup();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    run.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) printRunProfiles(profileDir, 'webrtc-viewers', `main thread, ${NAME[kind]} run`);
  if (!result) throw new Error('no result'); // unreachable: every path without one throws above
  return result;
}

function printRun(r: RunResult, o: WebrtcViewersOptions, gwViewers: number | undefined): void {
  const n = r.streams;
  const unit = r.kind === 'webrtc' ? 'RTP packets' : 'FLV tags';
  const lines = [
    `  ${NAME[r.kind].padEnd(8)} gateway ${f1(r.cpuPct)} % of a core (main thread ${f1(r.mainPct)}, other threads ${f1(r.cpuPct - r.mainPct)}), ` +
      `RSS ${f1(r.rssMB)} MB (peak ${f1(r.peakRssMB)}, idle ${f1(r.idleRssMB)}, streams without viewers ${f1(r.streamsRssMB)}: ${f1(r.rssPerViewerKB)} KiB a viewer); ` +
      `in ${f1(r.mbpsIn)} Mbit/s, viewers read ${f1(r.bytesOutPerSec / 1e6)} MB/s (${f1(r.bytesOutPerSec / n / 1e3)} kB/s each, least ${f1(r.minViewerBytes / r.seconds / 1e3)})` +
      (r.kind === 'flv' ? `, gateway says ${f1(r.gatewayOutPerSec / 1e6)} MB/s` : ''),
    `           ${r.viewersWithMedia}/${n} viewers with media${gwViewers !== undefined ? ` (gateway counts ${gwViewers})` : ''}, ` +
      `${unit} a viewer ${f1(r.packetsPerViewerPerSec.mean)}/s (least ${f1(r.packetsPerViewerPerSec.min)}), ` +
      `video frames a viewer ${r.videoPerViewer.min}-${r.videoPerViewer.median} (min-median; ${f1(100 * r.deliveredFraction)} % of those sent)` +
      (r.kind === 'webrtc' ? `, key frames at least ${r.keyframesPerViewerMin}; RTP read / sent by the gateway ${f1(100 * r.rtpReceivedFraction)} %` : '') +
      (o.audio ? `, audio ${r.kind === 'webrtc' ? 'packets' : 'frames'} at least ${r.audioPerViewerMin}` : ''),
    `           all viewers had video ${f1(r.setupSeconds)} s after the first connected; load process ${f1(r.loadCpuPct)} % (event loop p99 ${f1(r.generatorLoopP99Ms)} ms), ` +
      `others ${f2(r.othersCores)} cores` +
      (r.droppedFrames > 0 ? `, ${r.droppedFrames} frames DROPPED at the terminals` : ''),
  ];
  if (r.retried.length > 0)
    lines.push(`           ${r.retried.length} viewers connected on a second try (libdatachannel refused the first answer), e.g. ${r.retried[0]}`);
  if (r.errors.length > 0) lines.push(`           ${r.errors.length} viewer ERRORS, e.g. ${[...new Set(r.errors)].slice(0, 3).join('; ')}`);
  if (r.withoutMedia.length > 0)
    lines.push(
      `           ${r.withoutMedia.length} viewers got NO media in the window: ${r.withoutMedia.slice(0, 10).join(', ')}${r.withoutMedia.length > 10 ? ', ...' : ''}`,
    );
  console.log(lines.join('\n'));
}
