/**
 * JT/T 1078 terminal simulator: replays a capture to the gateway as one or more terminals.
 *
 *   node dist/plugins/jt1078-ingest/tools/simulator.js <capture file> --host H --port P
 *        [--proto 2013|2019] [--udp] [--sim S] [--chan C] [--speed X] [--count N] [--loop]
 *
 * The capture's packets keep their packetisation, payload, marks and M bits; SIM and channel are
 * rewritten (terminal i gets SIM S+i), the header is re-encoded in the requested layout, and packets
 * are paced by their own timestamps divided by the speed (0 = as fast as the socket takes them).
 * With --loop, each pass shifts timestamps and sequence numbers so the receiver sees one continuous
 * stream rather than a clock jump and a counter restart.
 *
 * The terminal's side of intercom: whatever the gateway sends down a connection (talk audio) is read as JT/T 1078
 * packets in the layout the terminal expects (--talk-proto, default the one it sends), decoded by payload type
 * (G.711A/U, G.726, IMA ADPCM; HiSilicon header removed) and reported at the end; --talk-wav writes what the first
 * terminal heard to a WAV file (16-bit mono).
 */
import * as dgram from 'node:dgram';
import * as dns from 'node:dns/promises';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { once, setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Jt1078Layout, Jt1078Packet, headerLength } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { PacketFields, encodeSim, writeHeader } from '../src/packer';
import { TalkReceiver, describeTalk, type TalkReport } from './talk-receiver';

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

export interface SimulatorSummary {
  terminals: number;
  packets: number;
  bytes: number;
  seconds: number;
  /** complete passes over the capture, all terminals together */
  passes: number;
  /** intercom audio the first terminal received (TCP only) */
  talk?: TalkReport;
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

export interface Capture {
  layout: Jt1078Layout;
  packets: Jt1078Packet[];
  sim: string;
  channel: number;
  /** media time of each packet from the first, ms, non-decreasing (pacing) */
  offsets: Float64Array;
  /** timestamp shift per loop pass (span of the capture plus one frame) */
  loopShift: number;
}

/** Parses a capture file into packets and pacing offsets. */
export function loadCapture(file: string): Capture {
  let data: Buffer;
  try {
    data = fs.readFileSync(file);
  } catch (err) {
    throw new UsageError(`cannot read capture file '${file}': ${(err as Error).message}`);
  }
  const packets: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => packets.push(p));
  parser.push(data);
  parser.end();
  if (packets.length === 0) throw new UsageError(`no JT/T 1078 packets found in '${file}'`);
  const offsets = new Float64Array(packets.length);
  let t = 0;
  let minTs = Infinity;
  let maxTs = -Infinity;
  for (let i = 0; i < packets.length; i++) {
    const ts = packets[i].timestamp;
    if (ts < minTs) minTs = ts;
    if (ts > maxTs) maxTs = ts;
    if (i > 0) {
      // Audio and video timestamps interleave and captures contain jumps: pace by forward steps only,
      // each capped, so one odd timestamp cannot stall the replay.
      let step = ts - packets[i - 1].timestamp;
      if (step < 0) step = 0;
      if (step > 1000) step = 1000;
      t += step;
    }
    offsets[i] = t;
  }
  return {
    layout: parser.layout ?? '2013',
    packets,
    sim: packets[0].sim,
    channel: packets[0].channel,
    offsets,
    loopShift: maxTs - minTs + 40,
  };
}

function simFor(first: string, i: number): string {
  const s = (BigInt(first) + BigInt(i)).toString();
  return s.padStart(first.length, '0');
}

interface Counters {
  packets: number;
  bytes: number;
  passes: number;
}

