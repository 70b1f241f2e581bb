/**
 * Ingest to low-latency HLS under load: ingest-flv's load (N simulated terminals at ~1 Mbit/s over TCP, the gateway
 * pinned to core 0, the load on core 1), with one LL-HLS reader per terminal instead of an HTTP-FLV player
 * (support/bench-hls-reader.ts: blocking playlist reloads with _HLS_msn/_HLS_part and every part fetched, as hls.js
 * does in LL mode). The site adds hls-out at its defaults. By default two rounds of an HLS run and an FLV run (the
 * same load with ingest-flv's players) alternate, then the gateway's CPU and RSS ratios HLS/FLV; the HLS run also
 * reports how far behind live the readers are (part age when fetched) and reader errors (which must be 0).
 *
 *   node dist/test/bench/run.js ingest-hls [--rounds K] [--terminals N] [--seconds S] [--warmup S] [--mbps X] ...
 */
import { parseArgs as parseFlvArgs, runOptions, type IngestFlvOptions, type IngestFlvResult, type ReaderKind } from './ingest-flv';

const usage = (name: string, what: string) => `usage: npm run bench -- ${name} [--rounds K] [--terminals N] [--seconds S] [--warmup S] [--mbps X]
                       [--capture FILE] [--ramp] [--ramp-seconds S] [--profile] [--no-pin] [--keep-dir] [--node-opt OPT]...
  --rounds K   rounds of a ${what} run and an HTTP-FLV run alternated, then the gateway CPU and RSS ratios (default 2;
               0: the ${what} run alone)
  the rest as ingest-flv's (npm run bench -- ingest-flv --help); --audio, --aac, --floor, --vs-floor, --vs-workers
  are not taken here`;

export const USAGE = usage('ingest-hls', 'LL-HLS');

/** ingest-flv's arguments plus --rounds, for a bench whose streams are read by `kind` readers */
export function readerBenchOptions(kind: Exclude<ReaderKind, 'flv'>, args: string[], help: string): IngestFlvOptions {
  let rounds = 2;
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--rounds') {
      const v = args[++i];
      const n = Number(v);
      if (v === undefined || !Number.isInteger(n) || n < 0 || n > 20)
        throw new Error(`--rounds needs a whole number from 0 to 20${v === undefined ? '' : `, got '${v}'`}\n\n${help}`);
      rounds = n;
    } else if (a === '-h' || a === '--help') {
      throw new Error(help);
    } else if (['--audio', '--audio-frame-ms', '--aac', '--floor', '--vs-floor', '--vs-workers'].includes(a)) {
      throw new Error(`${a} is not taken by this bench\n\n${help}`);
    } else {
      rest.push(a);
    }
  }
  let o: IngestFlvOptions;
  try {
    o = parseFlvArgs(rest);
  } catch (err) {
    // ingest-flv's message ends with its own usage: show ours
    throw new Error(`${(err as Error).message.split('\n\n')[0]}\n\n${help}`, { cause: err });
  }
  return { ...o, readers: kind, vsFlv: rounds };
}

export function parseArgs(args: string[]): IngestFlvOptions {
  return readerBenchOptions('hls', args, USAGE);
}

export async function run(args: string[]): Promise<IngestFlvResult> {
  return runOptions(parseArgs(args));
}

export { usage as readerBenchUsage };
