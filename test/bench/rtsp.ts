/**
 * Ingest to RTSP under load: ingest-flv's load (N simulated terminals at ~1 Mbit/s over TCP, the gateway pinned to
 * core 0, the load on core 1), with one RTSP reader per terminal over TCP interleaving instead of an HTTP-FLV player
 * (support/bench-rtsp-reader.ts: OPTIONS, DESCRIBE, SETUP interleaved, PLAY, then RTP and RTCP read and checked:
 * packets, bytes, sequence gaps, stalls, and end-to-end latency per video frame). The site adds rtsp-out on free
 * ports. By default two rounds of an RTSP run and an FLV run (ingest-flv's players) alternate, then the gateway's
 * CPU and RSS ratios RTSP/FLV.
 *
 *   node dist/test/bench/run.js rtsp [--rounds K] [--terminals N] [--seconds S] [--warmup S] [--mbps X] ...
 */
import { runOptions, type IngestFlvOptions, type IngestFlvResult } from './ingest-flv';
import { readerBenchOptions, readerBenchUsage } from './ingest-hls';

export const USAGE = readerBenchUsage('rtsp', 'RTSP/TCP');

export function parseArgs(args: string[]): IngestFlvOptions {
  return readerBenchOptions('rtsp', args, USAGE);
}

export async function run(args: string[]): Promise<IngestFlvResult> {
  return runOptions(parseArgs(args));
}