/** Replays the capture as opts.count terminals; resolves when done or aborted. */
export async function runSimulator(opts: SimulatorOptions): Promise<SimulatorSummary> {
  const count = opts.count ?? 1;
  const speed = opts.speed ?? 1;
  if (!Number.isInteger(opts.port) || opts.port < 1 || opts.port > 65535) throw new UsageError(`port must be 1..65535, got ${opts.port}`);
  if (!Number.isInteger(count) || count < 1) throw new UsageError(`count must be a positive integer, got ${count}`);
  if (!(speed >= 0) || !Number.isFinite(speed)) throw new UsageError(`speed must be a number >= 0, got ${speed}`);
  if (opts.chan !== undefined && (!Number.isInteger(opts.chan) || opts.chan < 1 || opts.chan > 255)) {
    throw new UsageError(`channel must be 1..255, got ${opts.chan}`);
  }
  if (opts.sim !== undefined && !/^[0-9]{1,20}$/.test(opts.sim)) throw new UsageError(`SIM must be 1 to 20 digits, got '${opts.sim}'`);
  const cap = loadCapture(opts.file);
  const layout = opts.proto ?? cap.layout;
  const firstSim = opts.sim ?? cap.sim;
  const sims: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    try {
      sims.push(encodeSim(simFor(firstSim, i), layout));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const host = opts.host ?? '127.0.0.1';
  let address: string;
  try {
    address = net.isIP(host) ? host : (await dns.lookup(host)).address;
  } catch (err) {
    throw new Error(`cannot resolve host '${host}': ${(err as Error).message}`, { cause: err });
  }
  const counters: Counters = { packets: 0, bytes: 0, passes: 0 };
  const started = performance.now();
  // Every terminal waits on the signal at once; an internal one (without the listener limit) keeps the
  // caller's signal down to a single listener.
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  const forward = (): void => stop.abort();
  if (opts.signal?.aborted) stop.abort();
  opts.signal?.addEventListener('abort', forward, { once: true });
  const terminals: Promise<void>[] = [];
  // the first terminal hears intercom (the others' downlink is read and dropped)
  let talk: TalkReceiver | undefined;
  try {
    talk = opts.udp ? undefined : new TalkReceiver({ layout: opts.talkProto ?? layout, wavFile: opts.talkWav });
  } catch (err) {
    throw new UsageError(`cannot write the talk WAV file: ${(err as Error).message}`);
  }
  for (let i = 0; i < count; i++) {
    // Spread terminals over one frame interval so they do not all burst at the same instant.
    const stagger = speed > 0 && count > 1 ? (i * 40) / count : 0;
    terminals.push(
      runTerminal(
        cap,
        layout,
        sims[i],
        opts.chan,
        speed,
        !!opts.loop,
        !!opts.udp,
        address,
        opts.port,
        stagger,
        counters,
        stop.signal,
        i === 0 ? talk : undefined,
      ),
    );
  }
  const results = await Promise.allSettled(terminals);
  opts.signal?.removeEventListener('abort', forward);
  const talkReport = talk?.close();
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return {
    terminals: count,
    packets: counters.packets,
    bytes: counters.bytes,
    passes: counters.passes,
    seconds: (performance.now() - started) / 1000,
    ...(talkReport ? { talk: talkReport } : {}),
  };
}

async function runTerminal(
  cap: Capture,
  layout: Jt1078Layout,
  simBcd: Buffer,
  chan: number | undefined,
  speed: number,
  loop: boolean,
  udp: boolean,
  address: string,
  port: number,
  stagger: number,
  counters: Counters,
  signal: AbortSignal | undefined,
  talk: TalkReceiver | undefined,
): Promise<void> {
  if (signal?.aborted) return;
  const out = udp ? await openUdp(address) : await openTcp(address, port, signal);
  if (!out) return;
  // what the gateway sends down (intercom): read, so the gateway's socket never backs up, and heard by `talk`
  if (out instanceof net.Socket) out.on('data', (d: Buffer) => talk?.push(d));
  const pk = cap.packets;
  const n = pk.length;
  const fields: PacketFields = {
    layout,
    sim: '',
    channel: 1,
    pt: 0,
    marker: false,
    seq: 0,
    dataType: 0,
    subMark: 0,
    timestamp: 0,
  };
  const t0 = performance.now() + stagger;
  let failure: Error | undefined;
  const onError = (err: Error): void => {
    failure = err;
  };
  out.on('error', onError);
  try {
    for (let pass = 0; ; pass++) {
      const passStart = pass * cap.loopShift;
      let i = 0;
      while (i < n) {
        if (signal?.aborted) return;
        if (failure) throw failure;
        let now = performance.now();
        if (speed > 0) {
          const due = t0 + (passStart + cap.offsets[i]) / speed;
          if (due - now > 1) {
            try {
              await sleep(due - now, undefined, { signal });
            } catch {
              return; // aborted
            }
            now = performance.now();
          }
        }
        if (out instanceof net.Socket) out.cork();
        let sent = 0;
        // Everything that is due goes out together (a whole frame usually); unpaced, batches of 256.
        while (i < n && (speed > 0 ? t0 + (passStart + cap.offsets[i]) / speed <= now + 1 : sent < 256)) {
          const p = pk[i];
          fields.channel = chan ?? p.channel;
          fields.pt = p.pt;
          fields.marker = p.marker;
          fields.seq = (p.seq + pass * n) & 0xffff;
          fields.dataType = p.dataType;
          fields.subMark = p.subMark;
          fields.timestamp = p.timestamp + passStart;
          fields.lastIFrameInterval = p.lastIFrameInterval;
          fields.lastFrameInterval = p.lastFrameInterval;
          const header = Buffer.allocUnsafe(headerLength(layout, p.dataType));
          writeHeader(header, 0, fields, simBcd, p.body.length);
          if (out instanceof net.Socket) {
            out.write(header);
            out.write(p.body);
          } else {
            out.send([header, p.body], port, address);
          }
          counters.packets++;
          counters.bytes += header.length + p.body.length;
          sent++;
          i++;
        }
        if (out instanceof net.Socket) {
          out.uncork();
          if (out.writableNeedDrain) await waitDrain(out, signal);
        } else if (speed === 0) {
          // dgram queues sends internally; yield so they go out and memory does not pile up.
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      }
      counters.passes++;
      if (!loop) break;
    }
    if (failure) throw failure;
  } finally {
    await closeOut(out);
  }
}

async function openTcp(address: string, port: number, signal: AbortSignal | undefined): Promise<net.Socket | undefined> {
  const s = net.connect({ host: address, port });
  s.setNoDelay(true);
  try {
    await once(s, 'connect', { signal });
  } catch (err) {
    s.destroy();
    if (signal?.aborted) return undefined;
    throw new Error(`cannot connect to ${address}:${port}: ${(err as Error).message}`, { cause: err });
  }
  return s;
}

async function openUdp(address: string): Promise<dgram.Socket> {
  const s = dgram.createSocket(net.isIPv6(address) ? 'udp6' : 'udp4');
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.bind(0, () => {
      s.off('error', reject);
      resolve();
    });
  });
  return s;
}

