/**
 * Benchmark dispatcher: `node dist/test/bench/run.js <name> [args]` runs test/bench/<name>.ts's exported
 * `run(args)` (npm: `npm run bench -- <name> [args]`). See test/bench/README.md for each benchmark.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface Bench {
  run(args: string[]): Promise<unknown>;
}

/** A bench module's loader, resolved from this file's folder. */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a bench module loads only when it is picked
const lazy = (file: string) => (): Bench => require(file) as Bench;

/** Benchmarks by name; each module stays unloaded until picked, so one bench's imports cannot slow another. */
export const BENCHES: Record<string, { summary: string; load: () => Bench }> = {
  'ingest-flv': {
    summary: 'N simulated terminals at ~1 Mbit/s, one HTTP-FLV player each; gateway CPU, RSS, throughput, added latency',
    load: lazy('./ingest-flv'),
  },
  'ingest-hls': {
    summary:
      "ingest-flv's load with one low-latency HLS reader per terminal (blocking reloads, every part fetched), alternated with FLV players: gateway CPU and RSS ratios, part age, reader errors",
    load: lazy('./ingest-hls'),
  },
  rtsp: {
    summary:
      "ingest-flv's load with one RTSP/TCP (interleaved) reader per terminal, alternated with FLV players: gateway CPU and RSS ratios, RTP flow, stalls, end to end",
    load: lazy('./rtsp'),
  },
  'rtmp-players': {
    summary:
      'N streams at ~1 Mbit/s, one RTMP player each (a minimal RTMP client) against one HTTP-FLV player each, alternated: gateway CPU RTMP/FLV (issue 44), RSS, bytes and frames per player',
    load: lazy('./rtmp-players'),
  },
  'webrtc-viewers': {
    summary:
      'N streams at ~1 Mbit/s, one WebRTC viewer each (node-datachannel WHEP clients) against one HTTP-FLV player each, alternated: gateway CPU WebRTC/FLV (target 2), RSS per viewer, bytes and RTP packets per viewer',
    load: lazy('./webrtc-viewers'),
  },
  audio: {
    summary:
      'N watched G.711A streams through the gateway to AAC (audio-aac): CPU per stream-second of the main and the AAC worker thread, memory per encoder, ramp until it falls behind',
    load: lazy('./audio'),
  },
  'audio-path': {
    summary:
      "a G.711A frame's main-thread path to an FLV player of AAC in one process (normaliser, AAC stage hand-off and return, FLV form): ns and JS heap bytes per frame",
    load: lazy('./audio-path'),
  },
  'aac-engine': {
    summary: 'N AAC encoders in one worker thread fed real-time speech chunks: CPU per stream-second, memory per encoder, streams per core',
    load: lazy('./aac-engine'),
  },
  codecs: {
    summary: 'CPU ms per second of 8 kHz audio for each decoder, encoder (G.711, G.726, IMA ADPCM) and resampler rate',
    load: lazy('./codecs'),
  },
  soak: {
    summary:
      'long churn (terminals, players, 200 API clients, a callback outage) against the gateway: RSS, heap, fds, event loop, leaked requests, lost notices; fails on a leak',
    load: lazy('./soak'),
  },
  fanout: {
    summary:
      'one terminal at ~1 Mbit/s, N HTTP-FLV (or WS-FLV) players of its one stream: gateway CPU, RSS, per-player throughput, every frame to every player, lag',
    load: lazy('./fanout'),
  },
  'http-floor': {
    summary:
      "what one request costs node's HTTP server alone (a bare server of fixed answers) at LL-HLS readers' rate: µs of CPU a request, the floor under any HLS server on node",
    load: lazy('./http-floor'),
  },
  'metrics-scrape': {
    summary:
      "one /metrics scrape at N streams, prom-client's registry.metrics() against the gateway's scrapeText, alternated: wall time, longest event-loop hold, CPU, garbage",
    load: lazy('./metrics-scrape'),
  },
  'open-latency': {
    summary:
      'POST /strm/open of already-live channels at a steady rate, with no load and while N terminals x 1 Mbit/s with one player each run: open latency p50/p99/max',
    load: lazy('./open-latency'),
  },
  'fleet-directory': {
    summary:
      'one node with the fleet directory on a local Redis against the in-process directory, alternated: open p50/p99/max under N live streams, Redis commands per open, per media packet and per second (heartbeat), bytes and keys per stream',
    load: lazy('./fleet-directory'),
  },
  paired: {
    summary:
      "ingest-flv against two gateways at the same time on one core (another build, the floor, or other settings): B's CPU over A's, steady where this machine's speed drifts",
    load: lazy('./paired'),
  },
  'payload-pools': {
    summary:
      'N streams through Publisher.alloc in one process, one payload pool for the bus against a pool per stream (and no reuse): CPU a frame, pooled bytes held',
    load: lazy('./payload-pools'),
  },
  'record-catalog': {
    summary: 'stored-media range queries on a 1,000,000-record SQLite catalog (page 1 and page 500)',
    load: lazy('./record-catalog'),
  },
  'record-mp4': {
    summary:
      'a 10-minute record file as MP4 (format=mp4) over loopback HTTP: made on the fly (layout per request, or kept) against a sidecar file made once: time to first byte and CPU of a download and of a seek',
    load: lazy('./record-mp4'),
  },
};

export function usage(): string {
  const names = Object.entries(BENCHES)
    .map(([n, b]) => `  ${n.padEnd(16)} ${b.summary}`)
    .join('\n');
  return `usage: npm run bench -- <name> [args]   (or: node dist/test/bench/run.js <name> [args])\n\nbenchmarks:\n${names}\n\nEach benchmark's own arguments: see test/bench/README.md.`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '-h' || name === '--help') {
    process.stdout.write(usage() + '\n');
    return name ? 0 : 2;
  }
  const entry = BENCHES[name];
  if (!entry) {
    // a compiled bench file that is not listed above is most likely a new one someone forgot to register
    const guess = fs.existsSync(path.join(__dirname, `${name}.js`)) ? ` (dist/test/bench/${name}.js exists but is not registered in run.ts)` : '';
    process.stderr.write(`unknown benchmark '${name}'${guess}\n\n${usage()}\n`);
    return 2;
  }
  try {
    await entry.load().run(args);
    return 0;
  } catch (err) {
    process.stderr.write(`${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    if (process.env.GW_DEBUG && err instanceof Error && err.stack) process.stderr.write(err.stack + '\n');
    return 1;
  }
}

if (require.main === module) {
  // main() reports its own failures and returns the exit code; anything it lets through is an unhandled
  // rejection, which Node prints before it exits with code 1
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // A benchmark stops by itself: if some handle it forgot still holds the process, do not hang on it.
    setTimeout(() => {
      process.stderr.write('bench: handles still open 5 s after the benchmark finished; exiting\n');
      process.exit(code);
    }, 5000).unref();
  });
}
