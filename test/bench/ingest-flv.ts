/**
 * Ingest to HTTP-FLV under load: N simulated terminals pushing JT/T 1078 over TCP at about X Mbit/s each, one
 * HTTP-FLV player per terminal, all on loopback. The gateway runs as its own process pinned to core 0; the
 * terminals and players run here, pinned to core 1. After a warm-up, a measured window reports throughput in and
 * out, the gateway's CPU (/proc utime+stime, and per thread: main, AAC worker, the rest) and RSS (VmRSS), and the
 * latency the gateway adds (frame read to FLV tag written, from its /metrics), plus an end-to-end latency seen by
 * the players. With --audio the terminals also send G.711A speech and the site runs audio-aac, so every player
 * takes AAC (flv-out's default) made by the AAC stage.
 * Target (500 terminals): <80 % of a core, p99 <50 ms, RSS <500 MB; with audio, main thread within 10 % of video only.
 *
 *   node dist/test/bench/run.js ingest-flv [--terminals N] [--seconds S] [--mbps X] [--capture FILE]
 *        [--audio] [--audio-frame-ms MS] [--aac|--no-aac]
 *        [--ramp] [--ramp-seconds S] [--warmup S] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
 */
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixturePath, scratchDir } from '../support/paths';
import { keepAwake } from './support/keep-awake';
import { BenchPlayer } from './support/bench-player';
import { PlayerChurn, warmUpWithLateJoin } from './support/late-joiner';
import {
  Api,
  Reservoir,
  benchApplications,
  checkDeadline,
  connectTcp,
  connectUdp,
  f1,
  f2,
  mb,
  pinSelf,
  pool,
  runDeadline,
  freePort,
  startGateway,
  BOOT_TIMEOUT_MS,
  stopGateway,
  tail,
  gatewayCpu,
  gatewaySyscalls,
  gatewayRss,
  waitHealthy,
  REQUESTS_PER_APP,
  canPin,
  writeSite,
  profileDirFor,
  endScratch,
  printRunProfiles,
  FLOOR_MAIN,
} from './support/gateway-harness';
import { bucketsDelta, bucketsOf, coreTimes, histogramQuantile, quantile, sumDelta, sumOf, type Buckets } from './support/process-probe';
import { StartPhases } from './support/start-phases';
import { SynthTerminal, UdpTerminalLink, speechPcm, synthesise, type SynthStream, type TerminalLink } from './support/synth-terminals';
import { TARGET, chunkFigures, gcFigures, readFigures, report } from './support/ingest-flv-report';
import { LateEpisodes } from './support/late-episodes';
import { watchOwnGc } from './support/own-gc';
import { vsFloor, vsFlv, vsVideo, vsWorkers } from './support/ingest-flv-compare';
import { HlsReaderFleet } from './support/bench-hls-reader';
import { RtspReaderFleet } from './support/bench-rtsp-reader';
import { LinkCensus, censusWarning, logWarnings } from './support/link-census';
import type { IngestFlvOptions, IngestFlvResult, ReaderFleet, ReaderKind } from './support/ingest-flv-types';
import { parseArgs } from './support/ingest-flv-args';

export type { IngestFlvOptions, IngestFlvResult, ReaderFigures, ReaderFleet, ReaderKind } from './support/ingest-flv-types';
export { parseArgs, USAGE } from './support/ingest-flv-args';

function makeFleet(kind: ReaderKind): ReaderFleet | undefined {
  return kind === 'hls' ? new HlsReaderFleet() : kind === 'rtsp' ? new RtspReaderFleet() : undefined;
}

/** issue 16: 1,000 terminals x 1 Mbit/s, one player each, on one core */
const LATENCY_METRIC = 'gw_flv_out_added_latency_seconds';
/** a terminal socket holding this much unsent data means the gateway is not keeping up: frames are dropped */
const MAX_SEND_BACKLOG = 1024 * 1024;
const OPEN_CONCURRENCY = 16;
const TICK_MS = 4;
/** after the scrape that opens the window, before it starts (see its use) */
const SCRAPE_SETTLE_MS = 1000;
/** ffmpeg's AAC encoder needs 3 x 1024 samples past a frame's start; audio-aac's default output is 8 kHz */
const AAC_LOOKAHEAD_MS = 384;

// ------------------------------------------------------------------------------------------------------------

export async function run(args: string[]): Promise<IngestFlvResult> {
  return runOptions(parseArgs(args));
}