/** Resolves on 'drain', on 'close' or on abort, and leaves no listener behind (it runs once per batch). */
function waitDrain(s: net.Socket, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      s.off('drain', done);
      s.off('close', done);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    s.on('drain', done);
    s.on('close', done);
    signal?.addEventListener('abort', done);
  });
}

async function closeOut(out: net.Socket | dgram.Socket): Promise<void> {
  if (out instanceof net.Socket) {
    if (out.destroyed) return;
    const closed = once(out, 'close').catch(() => undefined);
    out.end();
    // A peer that never reads would keep the socket open forever: give it a moment, then cut it.
    const t = setTimeout(() => out.destroy(), 2000);
    await closed;
    clearTimeout(t);
  } else {
    // Let queued datagrams leave before the socket goes.
    await new Promise<void>((resolve) => setImmediate(resolve));
    await new Promise<void>((resolve) => out.close(() => resolve()));
  }
}

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

export async function main(argv: string[]): Promise<number> {
  let opts: SimulatorOptions;
  try {
    opts = parseSimulatorArgs(argv);
  } catch (err) {
    const msg = (err as Error).message;
    process.stderr.write((msg ? `error: ${msg}\n\n` : '') + USAGE + '\n');
    return msg ? 2 : 0;
  }
  const ac = new AbortController();
  const stop = (): void => ac.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const s = await runSimulator({ ...opts, signal: ac.signal });
    process.stdout.write(`simulator: ${s.terminals} terminal(s), ${s.packets} packets, ${s.bytes} bytes, ${s.seconds.toFixed(1)} s\n`);
    // one summary line unless there is intercom to tell about (or a WAV file was asked for)
    if (s.talk && (s.talk.packets > 0 || opts.talkWav)) process.stdout.write(describeTalk(s.talk) + '\n');
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`simulator: ${(err as Error).message}\n`);
    return 1;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

if (require.main === module) {
  // main() reports its own failures and returns the exit code; anything it lets through is an unhandled
  // rejection, which Node prints before it exits with code 1
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
