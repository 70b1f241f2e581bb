/**
 * A bench's command line: numbers checked against their range, and the arguments every bench that starts the gateway
 * takes, read the same way in each (every error ends with the bench's usage).
 */
import * as fs from 'node:fs';
import { fixturePath } from '../../support/paths';

export const DEFAULT_CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';

export class BenchArgs {
  private i = -1;
  constructor(
    private readonly args: readonly string[],
    private readonly usage: string,
  ) {}

  /** the next argument, or undefined past the last */
  next(): string | undefined {
    return this.args[++this.i];
  }

  /** the value after `flag`: a number from min to max (a whole one when `int`) */
  num(flag: string, min: number, max: number, int = false): number {
    const v = this.args[++this.i];
    const n = Number(v);
    if (v === undefined || v.startsWith('--') || !Number.isFinite(n) || n < min || n > max || (int && !Number.isInteger(n))) {
      throw this.error(`${flag} needs ${int ? 'a whole number' : 'a number'} from ${min} to ${max}${v === undefined ? '' : `, got '${v}'`}`);
    }
    return n;
  }

  /** the raw value after a flag (undefined past the last argument); the caller checks it */
  value(): string | undefined {
    return this.args[++this.i];
  }

  /** the value after --node-opt: a node option for the gateway process */
  nodeOpt(): string {
    const v = this.value();
    if (v === undefined || !v.startsWith('--')) throw this.error('--node-opt needs a node option such as --trace-gc');
    return v;
  }

  error(message: string): Error {
    return new Error(`${message}\n\n${this.usage}`);
  }

  /** for the switch's default: -h/--help show the usage, anything else is unknown */
  unknown(a: string): never {
    if (a === '-h' || a === '--help') throw new Error(this.usage);
    throw this.error(`unknown argument '${a}'`);
  }
}

export interface GatewayBenchOptions {
  profile: boolean;
  keepDir: boolean;
  nodeOpts: string[];
}

/** --profile, --keep-dir, --node-opt OPT: true when `a` was one of them */
export function gatewayArg(a: string, r: BenchArgs, o: GatewayBenchOptions): boolean {
  switch (a) {
    case '--profile':
      o.profile = true;
      return true;
    case '--keep-dir':
      o.keepDir = true;
      return true;
    case '--node-opt':
      o.nodeOpts.push(r.nodeOpt());
      return true;
    default:
      return false;
  }
}

export interface WindowBenchOptions {
  seconds: number;
  warmup: number;
  mbps: number;
}

/** --seconds S (the measured window), --warmup S (load before it), --mbps X (a terminal's rate): true when `a` was one of them */
export function windowArg(a: string, r: BenchArgs, o: WindowBenchOptions): boolean {
  switch (a) {
    case '--seconds':
      o.seconds = r.num(a, 1, 3600, false);
      return true;
    case '--warmup':
      o.warmup = r.num(a, 0, 600, false);
      return true;
    case '--mbps':
      o.mbps = r.num(a, 0.01, 100, false);
      return true;
    default:
      return false;
  }
}

export interface FloorBenchOptions {
  floor: boolean;
  vsFloor: number;
}

/** --floor (the bare relay instead of the gateway), --vs-floor K (K rounds of both): true when `a` was one of them */
export function floorArg(a: string, r: BenchArgs, o: FloorBenchOptions): boolean {
  switch (a) {
    case '--floor':
      o.floor = true;
      return true;
    case '--vs-floor':
      o.vsFloor = r.num(a, 1, 20, true);
      return true;
    default:
      return false;
  }
}

export interface LoadBenchOptions extends GatewayBenchOptions {
  capture: string;
  pin: boolean;
}

/** gatewayArg's, and --capture FILE, --no-pin: true when `a` was one of them */
export function loadArg(a: string, r: BenchArgs, o: LoadBenchOptions): boolean {
  switch (a) {
    case '--capture': {
      const v = r.value();
      if (v === undefined || v.startsWith('--')) throw r.error('--capture needs a file');
      o.capture = v;
      return true;
    }
    case '--no-pin':
      o.pin = false;
      return true;
    default:
      return gatewayArg(a, r, o);
  }
}

/** the capture given (which must exist), else the default fixture */
export function captureFile(given: string): string {
  if (!given) return fixturePath(DEFAULT_CAPTURE);
  if (!fs.existsSync(given)) throw new Error(`capture file '${given}' not found`);
  return given;
}
