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
import { setTimeout as sleep } from 'node:timers/promises';
import { total } from './support/alternate';
import { BenchPlayer } from './support/bench-player';
import { RtmpBenchPlayer } from './support/bench-rtmp-player';
import { REQUESTS_PER_APP, Reservoir, checkDeadline, f1, f2, pool, tail } from './support/gateway-harness';
import {
  gatewayRun,
  measureWindow,
  parseVsFlvArgs,
  runRounds,
  startTerminal,
  summariseVsFlv,
  type VsFlvBench,
  type VsFlvOptions,
  type WindowFigures,
} from './support/players-vs-flv';
import { quantile, sumDelta, sumOf } from './support/process-probe';
import { StartPhases } from './support/start-phases';
import type { SynthStream } from './support/synth-terminals';

export type Kind = 'flv' | 'rtmp' | 'floor';

/** `audio`: terminals send G.711A too and the site runs audio-aac: both kinds of player take AAC */
export type RtmpPlayersOptions = VsFlvOptions;

export interface RunResult extends WindowFigures {
  kind: Kind;
  streams: number;
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
}

const OPEN_CONCURRENCY = 16;
const OUT_METRIC: Record<Kind, string | undefined> = { flv: 'gw_flv_out_bytes_out', rtmp: 'gw_rtmp_bytes_out', floor: undefined };
const NAME: Record<Kind, string> = { flv: 'HTTP-FLV', rtmp: 'RTMP', floor: 'floor' };
const BENCH: VsFlvBench<'rtmp'> = {
  bench: 'rtmp-players',
  alt: 'rtmp',
  altName: 'RTMP',
  noun: 'player',
  audioNote: ', G.711A speech: players take AAC from audio-aac',
  target: 1.2,
};

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
  return parseVsFlvArgs(args, USAGE);
}

export async function run(args: string[]): Promise<RunResult[][]> {
  return runOptions(parseArgs(args));
}

export async function runOptions(o: RtmpPlayersOptions): Promise<RunResult[][]> {
  return runRounds(
    o,
    BENCH,
    (stream, kind, pin) => runOnce(o, stream, kind, pin),
    (rounds) => summarise(o, rounds),
  );
}

function summarise(o: RtmpPlayersOptions, rounds: Array<Record<Kind, RunResult>>): void {
  const sum = (f: (r: Record<Kind, RunResult>) => number) => total(rounds, f);
  summariseVsFlv(o, BENCH, rounds, {
    round: (r) =>
      `FLV ${f1(r.flv.cpuPct)} %, RTMP ${f1(r.rtmp.cpuPct)} % -> RTMP/FLV ${f2(r.rtmp.cpuPct / r.flv.cpuPct)}; RSS ${f1(r.flv.rssMB)} / ${f1(r.rtmp.rssMB)} MB`,
    detail:
      `  main thread RTMP/FLV: ${f2(sum((r) => r.rtmp.mainPct) / sum((r) => r.flv.mainPct))}; RSS at the end RTMP/FLV: ${f2(sum((r) => r.rtmp.rssMB) / sum((r) => r.flv.rssMB))} ` +
      `(${f1(sum((r) => r.flv.rssMB) / rounds.length)} / ${f1(sum((r) => r.rtmp.rssMB) / rounds.length)} MB, idle ${f1(sum((r) => r.flv.idleRssMB) / rounds.length)} MB)`,
    readNote: '',
    withMedia: (r) => r.playersWithMedia,
  });
}

