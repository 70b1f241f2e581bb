/**
 * Payload chunks kept in one pool for the whole bus (core/bus/chunk-pool.ts) against a pool per stream: the memory
 * each holds and the CPU of a frame through Publisher.alloc, in one process with no sockets.
 *
 * N streams on a manual clock, each with one reader that holds nothing once written (an FLV player whose socket took
 * every byte), push frames at 25 fps: a key frame every `gop` frames, ~32 KiB key frames and ~4 KiB others (about
 * 1 Mbit/s, as ingest-flv's terminals). Key frames come at a random phase per stream (a fleet), or all at once
 * (`--aligned`: terminals switched on together, as in ingest-flv). A pool per stream is a bus per stream here: the
 * same code, with nothing shared.
 *
 *   node --expose-gc --single-threaded-gc --max-semi-space-size=8 dist/test/bench/run.js payload-pools [--streams 500]
 *     [--seconds 60] [--gop 50] [--aligned] [--rounds 3] [--layout shared|per-stream|no-reuse]...
 */
import pino from 'pino';
import { ChunkPool } from '../../core/bus/chunk-pool';
import { CoreMediaBus } from '../../core/bus/media-bus';
import type { Publisher } from '../../plugin-sdk/bus';
import { videoUnit } from '../../plugin-sdk/media';
import { prng } from '../support/prng';

const KB = 1024;
const FRAME_MS = 40;
const quiet = pino({ level: 'silent' });

const LAYOUTS = ['shared', 'per-stream', 'no-reuse'] as const;
type Layout = (typeof LAYOUTS)[number];

interface Options {
  streams: number;
  seconds: number;
  gop: number;
  aligned: boolean;
  rounds: number;
  /** the layouts run (default: all three) */
  layouts: Layout[];
}

