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
import { setTimeout as sleep } from 'node:timers/promises';
import * as ndc from 'node-datachannel';
import { total } from './support/alternate';
import { BenchPlayer } from './support/bench-player';
import { WebrtcBenchViewer } from './support/bench-webrtc-viewer';
import { REQUESTS_PER_APP, checkDeadline, f1, f2, gatewayRss, mb, pool, tail } from './support/gateway-harness';
import {
  gatewayRun,
  measureWindow,
  parseVsFlvArgs,
  ratios,
  runRounds,
  startTerminal,
  summariseVsFlv,
  type VsFlvBench,
  type VsFlvOptions,
  type WindowFigures,
} from './support/players-vs-flv';
import { sumDelta, sumOf } from './support/process-probe';
import { StartPhases } from './support/start-phases';
import type { SynthStream, SynthTerminal } from './support/synth-terminals';

export type Kind = 'flv' | 'webrtc' | 'floor';

/** `audio`: terminals send G.711A too: FLV players take it as received, WebRTC viewers as PCMA */
export type WebrtcViewersOptions = VsFlvOptions;

export interface RunResult extends WindowFigures {
  kind: Kind;
  streams: number;
  /** RSS with the streams live and no viewer yet */
  streamsRssMB: number;
  /** (RSS at the end of the window - streamsRss) / viewers, KiB */
  rssPerViewerKB: number;
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
  /** load process: its CPU % (all threads: libdatachannel's receiving side for WebRTC); its event loop's p99 is generatorLoopP99Ms */
  loadCpuPct: number;
  /** seconds from the first viewer's connect to every viewer having video */
  setupSeconds: number;
  /** WebRTC viewers whose first answer libdatachannel refused and that connected on a second try (their first error) */
  retried: string[];
}

const OPEN_CONCURRENCY = 16;
/** streams live this long (past a GOP: each has its key frame cached) before the RSS taken as the streams' alone */
const STREAMS_SETTLE_MS = 3000;
const NAME: Record<Kind, string> = { flv: 'HTTP-FLV', webrtc: 'WebRTC', floor: 'floor' };
/** the ratio of CPU the issue allows WebRTC over FLV */
export const TARGET = 2;
const BENCH: VsFlvBench<'webrtc'> = {
  bench: 'webrtc-viewers',
  alt: 'webrtc',
  altName: 'WebRTC',
  noun: 'viewer',
  audioNote: ', G.711A speech as received',
  target: TARGET,
};

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
  return parseVsFlvArgs(args, USAGE);
}

export async function run(args: string[]): Promise<RunResult[][]> {
  return runOptions(parseArgs(args));
}

export async function runOptions(o: WebrtcViewersOptions): Promise<RunResult[][]> {
  return runRounds(
    o,
    BENCH,
    (stream, kind, pin) => runOnce(o, stream, kind, pin),
    (rounds) => summarise(o, rounds),
  );
}

