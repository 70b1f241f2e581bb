/**
 * Micro-benchmark of issue 47's audio steps on the main thread, in one process with no sockets and no bus
 * (support/audio-path-rig.ts): G.711A frames through the ingest's normaliser, then the AAC stage (held frames, frame
 * lane, AAC units made of a stand-in worker's answers), then the FLV form and a player's copy of it. For each depth,
 * ns per frame (wall time of a busy loop) and bytes per frame allocated on the JS heap (a child process with a new
 * space large enough that no collection runs in the window: `used` after minus before).
 *
 *   node dist/test/bench/run.js audio-path [--streams 250] [--seconds 3]
 *
 * What it leaves out: socket reads, parsing, the reassembler, the bus (fan-out, readers, the GOP cache), the
 * worker's own work and the message crossing; ingest-flv --profile measures those in the real gateway.
 */
import { spawnSync } from 'node:child_process';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import * as v8 from 'node:v8';
import { AudioPathRig, type RigOptions } from './support/audio-path-rig';

const DEPTHS: ReadonlyArray<RigOptions['to']> = ['normaliser', 'stage', 'flv'];

interface Options {
  streams: number;
  seconds: number;
}

function parse(args: string[]): Options {
  const o: Options = { streams: 250, seconds: 3 };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const v = Number(args[++i]);
    if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} takes a positive number, got '${args[i]}'`);
    if (a === '--streams') o.streams = Math.round(v);
    else if (a === '--seconds') o.seconds = v;
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

/** ns per frame through `to`, after a warm-up of a third of the time */
async function timed(to: RigOptions['to'], o: Options): Promise<number> {
  const rig = new AudioPathRig({ streams: o.streams, to });
  const passes = async (seconds: number): Promise<{ ms: number; frames: number }> => {
    const t0 = performance.now();
    const f0 = rig.counts.frames;
    while (performance.now() - t0 < seconds * 1000) await rig.push(20);
    return { ms: performance.now() - t0, frames: rig.counts.frames - f0 };
  };
  await passes(o.seconds / 3);
  const r = await passes(o.seconds);
  rig.stop();
  return (r.ms * 1e6) / r.frames;
}

/** In a child with a large new space: JS heap bytes allocated per frame through `to`, or NaN when a collection ran. */
export async function allocatedPerFrame(to: RigOptions['to'], streams: number, passes: number): Promise<number> {
  const rig = new AudioPathRig({ streams, to });
  await rig.push(400);
  (globalThis as { gc?: () => void }).gc?.();
  let collections = 0;
  const obs = new PerformanceObserver((list) => (collections += list.getEntries().length));
  obs.observe({ entryTypes: ['gc'] });
  const newSpace = (): number => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_used_size;
  const f0 = rig.counts.frames;
  const before = newSpace();
  await rig.push(passes);
  const after = newSpace();
  const frames = rig.counts.frames - f0;
  await new Promise((r) => setTimeout(r, 10));
  obs.disconnect();
  rig.stop();
  return collections > 0 ? NaN : (after - before) / frames;
}

function allocInChild(streams: number): Record<string, number | null> {
  const r = spawnSync(process.execPath, ['--expose-gc', '--min-semi-space-size=64', '--max-semi-space-size=64', __filename, '--child-alloc', String(streams)], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`allocation child failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, number | null>;
}

export async function run(args: string[]): Promise<void> {
  const o = parse(args);
  const alloc = allocInChild(50);
  process.stdout.write(`audio-path: ${o.streams} streams of 20 ms G.711A frames, one frame of each per loop pass, ${o.seconds} s each\n`);
  process.stdout.write('| to | ns per frame | JS heap bytes per frame |\n|---|---|---|\n');
  for (const to of DEPTHS) {
    const ns = await timed(to, o);
    // (JSON has no NaN: a window with a collection comes back as null)
    const bytes = alloc[to] ?? NaN;
    process.stdout.write(`| ${to} | ${ns.toFixed(0)} | ${Number.isNaN(bytes) ? 'n/a (a collection ran)' : bytes.toFixed(0)} |\n`);
  }
}

if (require.main === module && process.argv[2] === '--child-alloc') {
  const streams = Number(process.argv[3]);
  void (async () => {
    const out: Record<string, number> = {};
    for (const to of DEPTHS) out[to] = await allocatedPerFrame(to, streams, 200);
    process.stdout.write(JSON.stringify(out));
  })();
}
