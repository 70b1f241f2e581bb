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
import * as net from 'node:net';
import { once, setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Jt1078Layout, headerLength } from '../src/packet';
import { PacketFields, encodeSim, writeHeader } from '../src/packer';
import { TalkReceiver, describeTalk, type TalkReport } from './talk-receiver';
import { loadCapture, type Capture } from './capture';
import { USAGE, UsageError, parseSimulatorArgs, type SimulatorOptions } from './simulator-args';

export { loadCapture, type Capture } from './capture';
export { USAGE, UsageError, parseSimulatorArgs, type SimulatorOptions } from './simulator-args';

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
        // Everything that is due goes out together (a whole frame usually); unpaced, batches of 256. Over UDP, paced, a
        // batch is one frame at most and the replay yields after it: a timer that fired late (a busy host) had every
        // frame it owed sent in one burst, past what a receiver's socket buffer holds (the simulator's UDP test lost 24
        // of 540 datagrams so in CI, the receiver being in this process).
        const frameTs = pk[i].timestamp;
        while (
          i < n &&
          (speed > 0 ? t0 + (passStart + cap.offsets[i]) / speed <= now + 1 && (out instanceof net.Socket || pk[i].timestamp === frameTs) : sent < 256)
        ) {
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
        } else {
          // dgram queues sends internally; yield so they go out and memory does not pile up, and so that a receiver
          // behind catches up between frames
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