async function runOnce(o: RtmpPlayersOptions, stream: SynthStream, kind: Kind, pin: boolean): Promise<RunResult> {
  const flv: BenchPlayer[] = [];
  const rtmp: RtmpBenchPlayer[] = [];
  const frame = {
    bench: BENCH.bench,
    kind,
    name: NAME[kind],
    pin,
    budgetMs: 60_000 + o.streams * 200 + (o.warmup + o.seconds) * 1000 + 60_000,
    // the same site for both kinds of player: only who plays differs
    plugins: async () => [
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
      { name: 'rtmp', config: { port: 0, host: '127.0.0.1' } },
      ...(o.audio ? [{ name: 'audio-aac', config: {} }] : []),
    ],
    close: () => {
      for (const p of flv) p.socket?.destroy();
      for (const p of rtmp) p.socket?.destroy();
    },
  };
  return gatewayRun(o, frame, async (run) => {
    const { gw, api, deadline } = run;
    const e2e = new Reservoir();
    // --- open, push, play (as ingest-flv: each terminal at its own GOP phase, from a different I frame)
    const phases = new StartPhases(stream, o.streams, performance.now());
    const sims = Array.from({ length: o.streams }, (_x, i) => String(13900000000 + i));
    await pool(
      sims,
      OPEN_CONCURRENCY,
      0,
      async (sim, i) => {
        const r = await api.openLive(sim, Math.floor(i / REQUESTS_PER_APP), kind === 'rtmp' ? { fmt: 0, scheme: 'rtmp' } : undefined);
        const term = await startTerminal(run, stream, phases, sim, i, r.port);
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

    const w = await measureWindow(run, o.seconds, {
      snap: () => (kind === 'rtmp' ? rtmp.map((p) => p.bytes) : flv.map((p) => p.counter.bytes)),
      measuring: (on) => {
        for (const p of [...flv, ...rtmp]) p.measuring = on;
        if (on) e2e.reset();
      },
    });
    const secs = w.figures.seconds;
    const got = w.after.map((b, i) => b - w.before[i]);
    const video = kind === 'rtmp' ? rtmp.map((p) => p.videoInWindow) : flv.map((p) => p.videoInWindow);
    const sortedVideo = [...video].sort((a, b) => a - b);
    const outMetric = OUT_METRIC[kind];
    const result: RunResult = {
      kind,
      streams: o.streams,
      ...w.figures,
      bytesOutPerSec: got.reduce((a, b) => a + b, 0) / secs,
      gatewayBytesOutPerSec: outMetric ? sumDelta(w.m1, w.m0, outMetric) / w.scrapeSecs : NaN,
      playersWithMedia: got.filter((b, i) => b > 0 && video[i] > 0).length,
      minPlayerBytes: Math.min(...got),
      videoPerPlayer: { min: sortedVideo[0] ?? 0, median: sortedVideo[sortedVideo.length >> 1] ?? 0, total: video.reduce((a, b) => a + b, 0) },
      keyframesPerPlayerMin: kind === 'rtmp' ? Math.min(...rtmp.map((p) => p.keyframesInWindow)) : NaN,
      deliveredFraction: video.reduce((a, b) => a + b, 0) / Math.max(1, w.sent),
      audioPerPlayerMin: Math.min(...(kind === 'rtmp' ? rtmp.map((p) => p.audioInWindow) : flv.map((p) => p.audioInWindow))),
      errors:
        kind === 'rtmp'
          ? rtmp.flatMap((p) => (p.error !== undefined ? [p.error] : p.closed ? ['closed'] : []))
          : flv.flatMap((p) => (p.counter.error !== undefined ? [p.counter.error] : p.closed ? ['closed'] : [])),
      e2eMs: { p50: quantile(e2e.values(), 0.5), p99: quantile(e2e.values(), 0.99), count: e2e.seen },
      unmatched: kind === 'rtmp' ? rtmp.reduce((n, p) => n + p.unmatched, 0) : flv.reduce((n, p) => n + p.unmatched, 0),
      acks: rtmp.reduce((n, p) => n + p.acksSent, 0),
    };
    printRun(result, o, kind === 'floor' ? undefined : sumOf(w.m1, kind === 'rtmp' ? 'gw_rtmp_players' : 'gw_flv_out_players'));
    return result;
  });
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