/** runs parsed options (ingest-hls and rtsp set `readers` and `vsFlv` on top of this bench's arguments) */
export async function runOptions(o: IngestFlvOptions): Promise<IngestFlvResult> {
  const audio = o.audio ? { pcm: speechPcm(fixturePath('g726/in_32.g726')), frameMs: o.audioFrameMs } : undefined;
  const stream = synthesise(o.capture, o.mbps, 950, audio);
  if (o.vsWorkers > 0) return vsWorkers(o, stream, runWith);
  if (o.vsVideo > 0) return vsVideo(o, stream, runWith);
  if (o.vsFlv > 0) return vsFlv(o, stream, runWith);
  if (o.vsFloor > 0) return vsFloor(o, stream, runWith);
  return runWith(o, stream);
}

async function runWith(o: IngestFlvOptions, stream: SynthStream): Promise<IngestFlvResult> {
  const rampS = o.ramp ? o.rampSeconds : 0;
  // every phase has a bound; past the whole budget everything is torn down
  const budgetMs = BOOT_TIMEOUT_MS + 60_000 + o.terminals * 200 + (rampS + o.warmup + o.seconds) * 1000 + 60_000;
  const run = runDeadline(budgetMs);
  const deadline = run.signal;
  const dir = scratchDir('bench-ingest-flv');
  const profileDir = profileDirFor(o.profile);
  const pin = canPin(o.pin, 'ingest-flv', ' (CPU % is then less exact)');

  const httpPort = await freePort();
  const fleet = o.floor ? undefined : makeFleet(o.readers);
  const site = {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      applications: benchApplications(o.terminals),
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: o.udp } },
      // flv-out at its defaults: audio 'aac', so with audio-aac on the site players read through the AAC stage
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
      ...(o.aac ? [{ name: 'audio-aac', config: {} }] : []),
      ...(fleet ? [fleet.plugin] : []),
    ],
  };
  const siteFile = writeSite(dir, site);

  console.log(
    `ingest-flv: ${o.terminals} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s (${path.basename(o.capture)}: ` +
      `${f2((stream.captureBytesPerSecond * 8) / 1e6)} Mbit/s of frames, video padded x${f2(stream.padFactor)}; ` +
      `${f1(stream.framesPerSecond)} frames/s, ${f1(stream.packetsPerSecond)} packets/s each), one ${fleet?.what ?? 'HTTP-FLV player'} each; ` +
      `${o.ramp ? `ramp ${rampS} s, ` : ''}warm-up ${o.warmup} s, measured ${o.seconds} s`,
  );
  const audioKbps = (stream.audioPayloadBytesPerSecond * 8) / 1000;
  if (stream.audio !== 'none') {
    console.log(
      `  audio: ${stream.audio === 'synthetic' ? `G.711A 8 kHz speech added, ${o.audioFrameMs} ms frames` : "the capture's own"} ` +
        `(${f1(stream.audioFramesPerSecond)} frames/s, ${f1(audioKbps)} kbit/s of payload per terminal); ` +
        `site ${o.aac ? 'runs audio-aac: players take AAC' : 'has no audio-aac: players get video only (flv-out leaves G.711 out)'}`,
    );
  } else if (o.aac) {
    console.log('  no audio in the stream; the site runs audio-aac, so players still read through the AAC stage (video passes by reference)');
  }
  if (stream.padFactor === 1 && (stream.bytesPerSecond * 8) / 1e6 > o.mbps * 1.05) {
    console.warn(`ingest-flv: the capture alone runs above ${o.mbps} Mbit/s; it is sent unpadded`);
  }

  const gw = startGateway({ siteFile, dir, pin, profileDir, nodeOpts: o.nodeOpts, main: o.floor ? FLOOR_MAIN : undefined, workers: o.floor ? 1 : o.workers });
  if (o.workers > 1 && !o.floor)
    console.log(`  the gateway runs ${o.workers} worker processes${pin ? ', all on core 0 with the primary' : ''}: CPU and RSS below add up every process`);
  if (o.floor) console.log('  the FLOOR runs instead of the gateway: a bare relay (packets to FLV tags, nothing else); gateway metrics below read 0');
  const killGateway = () => gw.child.kill('SIGKILL'); // last resort if this process exits mid-run
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  const players: BenchPlayer[] = [];
  const e2e = new Reservoir();
  const late = new LateEpisodes(TARGET.e2eP99Ms);
  const audioLat = new Reservoir();
  let ticker: NodeJS.Timeout | undefined;
  let stopSpinning: (() => void) | undefined;
  let keeper: NodeJS.Timeout | undefined;
  let churn: PlayerChurn | undefined;
  let result: IngestFlvResult | undefined;
  try {
    // --- boot
    await waitHealthy(gw, api, deadline);
    if (pin && !pinSelf(1)) console.warn('ingest-flv: could not pin this process to core 1');
    const idleRss = gatewayRss(gw.pid);
    console.log(
      `  gateway pid ${gw.pid}${pin ? ' on core 0, load generator and players on core 1' : ' (unpinned)'}${o.busyClient ? ' (spinning, so no write wakes it)' : ' (sleeping between events: --idle-client)'}; idle RSS ${f1(mb(idleRss))} MB`,
    );

    // --- one timer paces every terminal
    let lateTicks = 0;
    let lastTick = performance.now();
    ticker = setInterval(() => {
      const now = performance.now();
      if (now - lastTick > 50) lateTicks++;
      lastTick = now;
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    if (o.busyClient) stopSpinning = keepAwake();

    // --- open, connect, play
    const reqIds: string[][] = [];
    const urls: string[] = [];
    const opened = performance.now();
    const census = new LinkCensus(opened);
    const phases = new StartPhases(stream, o.terminals, opened);
    const sims = Array.from({ length: o.terminals }, (_x, i) => String(13900000000 + i));
    await pool(
      sims,
      OPEN_CONCURRENCY,
      rampS > 0 ? (rampS * 1000) / o.terminals : 0,
      async (sim, i) => {
        const app = Math.floor(i / REQUESTS_PER_APP);
        const r = await api.openLive(sim, app, fleet?.openFields);
        if (!fleet) urls[i] = r.url.href;
        (reqIds[app] ??= []).push(r.reqId);
        let link: TerminalLink;
        if (o.udp) link = new UdpTerminalLink(await connectUdp(r.port));
        else {
          const sock = await connectTcp(r.port, deadline);
          census.watch(sock);
          sock.on('error', () => undefined);
          sock.on('data', () => undefined); // the gateway sends nothing on this link; drain whatever it does send
          link = sock;
        }
        const term = new SynthTerminal(sim, link, stream, MAX_SEND_BACKLOG);
        // each at its own phase of the GOP and of the frame interval (start-phases.ts), and from a different I frame,
        // so the sum of their rates follows the capture's average
        const first = stream.keyframes[(i * 7) % stream.keyframes.length];
        term.start(phases.at(i, performance.now()), first);
        terminals.push(term);
        if (fleet) return fleet.add(term, r.url, stream, first);
        const player = new BenchPlayer(term, { video: late.sink(e2e, i), audio: (ms) => audioLat.add(ms) }, AAC_LOOKAHEAD_MS, o.audioFrameMs);
        players.push(player);
        await player.connect(r.url, deadline);
      },
      deadline,
    );
    if (fleet) await fleet.ready(deadline, 60_000 + o.terminals * 100);
    census.opened();
    console.log(`  ${o.terminals} opened, pushing and playing in ${f1((performance.now() - opened) / 1000)} s`);

    // keep the requests alive however long the run is (keepIntv 600)
    const keepAll = () => api.keep(reqIds);
    await keepAll();
    keeper = setInterval(() => {
      keepAll().catch((err) => console.warn(`ingest-flv: keep failed: ${(err as Error).message}`));
    }, 300_000);

    // --- warm-up, with a player that joins a stream mid-GOP and leaves
    churn = o.churnSeconds > 0 && urls.length > 0 ? new PlayerChurn(urls, o.churnSeconds * 1000) : undefined;
    await warmUpWithLateJoin(urls[0], o.warmup * 1000, deadline);
    checkDeadline(deadline);
    if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

    // --- measured window
    // (the scrape also resets the gateway's event-loop delay window)
    const { metrics: m0, at: m0At, ms: scrapeMs } = await api.timedMetrics();
    // A scrape is work for both processes (the gateway makes it in 2 ms turns; this one reads a series per stream for
    // ten gauges on its busy core), and frames delayed meanwhile would reach the players inside the window: the steady
    // state is measured from a second on, and the scrape's own time is printed apart.
    await sleep(SCRAPE_SETTLE_MS, undefined, { signal: deadline });
    const snap = () => ({
      at: performance.now(),
      threads: gatewayCpu(gw.pid),
      calls: gatewaySyscalls(gw.pid),
      self: process.cpuUsage(),
      cores: coreTimes(),
      bytesIn: terminals.reduce((s, t) => s + t.bytes, 0),
      bytesOut: players.reduce((s, p) => s + p.counter.bytes, 0) + (fleet?.bytesRead() ?? 0),
      dropped: terminals.reduce((s, t) => s + t.dropped, 0),
    });
    for (const p of players) {
      p.measuring = true;
      p.unmatched = 0;
    }
    e2e.reset();
    late.reset();
    audioLat.reset();
    fleet?.startWindow();
    const ownLoop = monitorEventLoopDelay({ resolution: 10 });
    ownLoop.enable();
    const stopGcWatch = watchOwnGc();
    const s0 = snap();
    let peakRss = 0;
    const rssSamples: number[] = [];
    const windowEnd = s0.at + o.seconds * 1000;
    while (performance.now() < windowEnd) {
      await sleep(Math.min(1000, Math.max(1, windowEnd - performance.now())), undefined, { signal: deadline });
      if (gw.child.exitCode !== null) throw new Error(`gateway exited during the window (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
      const r = gatewayRss(gw.pid);
      rssSamples.push(r);
      if (r > peakRss) peakRss = r;
    }
    const s1 = snap();
    if (churn) console.log(churn.stop());
    ownLoop.disable();
    const ownGc = stopGcWatch();
    for (const p of players) p.measuring = false;
    fleet?.endWindow();
    const { metrics: m1, at: m1At } = await api.timedMetrics();
    const secs = (s1.at - s0.at) / 1000;
    // the gateway's own counters span scrape to scrape (from a second before the window to just after it): their
    // rates are over that span
    const gwSecs = (m1At - m0At) / 1000;

    const lat = bucketsDelta(bucketsOf(m1, LATENCY_METRIC) ?? { le: [Infinity], counts: [0] }, bucketsOf(m0, LATENCY_METRIC) as Buckets | undefined);
    const gwIn = sumDelta(m1, m0, 'gw_jt1078_ingest_bytes_total');
    const outMetric = fleet ? fleet.bytesOutMetric : 'gw_flv_out_bytes_out';
    const gwOut = outMetric ? sumDelta(m1, m0, outMetric) : NaN;
    const figures = fleet?.figures(secs);
    const selfCpu = (s1.self.user - s0.self.user + s1.self.system - s0.self.system) / 1e6;
    const e2eVals = e2e.values();
    const machineBusy = s1.cores.reduce((sum, c, i) => sum + c.busy - (s0.cores[i]?.busy ?? 0), 0);
    const machineIrq = s1.cores.reduce((sum, c, i) => sum + c.irq - (s0.cores[i]?.irq ?? 0), 0);
    const core0 = s1.cores[0] && s0.cores[0] ? (s1.cores[0].busy - s0.cores[0].busy) / Math.max(1e-9, s1.cores[0].total - s0.cores[0].total) : NaN;
    result = {
      terminals: o.terminals,
      playersConnected: figures ? figures.connected : players.filter((p) => !p.closed && p.counter.error === undefined).length,
      stalledPlayers: figures ? figures.stalled : players.filter((p) => p.videoInWindow === 0).length,
      seconds: secs,
      mbpsIn: ((s1.bytesIn - s0.bytesIn) * 8) / secs / 1e6,
      mbpsOut: ((s1.bytesOut - s0.bytesOut) * 8) / secs / 1e6,
      gatewayMbpsIn: (gwIn * 8) / gwSecs / 1e6,
      gatewayMbpsOut: (gwOut * 8) / gwSecs / 1e6,
      cpuPct: (100 * (s1.threads.total - s0.threads.total)) / secs,
      syscallsPerSecond: {
        reads: (s1.calls.reads - s0.calls.reads) / secs,
        writes: (s1.calls.writes - s0.calls.writes) / secs,
        wakeups: (s1.calls.wakeups - s0.calls.wakeups) / secs,
      },
      threadCpuPct: {
        main: (100 * (s1.threads.main - s0.threads.main)) / secs,
        worker: (100 * (s1.threads.workers - s0.threads.workers)) / secs,
        other:
          (100 * Math.max(0, s1.threads.total - s0.threads.total - (s1.threads.main - s0.threads.main) - (s1.threads.workers - s0.threads.workers))) / secs,
      },
      rssMB: mb(rssSamples[rssSamples.length - 1] ?? gatewayRss(gw.pid)),
      peakRssMB: mb(peakRss),
      idleRssMB: mb(idleRss),
      addedLatencyMs: { p50: histogramQuantile(lat, 0.5) * 1000, p99: histogramQuantile(lat, 0.99) * 1000, count: lat.counts[lat.counts.length - 1] ?? 0 },
      eventLoopDelayMs: {
        p50: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p50_seconds') * 1000,
        p99: sumOf(m1, 'gw_process_nodejs_eventloop_lag_p99_seconds') * 1000,
        max: sumOf(m1, 'gw_process_nodejs_eventloop_lag_max_seconds') * 1000,
      },
      endToEndMs: { p50: quantile(e2eVals, 0.5), p99: quantile(e2eVals, 0.99), count: e2e.seen },
      late: late.figures(o.terminals, gw.startedAt),
      generatorCpuPct: (100 * selfCpu) / secs,
      othersCores: Math.max(0, (machineBusy - machineIrq - (s1.threads.total - s0.threads.total) - selfCpu) / secs),
      irqCores: machineIrq / secs,
      core0BusyPct: 100 * core0,
      generatorLoopDelayMs: { p99: ownLoop.percentile(99) / 1e6, max: ownLoop.max / 1e6 },
      generatorGc: ownGc,
      metricsScrapeMs: scrapeMs,
      droppedFrames: s1.dropped - s0.dropped,
      audioFramesPerPlayerSecond: players.reduce((n, p) => n + p.audioInWindow, 0) / Math.max(1, players.length) / secs,
      silentPlayers: stream.audio === 'none' || fleet ? 0 : players.filter((p) => p.audioInWindow === 0).length,
      audioLatencyMs: { p50: quantile(audioLat.values(), 0.5), p99: quantile(audioLat.values(), 0.99), count: audioLat.seen },
      aac: { transcoders: sumOf(m1, 'gw_audio_aac_transcoders'), failures: sumDelta(m1, m0, 'gw_audio_aac_failures_total') },
      gc: gcFigures(m0, m1, secs),
      reads: readFigures(m0, m1),
      heapMB: mb(sumOf(m1, 'gw_process_nodejs_heap_size_used_bytes')),
      heapTotalMB: mb(sumOf(m1, 'gw_process_nodejs_heap_size_total_bytes')),
      newSpaceMB: mb(sumOf(m1, 'gw_process_nodejs_heap_space_size_total_bytes', { space: 'new' })),
      arrayBuffersMB: mb(sumOf(m1, 'gw_process_nodejs_external_memory_bytes')),
      busHeldMB: { gop: mb(sumOf(m1, 'gw_core_bus_held_bytes', { holder: 'gop' })), queue: mb(sumOf(m1, 'gw_core_bus_held_bytes', { holder: 'queue' })) },
      ...chunkFigures(m0, m1),
      readers: fleet ? o.readers : 'flv',
      readerFigures: figures,
      census: census.figures(o.terminals, o.floor ? undefined : sumOf(m1, 'gw_jt1078_ingest_links')),
    };
    const missing = censusWarning(result.census, logWarnings(tail(gw.logFile, 100_000)));
    const errors = players.map((p) => p.counter.error).filter((e): e is string => e !== undefined);
    report(
      result,
      m1,
      lateTicks,
      players.reduce((n, p) => n + p.unmatched, 0),
      errors,
      o,
      stream,
      fleet ? [...fleet.report(secs), ...(fleet.metricLines?.(m1, o.terminals) ?? [])] : undefined,
    );
    if (missing) console.warn(missing);
  } catch (err) {
    // an abort surfaces as a bare AbortError from whatever was waiting: say why instead
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    stopSpinning?.();
    if (keeper) clearInterval(keeper);
    churn?.stop();
    for (const p of players) p.socket?.destroy();
    fleet?.close();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    run.dispose();
    endScratch(dir, o.keepDir);
  }
  if (profileDir) {
    const main = printRunProfiles(profileDir, 'ingest-flv', 'main thread', true);
    if (main && result) result.profile = main;
  }
  if (!result) throw new Error('no result'); // unreachable: every path without one throws above
  return result;
}