function parse(args: string[]): Options {
  const o: Options = { streams: 500, seconds: 60, gop: 50, aligned: false, rounds: 3, layouts: [] };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const num = (): number => {
      const v = Number(args[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} takes a positive number, got '${args[i]}'`);
      return v;
    };
    if (a === '--streams') o.streams = num();
    else if (a === '--seconds') o.seconds = num();
    else if (a === '--gop') o.gop = num();
    else if (a === '--rounds') o.rounds = num();
    else if (a === '--aligned') o.aligned = true;
    else if (a === '--layout') {
      const l = args[++i] as Layout;
      if (!LAYOUTS.includes(l)) throw new Error(`--layout takes one of ${LAYOUTS.join(', ')}, got '${l}'`);
      o.layouts.push(l);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (o.layouts.length === 0) o.layouts = [...LAYOUTS];
  return o;
}

interface Result {
  layout: Layout;
  /** ns of CPU a frame: alloc, push, the reader's write, the arena's bookkeeping */
  nsPerFrame: number;
  framesPerSec: number;
  /** bytes of pooled chunks (held by streams + free in the pools), averaged over the second half, and its peak */
  pooledMean: number;
  pooledPeak: number;
  /** of which free (spare) chunks, averaged over the second half */
  freeMean: number;
  /** payload bytes the GOP caches hold (the same in every layout): what the pools cannot go under */
  gopMean: number;
  allocated: number;
  reused: number;
}

async function once(layout: Layout, o: Options): Promise<Result> {
  let now = 1_700_000_000_000;
  const clock = () => now;
  const limits = {
    maxGopBytes: 4096 * KB,
    maxQueueBytes: 2048 * KB,
    maxStreamBytes: 8192 * KB,
    readerDropAfterMs: 60_000,
    reusePayloads: layout !== 'no-reuse',
  };
  // never poisoned (GW_POISON_PAYLOADS, in tests): what production does
  const newBus = () => new CoreMediaBus(limits, quiet, clock, new ChunkPool(clock, undefined, undefined, undefined, false));
  const buses: CoreMediaBus[] = [];
  const shared = layout === 'shared' || layout === 'no-reuse' ? newBus() : undefined;
  const rnd = prng(45);
  const streams: Array<{ pub: Publisher; phase: number }> = [];
  for (let i = 0; i < o.streams; i++) {
    const bus = shared ?? newBus();
    if (!shared || i === 0) buses.push(bus);
    const s = bus.create(`s${i}`, 'bench');
    s.subscribe({ write: () => undefined, holdsPayloads: () => false });
    streams.push({ pub: s.attachPublisher(), phase: o.aligned ? 0 : Math.floor(rnd() * o.gop) });
  }
  await new Promise((r) => setImmediate(r));
  const frames = Math.round((o.seconds * 1000) / FRAME_MS);
  // sizes drawn before the clock starts, so the timed loop does the bus's work only
  const sizes = new Uint32Array(4096);
  for (let i = 0; i < sizes.length; i++) sizes[i] = Math.round((2 + rnd() * 4) * KB);
  const keySizes = new Uint32Array(256);
  for (let i = 0; i < keySizes.length; i++) keySizes[i] = Math.round((24 + rnd() * 16) * KB);
  let pooledSum = 0;
  let freeSum = 0;
  let gopSum = 0;
  let samples = 0;
  let pooledPeak = 0;
  let k = 0;
  // CPU time (user + system, every thread: the collector's work counts), not wall time: the machine may be shared.
  // Read around the whole run, less the samples' own cost: a read costs microseconds, too much to take per frame.
  let sampling = 0;
  const start = process.cpuUsage();
  for (let f = 0; f < frames; f++) {
    now += FRAME_MS;
    for (const st of streams) {
      const key = (f + st.phase) % o.gop === 0;
      const n = key ? keySizes[k & 255] : sizes[k & 4095];
      k++;
      st.pub.push(videoUnit({ codec: 'h264', dts: f * FRAME_MS, keyframe: key, payload: st.pub.alloc(n) }));
    }
    // every 7th frame: a period prime to the GOP, so samples fall on every phase of it (key frames aligned)
    if (f >= frames / 2 && f % 7 === 0) {
      const t0 = process.cpuUsage();
      let held = 0;
      let free = 0;
      let gop = 0;
      for (const b of buses) {
        const p = b.chunks.bytes;
        held += p.held;
        free += p.free;
        for (const s of b.list()) gop += s.heldBytes().gop;
      }
      pooledSum += held + free;
      freeSum += free;
      gopSum += gop;
      samples++;
      if (held + free > pooledPeak) pooledPeak = held + free;
      const d = process.cpuUsage(t0);
      sampling += d.user + d.system;
    }
  }
  const used = process.cpuUsage(start);
  const cpu = used.user + used.system - sampling;
  let allocated = 0;
  let reused = 0;
  for (const b of buses) {
    allocated += b.chunks.counts.allocated;
    reused += b.chunks.counts.reused;
    for (const s of b.list()) s.close('bench over');
  }
  const total = frames * o.streams;
  return {
    layout,
    nsPerFrame: (cpu * 1000) / total,
    framesPerSec: total / (cpu / 1e6),
    pooledMean: pooledSum / samples,
    pooledPeak,
    freeMean: freeSum / samples,
    gopMean: gopSum / samples,
    allocated,
    reused,
  };
}

const mb = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MB`;

export async function run(args: string[]): Promise<void> {
  const o = parse(args);
  const keys = o.aligned ? 'aligned' : 'at random phases';
  process.stdout.write(
    `payload-pools: ${o.streams} streams, ${o.seconds} s of 25 fps, GOP ${o.gop} frames, key frames ${keys}, ` + `${o.rounds} rounds alternated\n`,
  );
  const results: Record<Layout, Result[]> = { shared: [], 'per-stream': [], 'no-reuse': [] };
  const order = o.layouts;
  for (let r = 0; r < o.rounds; r++) {
    for (const layout of r % 2 === 0 ? order : [...order].reverse()) {
      results[layout].push(await once(layout, o));
      (global as { gc?: () => void }).gc?.();
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const layout of order) {
    const rs = results[layout];
    const m = (f: (r: Result) => number) => median(rs.map(f));
    const perFrame = `${m((r) => r.nsPerFrame)
      .toFixed(0)
      .padStart(5)} ns/frame (${(m((r) => r.framesPerSec) / 1e6).toFixed(2)} M frames/s)`;
    process.stdout.write(
      `${layout.padEnd(10)} ${perFrame}` +
        `  pooled ${mb(m((r) => r.pooledMean))} mean, ${mb(m((r) => r.pooledPeak))} peak (${(m((r) => r.pooledMean) / o.streams / KB).toFixed(0)} KiB a stream)` +
        `  free ${mb(m((r) => r.freeMean))}  GOP caches ${mb(m((r) => r.gopMean))}  chunks allocated ${m((r) => r.allocated)}, reused ${m((r) => r.reused)}\n`,
    );
  }
}
