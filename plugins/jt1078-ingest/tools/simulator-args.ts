/**
 * The simulator's options and command line: what runSimulator takes, the usage text, and the parse of argv into
 * options, refusing anything unclear with a UsageError that names the flag.
 */
import type { Jt1078Layout } from '../src/packet';

export interface SimulatorOptions {
  /** capture file of raw JT/T 1078 packets (a TCP payload dump) */
  file: string;
  host?: string;
  port: number;
  /** layout to send; default: the capture's own */
  proto?: Jt1078Layout;
  udp?: boolean;
  /** SIM of the first terminal (digits); default the capture's */
  sim?: string;
  /** logical channel to send on; default the capture's */
  chan?: number;
  /** pacing divisor; 0 = as fast as possible. Default 1 (real time). */
  speed?: number;
  /** terminals, each on its own connection with SIM sim+i. Default 1. */
  count?: number;
  /** replay until aborted */
  loop?: boolean;
  signal?: AbortSignal;
  /** write the intercom audio the first terminal receives to this WAV file */
  talkWav?: string;
  /** layout the terminals read intercom audio in (default: the one they send) */
  talkProto?: Jt1078Layout;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const USAGE = `usage: simulator <capture file> --host H --port P [--proto 2013|2019] [--udp]
                 [--sim S] [--chan C] [--speed X] [--count N] [--loop] [--talk-wav F] [--talk-proto 2013|2019]
  --host H        gateway address (default 127.0.0.1)
  --port P        gateway JT/T 1078 push port (required)
  --proto V       packet layout to send: 2013 (6-byte SIM) or 2019 (10-byte SIM); default the capture's
  --udp           send UDP datagrams (one packet each) instead of a TCP stream
  --sim S         SIM of the first terminal; terminal i uses S+i (default the capture's SIM)
  --chan C        logical channel 1..255 (default the capture's)
  --speed X       pacing: 1 real time, 2 twice as fast, 0 as fast as possible (default 1)
  --count N       number of simulated terminals (default 1)
  --loop          replay the capture until interrupted
  --talk-wav F    write the intercom audio the (first) terminal receives to WAV file F
  --talk-proto V  layout the terminal reads intercom audio in (default: the one it sends)`;

/** Parses command-line arguments (without node and script); throws UsageError with a clear message. */
export function parseSimulatorArgs(argv: string[]): SimulatorOptions {
  let file: string | undefined;
  const o: Partial<SimulatorOptions> = {};
  const value = (i: number, flag: string): string => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new UsageError(`${flag} needs a value`);
    return v;
  };
  const int = (v: string, flag: string): number => {
    if (!/^[0-9]+$/.test(v)) throw new UsageError(`${flag} must be a whole number, got '${v}'`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    switch (a) {
      case '--host':
        o.host = value(i++, a);
        break;
      case '--port':
        o.port = int(value(i++, a), a);
        break;
      case '--proto': {
        const v = value(i++, a);
        if (v !== '2013' && v !== '2019') throw new UsageError(`--proto must be 2013 or 2019, got '${v}'`);
        o.proto = v;
        break;
      }
      case '--udp':
        o.udp = true;
        break;
      case '--sim':
        o.sim = value(i++, a);
        break;
      case '--chan':
        o.chan = int(value(i++, a), a);
        break;
      case '--speed': {
        const v = value(i++, a);
        const n = Number(v);
        if (!/^[0-9.]+$/.test(v) || !Number.isFinite(n)) throw new UsageError(`--speed must be a number >= 0, got '${v}'`);
        o.speed = n;
        break;
      }
      case '--count':
        o.count = int(value(i++, a), a);
        break;
      case '--loop':
        o.loop = true;
        break;
      case '--talk-wav':
        o.talkWav = value(i++, a);
        break;
      case '--talk-proto': {
        const v = value(i++, a);
        if (v !== '2013' && v !== '2019') throw new UsageError(`--talk-proto must be 2013 or 2019, got '${v}'`);
        o.talkProto = v;
        break;
      }
      case '-h':
      case '--help':
        throw new UsageError('');
      default:
        if (a.startsWith('-')) throw new UsageError(`unknown option '${a}'`);
        if (file !== undefined) throw new UsageError(`more than one capture file given ('${file}', '${a}')`);
        file = a;
    }
  }
  if (file === undefined) throw new UsageError('no capture file given');
  if (o.port === undefined) throw new UsageError('--port is required');
  return { ...o, file, port: o.port };
}
