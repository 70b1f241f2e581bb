/**
 * Micro-benchmark: one /metrics scrape of a gateway's registry at N streams (the process metrics, ten per-stream
 * gauge-table columns as jt1078-ingest registers them, a few counters and histograms), made by prom-client's
 * `registry.metrics()` and by `scrapeText` (core/metrics-scrape.ts), alternated. For each: the scrape's wall time, the
 * longest the event loop was held in one go (measured by a chain of setImmediate probes running beside the scrape), the
 * CPU time and the bytes allocated. Then the same for a gateway of two workers with N/2 streams each: the worker that
 * gets the scrape sums both workers' JSON, by prom-client's `AggregatorRegistry.aggregate(...).metrics()` and by
 * `aggregateText`. `npm run bench -- metrics-scrape [--streams N] [--rounds K]`.
 */
import { performance } from 'node:perf_hooks';
import * as v8 from 'node:v8';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { createRegistry, metricsFor } from '../../core/metrics';
import { aggregateText, scrapeJson, scrapeText } from '../../core/metrics-scrape';
import { BenchArgs } from './support/bench-args';

const USAGE = 'usage: npm run bench -- metrics-scrape [--streams N] [--rounds K]';

interface Sample {
  wallMs: number;
  longestMs: number;
  cpuMs: number;
  allocatedMb: number;
  bytes: number;
}

function gatewayLikeRegistry(streams: number, first = 0): Registry {
  const registry = createRegistry();
  const m = metricsFor(registry, 'jt1078-ingest');
  const rows = Array.from({ length: streams }, (_, i) => ({
    labels: { stream: `0139${String(first + i).padStart(8, '0')}/1`, layout: '2016', transport: 'tcp' },
    counts: new Float64Array(10),
  }));
  const columns = Array.from({ length: 10 }, (_, i) => ({ name: `stream_column_${i}`, help: `per-stream column ${i}` }));
  m.gaugeTable(columns, ['stream', 'layout', 'transport'], (emit) => {
    // the values move between scrapes, as a live stream's counters do
    for (const r of rows) {
      r.counts[0] += 139;
      r.counts[1] += 24;
      emit(r.labels, Array.from(r.counts));
    }
  });
  const flv = metricsFor(registry, 'flv-out');
  flv.hotCounter('tags_total', 'tags', ['type']).child({ type: 'video' }).add(1);
  flv.hotHistogram('added_latency_seconds', 'latency', [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1]).observe(0.001);
  metricsFor(registry, 'core').counter('http_requests_total', 'requests', ['route', 'code']).inc({ route: '/strm/open', code: '200' });
  return registry;
}

/** one scrape, with a setImmediate chain beside it whose largest gap is how long the loop was held at once */
async function measure(scrape: () => Promise<string>): Promise<Sample> {
  let last = performance.now();
  let longest = 0;
  let probing = true;
  const probe = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (probing) setImmediate(probe);
  };
  setImmediate(probe);
  await new Promise((r) => setImmediate(r));
  const heap0 = process.memoryUsage().heapUsed;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  last = t0;
  longest = 0;
  const text = await scrape();
  const wallMs = performance.now() - t0;
  longest = Math.max(longest, performance.now() - last);
  const cpu = process.cpuUsage(cpu0);
  const allocated = process.memoryUsage().heapUsed - heap0;
  probing = false;
  return { wallMs, longestMs: longest, cpuMs: (cpu.user + cpu.system) / 1000, allocatedMb: Math.max(0, allocated) / 1048576, bytes: text.length };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** The bench dispatcher's entry (test/bench/run.ts). */