function summarise(o: WebrtcViewersOptions, rounds: Array<Record<Kind, RunResult>>): void {
  const sum = (f: (r: Record<Kind, RunResult>) => number) => total(rounds, f);
  const n = rounds.length;
  summariseVsFlv(o, BENCH, rounds, {
    round: (r) =>
      `FLV ${f1(r.flv.cpuPct)} %, WebRTC ${f1(r.webrtc.cpuPct)} % (main thread ${f1(r.webrtc.mainPct)}) -> WebRTC/FLV ${f2(r.webrtc.cpuPct / r.flv.cpuPct)}; ` +
      `RSS ${f1(r.flv.rssMB)} / ${f1(r.webrtc.rssMB)} MB, per viewer ${f1(r.flv.rssPerViewerKB)} / ${f1(r.webrtc.rssPerViewerKB)} KiB; ` +
      `RTP packets a viewer ${f1(r.webrtc.packetsPerViewerPerSec.mean)}/s; without media ${r.flv.streams - r.flv.viewersWithMedia} / ${r.webrtc.streams - r.webrtc.viewersWithMedia}`,
    detail:
      `  per viewer: FLV ${f2(sum((r) => r.flv.cpuPct) / n / o.streams)} %, WebRTC ${f2(sum((r) => r.webrtc.cpuPct) / n / o.streams)} % of a core; ` +
      `main thread WebRTC/FLV ${f2(ratios(rounds, 'webrtc', (r) => r.mainPct).pooled)}; ` +
      `RSS per viewer FLV ${f1(sum((r) => r.flv.rssPerViewerKB) / n)} KiB, WebRTC ${f1(sum((r) => r.webrtc.rssPerViewerKB) / n)} KiB ` +
      `((WebRTC RSS - FLV RSS) / viewers: ${f1((sum((r) => r.webrtc.rssMB - r.flv.rssMB) / n / o.streams) * 1024)} KiB)`,
    readNote: `, ${f1(sum((r) => r.webrtc.packetsPerViewerPerSec.mean) / n)} RTP packets/s`,
    withMedia: (r) => r.viewersWithMedia,
  });
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
  const flv: BenchPlayer[] = [];
  const rtc: WebrtcBenchViewer[] = [];
  const frame = {
    bench: BENCH.bench,
    kind,
    name: NAME[kind],
    pin,
    budgetMs: 90_000 + o.streams * 300 + (o.warmup + o.seconds) * 1000 + STREAMS_SETTLE_MS + 60_000,
    // the same site for both kinds of viewer: only who plays differs
    plugins: async () => [
      { name: 'flv-out', config: { port: 0, schemes: ['http'], ...(o.audio ? { audio: 'as-received', audioCodecs: ['aac', 'g711a', 'g711u'] } : {}) } },
      { name: 'webrtc', config: { udpPort: await freeUdpPort(), host: '127.0.0.1', publicHost: '127.0.0.1' } },
    ],
    close: () => {
      for (const p of flv) p?.socket?.destroy();
      for (const v of rtc) v?.close();
      // libdatachannel's threads and callbacks go with its last peer connection only when told
      if (rtc.length > 0) ndc.cleanup();
    },
  };
  return gatewayRun(o, frame, async (run) => {
    const { gw, api, deadline } = run;
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
        termOf[i] = await startTerminal(run, stream, phases, sim, i, r.port);
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

    const packetsRead = () => (kind === 'webrtc' ? rtc.reduce((n, v) => n + v.count.packets, 0) : 0);
    const w = await measureWindow(run, o.seconds, {
      snap: () => ({
        bytes: kind === 'webrtc' ? rtc.map((v) => v.count.bytes) : flv.map((p) => p.counter.bytes),
        packets: kind === 'webrtc' ? rtc.map((v) => v.count.packets) : flv.map((p) => p.counter.tags),
      }),
      measuring: (on) => {
        for (const p of flv) p.measuring = on;
        for (const v of rtc) v.measuring = on;
      },
      atScrape: packetsRead,
    });
    const secs = w.figures.seconds;
    const got = w.after.bytes.map((b, i) => b - w.before.bytes[i]);
    const packets = w.after.packets.map((p, i) => p - w.before.packets[i]);
    const video = kind === 'webrtc' ? rtc.map((v) => v.count.videoFramesInWindow) : flv.map((p) => p.videoInWindow);
    const sortedVideo = [...video].sort((a, b) => a - b);
    const withMedia = got.map((b, i) => b > 0 && video[i] > 0);
    const gwOut =
      kind === 'webrtc' ? sumDelta(w.m1, w.m0, 'gw_webrtc_packets_total') : kind === 'flv' ? sumDelta(w.m1, w.m0, 'gw_flv_out_bytes_out') : Number.NaN;
    const rtpRead = packets.reduce((a, b) => a + b, 0);
    const result: RunResult = {
      kind,
      streams: o.streams,
      ...w.figures,
      streamsRssMB: mb(streamsRss),
      rssPerViewerKB: (w.lastRss - streamsRss) / 1024 / o.streams,
      bytesOutPerSec: got.reduce((a, b) => a + b, 0) / secs,
      gatewayOutPerSec: gwOut / w.scrapeSecs,
      viewersWithMedia: withMedia.filter(Boolean).length,
      withoutMedia: sims.filter((_s, i) => !withMedia[i]),
      minViewerBytes: Math.min(...got),
      packetsPerViewerPerSec: { mean: rtpRead / o.streams / secs, min: Math.min(...packets) / secs },
      videoPerViewer: { min: sortedVideo[0] ?? 0, median: sortedVideo[sortedVideo.length >> 1] ?? 0, total: video.reduce((a, b) => a + b, 0) },
      deliveredFraction: video.reduce((a, b) => a + b, 0) / Math.max(1, w.sent),
      // between the two scrapes (read here as each answered): what the viewers read of what the gateway sent
      rtpReceivedFraction: kind === 'webrtc' ? (w.scraped[1] - w.scraped[0]) / gwOut : Number.NaN,
      keyframesPerViewerMin: kind === 'webrtc' ? Math.min(...rtc.map((v) => v.count.keyframes)) : Number.NaN,
      audioPerViewerMin: Math.min(...(kind === 'webrtc' ? rtc.map((v) => v.count.audioPacketsInWindow) : flv.map((p) => p.audioInWindow))),
      errors:
        kind === 'webrtc'
          ? rtc.flatMap((v) => (v.error !== undefined ? [`${v.name}: ${v.error}`] : v.closed ? [`${v.name}: ${v.state}`] : []))
          : flv.flatMap((p) => (p.counter.error !== undefined ? [p.counter.error] : p.closed ? ['closed'] : [])),
      loadCpuPct: (100 * w.selfSecs) / secs,
      setupSeconds,
      retried: rtc.flatMap((v) => (v.retried !== undefined ? [`${v.name}: ${v.retried}`] : [])),
    };
    printRun(result, o, kind === 'floor' ? undefined : sumOf(w.m1, kind === 'webrtc' ? 'gw_webrtc_sessions' : 'gw_flv_out_players'));
    if (kind === 'webrtc' && rtc.some((v) => v.count.strange > 0))
      console.warn(`webrtc-viewers: ${rtc.reduce((n, v) => n + v.count.strange, 0)} packets of a payload type not offered (or not RTP)`);
    return result;
  });
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