export async function run(args: string[]): Promise<void> {
  const o = { streams: 1000, rounds: 15 };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--streams':
        o.streams = r.num(a, 1, 100_000, true);
        break;
      case '--rounds':
        o.rounds = r.num(a, 1, 1000, true);
        break;
      default:
        r.unknown(a);
    }
  }
  const registry = gatewayLikeRegistry(o.streams);
  const half = Math.floor(o.streams / 2);
  const workers = [gatewayLikeRegistry(half), gatewayLikeRegistry(o.streams - half, half)];
  // what arrives from the workers over the cluster's IPC (advanced serialisation: V8's structured clone): prom-client's
  // JSON for its aggregator, scrapeJson's (gauge-table columns compact) for aggregateText; each scrape sums a fresh copy,
  // deserialised before it is timed (the IPC's part, measured apart below)
  const theirWire = v8.serialize(await Promise.all(workers.map((w) => w.getMetricsAsJSON())));
  const ourWire = v8.serialize(await Promise.all(workers.map((w) => scrapeJson(w))));
  let theirParts: Awaited<ReturnType<Registry['getMetricsAsJSON']>>[] = [];
  let ourParts: Awaited<ReturnType<typeof scrapeJson>>[] = [];
  const prepare = () => {
    theirParts = v8.deserialize(theirWire) as typeof theirParts;
    ourParts = v8.deserialize(ourWire) as typeof ourParts;
  };
  const ways: Array<[string, () => Promise<string>]> = [
    ["prom-client's registry.metrics()", () => registry.metrics()],
    ['scrapeText (2 ms slices)', () => scrapeText(registry)],
    ['2 workers: AggregatorRegistry', () => AggregatorRegistry.aggregate(theirParts).metrics()],
    ['2 workers: aggregateText', () => aggregateText(ourParts)],
  ];
  // warm-up: the JIT and the first-scrape costs of both ways
  for (const [, f] of ways)
    for (let i = 0; i < 3; i++) {
      prepare();
      await f();
    }
  const samples: Sample[][] = ways.map(() => []);
  for (let round = 0; round < o.rounds; round++) {
    for (let w = 0; w < ways.length; w++) {
      // old and new alternate within each pair of ways, the first of the pair first on even rounds
      const i = round % 2 === 0 ? w : w ^ 1;
      prepare();
      samples[i].push(await measure(ways[i][1]));
      await new Promise((res) => setTimeout(res, 20));
    }
  }
  console.log(`metrics-scrape: ${o.streams} streams, ${o.rounds} scrapes each way, alternated; medians (max)`);
  for (let w = 0; w < ways.length; w++) {
    const s = samples[w];
    const col = (f: (x: Sample) => number, d = 1) => `${median(s.map(f)).toFixed(d)} (${Math.max(...s.map(f)).toFixed(d)})`;
    console.log(
      `  ${ways[w][0].padEnd(34)} wall ${col((x) => x.wallMs)} ms, loop held at most ${col((x) => x.longestMs)} ms, CPU ${col((x) => x.cpuMs)} ms, heap grew ${col((x) => x.allocatedMb)} MB, ${s[0].bytes} bytes`,
    );
  }
  const held = samples.map((s) => median(s.map((x) => x.longestMs)));
  const cpu = samples.map((s) => median(s.map((x) => x.cpuMs)));
  // the IPC's part: a worker's reply serialised, and deserialised where it arrives (the primary, which relays it, does both)
  const ipc = (make: () => Promise<unknown>) => async () => {
    const msg = await make();
    const t0 = performance.now();
    const wire = v8.serialize(msg);
    const t1 = performance.now();
    v8.deserialize(wire);
    return { bytes: wire.length, serialiseMs: t1 - t0, deserialiseMs: performance.now() - t1 };
  };
  for (const [what, make] of [
    ['prom-client JSON', () => workers[0].getMetricsAsJSON()],
    ['scrapeJson (compact columns)', () => scrapeJson(workers[0])],
  ] as const) {
    const runs = [];
    for (let i = 0; i < 7; i++) runs.push(await ipc(make)());
    console.log(
      `  one worker's reply (${half} streams) as ${what.padEnd(28)} ${(runs[0].bytes / 1024).toFixed(0)} KiB, serialise ${median(runs.map((r) => r.serialiseMs)).toFixed(1)} ms, deserialise ${median(runs.map((r) => r.deserialiseMs)).toFixed(1)} ms (medians of 7)`,
    );
  }
  for (const [at, what] of [
    [0, 'one process'],
    [2, 'two workers'],
  ] as const) {
    console.log(`  ${what}: longest hold, old / new: ${(held[at] / held[at + 1]).toFixed(1)}x; CPU a scrape, new / old: ${(cpu[at + 1] / cpu[at]).toFixed(2)}`);
  }
}
