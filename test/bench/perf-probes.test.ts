import assert from 'node:assert/strict';
import { parseArgs as parseFanout } from './fanout';
import { parseArgs as parseOpenLatency } from './open-latency';
import {
  LatencyHistogram,
  ProbeScheduler,
  checkFrames,
  firstAtOrAfter,
  indexSent,
  monotonicMs,
  perfToMonotonic,
  representativeStart,
  summarise,
  windowLoad,
  type CpuSnap,
  type ReadFrames,
  type SentFrames,
} from './support/perf-probes';
import { BENCHES } from './run';

describe('bench perf probes: summarise', () => {
  it('gives nearest-rank p50 and p99, max and mean of unsorted samples', () => {
    const v = Array.from({ length: 200 }, (_x, i) => 200 - i); // 200 .. 1, reversed
    const s = summarise(v);
    assert.equal(s.count, 200);
    assert.equal(s.p50, 100);
    assert.equal(s.p99, 198);
    assert.equal(s.max, 200);
    assert.equal(s.mean, 100.5);
  });

  it('answers NaN figures for no samples', () => {
    const s = summarise([]);
    assert.equal(s.count, 0);
    assert.ok(Number.isNaN(s.p50) && Number.isNaN(s.p99) && Number.isNaN(s.max));
  });
});

describe('bench perf probes: LatencyHistogram', () => {
  it('answers quantiles within 1 % of the exact ones over six decades', () => {
    const h = new LatencyHistogram();
    const values: number[] = [];
    // deterministic spread from 0.02 ms to 20 s
    for (let i = 0; i < 5000; i++) values.push(0.02 * 10 ** ((((i * 7919) % 5000) / 5000) * 6));
    for (const v of values) h.add(v);
    const exact = summarise(values);
    for (const [q, want] of [
      [0.5, exact.p50],
      [0.99, exact.p99],
    ] as const) {
      const got = h.quantile(q);
      assert.ok(Math.abs(got - want) / want < 0.01, `q ${q}: ${got} vs ${want}`);
    }
    assert.equal(h.max, exact.max);
    assert.equal(h.count, 5000);
  });

  it('never answers more than the largest sample, and puts tiny and negative values in the first bucket', () => {
    const h = new LatencyHistogram(0.01, 1000);
    h.add(5);
    const q = h.quantile(0.5);
    assert.ok(q <= 5 && q > 5 / 1.01, `${q}`);
    h.add(-0.3);
    h.add(0.001);
    assert.equal(h.negative, 1);
    assert.equal(h.counts[0], 2);
    assert.equal(h.quantile(0.5), 0.005); // rank 2 of 3 falls in bucket 0: minMs / 2
    h.add(1e9); // past maxMs: the last bucket
    assert.equal(h.counts[h.counts.length - 1], 1);
    assert.ok(Number.isNaN(new LatencyHistogram().quantile(0.5)));
  });

  it('merges, and survives JSON, as if every sample had gone into one', () => {
    const a = new LatencyHistogram();
    const b = new LatencyHistogram();
    const all = new LatencyHistogram();
    for (let i = 1; i <= 300; i++) {
      const v = ((i * 37) % 101) + 0.5;
      (i % 3 === 0 ? a : b).add(v);
      all.add(v);
    }
    const merged = LatencyHistogram.fromJSON(JSON.parse(JSON.stringify(a)));
    merged.merge(LatencyHistogram.fromJSON(JSON.parse(JSON.stringify(b))));
    assert.deepEqual(Array.from(merged.counts), Array.from(all.counts));
    assert.equal(merged.count, 300);
    assert.equal(merged.max, all.max);
    for (const q of [0.1, 0.5, 0.9, 0.99]) assert.equal(merged.quantile(q), all.quantile(q));
    // an empty one crosses JSON too (its max is -Infinity, which JSON writes as null)
    const empty = LatencyHistogram.fromJSON(JSON.parse(JSON.stringify(new LatencyHistogram())));
    assert.equal(empty.count, 0);
    assert.throws(() => merged.merge(new LatencyHistogram(0.1)), /different buckets/);
  });
});

describe('bench perf probes: ProbeScheduler', () => {
  it('hands out probes at the steady rate, only those due before the end', () => {
    const s = new ProbeScheduler(20, 1000, 1200);
    assert.equal(s.total, 4); // due at 1000, 1050, 1100, 1150
    assert.deepEqual(s.take(999, 0), []);
    assert.deepEqual(
      s.take(1000, 0).map((p) => [p.index, p.dueAt, p.lateMs]),
      [[0, 1000, 0]],
    );
    assert.equal(s.nextDueAt(), 1050);
    assert.deepEqual(s.take(1049.9, 0), []);
    assert.equal(s.done, false);
  });

  it('catches up after a late timer instead of lowering the rate, and says how late each started', () => {
    const s = new ProbeScheduler(10, 0, 1000);
    const got = s.take(250, 0);
    assert.deepEqual(
      got.map((p) => p.index),
      [0, 1, 2],
    );
    assert.deepEqual(
      got.map((p) => p.lateMs),
      [250, 150, 50],
    );
    assert.deepEqual(
      s.take(10_000, 0).map((p) => p.index),
      [3, 4, 5, 6, 7, 8, 9],
    );
    assert.equal(s.done, true);
    assert.equal(s.nextDueAt(), Infinity);
    assert.deepEqual(s.take(20_000, 0), []);
  });

  it('skips, and counts, probes past the in-flight cap instead of queueing them', () => {
    const s = new ProbeScheduler(100, 0, 100, 3);
    // 2 still running: one more may start, the other due ones are skipped
    assert.deepEqual(
      s.take(35, 2).map((p) => p.index),
      [0],
    );
    assert.equal(s.skipped, 3);
    // the skipped ones are gone for good: the next take starts at the next due probe
    assert.deepEqual(
      s.take(45, 0).map((p) => p.index),
      [4],
    );
    assert.equal(s.skipped, 3);
  });

  it('refuses a rate that is not a positive number', () => {
    assert.throws(() => new ProbeScheduler(0, 0, 1000), RangeError);
    assert.throws(() => new ProbeScheduler(Number.NaN, 0, 1000), RangeError);
    assert.throws(() => new ProbeScheduler(5, 0, 1000, 0), RangeError);
  });
});

describe('bench perf probes: checkFrames', () => {
  // ten frames 40 ms apart, sent at 1000 + ts, key frames at 0 and 200
  const sent: SentFrames = {
    ts: Array.from({ length: 10 }, (_x, i) => i * 40),
    at: Array.from({ length: 10 }, (_x, i) => 1000 + i * 40),
    key: Array.from({ length: 10 }, (_x, i) => i % 5 === 0),
  };
  const index = indexSent(sent);
  const read = (idx: number[], lag = 3, keyOverride?: Map<number, boolean>): ReadFrames => ({
    count: idx.length,
    ts: idx.map((i) => (i < 0 ? 12345 : i * 40)),
    at: idx.map((i) => 1000 + i * 40 + lag),
    key: idx.map((i) => keyOverride?.get(i) ?? (i >= 0 && i % 5 === 0)),
  });

  it('passes a player that read every frame of the range once, in order, and gives each frame its lag', () => {
    const lags: number[] = [];
    const c = checkFrames(sent, index, 2, 8, read([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 7), (ms) => lags.push(ms));
    assert.deepEqual(c, { frames: 7, keyframes: 1, missing: 0, duplicates: 0, unknown: 0, keyMismatch: 0 });
    assert.deepEqual(lags, [7, 7, 7, 7, 7, 7, 7]); // frames outside [2, 8] add no lag
  });

  it('counts frames missing inside the range, at its end too (a player left behind)', () => {
    const c = checkFrames(sent, index, 0, 9, read([0, 1, 4, 5, 6]));
    assert.equal(c.frames, 5);
    assert.equal(c.missing, 5); // 2, 3 (a skip) and 7, 8, 9 (never arrived)
    assert.equal(c.keyframes, 2);
  });

  it('counts a frame read twice or after a later one, and timestamps never sent', () => {
    const c = checkFrames(sent, index, 0, 9, read([0, 1, 2, 2, 1, 3, -1, 4, 5, 6, 7, 8, 9]));
    assert.equal(c.duplicates, 2);
    assert.equal(c.unknown, 1);
    assert.equal(c.missing, 0);
    assert.equal(c.frames, 10);
  });

  it('notices a key flag that differs from what the terminal sent', () => {
    const c = checkFrames(
      sent,
      index,
      0,
      9,
      read(
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        3,
        new Map([
          [5, false],
          [6, true],
        ]),
      ),
    );
    assert.equal(c.keyMismatch, 2);
    assert.equal(c.keyframes, 2); // 0 and 6 as the player saw them
  });

  it('treats an empty range as nothing to miss', () => {
    const c = checkFrames(sent, index, 5, 4, read([]));
    assert.equal(c.missing, 0);
    assert.equal(c.frames, 0);
  });

  it('firstAtOrAfter finds the window edges in ascending send times', () => {
    assert.equal(firstAtOrAfter(sent.at, 0), 0);
    assert.equal(firstAtOrAfter(sent.at, 1040), 1);
    assert.equal(firstAtOrAfter(sent.at, 1041), 2);
    assert.equal(firstAtOrAfter(sent.at, 99_999), 10);
    assert.equal(firstAtOrAfter([], 5), 0);
  });
});

describe('bench perf probes: perfToMonotonic', () => {
  it('maps performance.now() onto the system-wide monotonic clock, the same offset each time it is taken', () => {
    const offsets = Array.from({ length: 20 }, () => perfToMonotonic());
    const spread = Math.max(...offsets) - Math.min(...offsets);
    assert.ok(spread < 0.1, `offsets taken apart agree within 0.1 ms (spread ${spread.toFixed(4)} ms)`);
    const before = monotonicMs();
    const mapped = performance.now() + offsets[0];
    const after = monotonicMs();
    assert.ok(mapped >= before - 0.1 && mapped <= after + 0.1, `${mapped} within [${before}, ${after}]`);
  });
});

describe('bench perf probes: representativeStart', () => {
  // a 10 s loop of 10 frames a second: 100 bytes each for 5 s, then 300 bytes each (average 2 bytes per ms)
  const frames = Array.from({ length: 100 }, (_x, i) => ({ t: i * 100, bytes: i < 50 ? 100 : 300 }));
  const everySecond = Array.from({ length: 10 }, (_x, k) => k * 10);

  it('picks the start point whose window carries the average rate', () => {
    // [3000, 7000): 20 light + 20 heavy frames = 2.0 bytes/ms; earlier starts are lighter, later ones heavier
    assert.equal(representativeStart(frames, 10_000, everySecond, 0, 4000), 30);
    // the same window reached from a start one second earlier
    assert.equal(representativeStart(frames, 10_000, everySecond, 1000, 4000), 20);
  });

  it('follows the loop round its end', () => {
    // from 7000: 30 heavy + 10 light (2.5); from 8000: 20 heavy, then 20 light of the next pass (2.0)
    assert.equal(representativeStart(frames, 10_000, [70, 80], 0, 4000), 80);
    // a window longer than the loop: whole passes plus the rest
    assert.equal(representativeStart(frames, 10_000, [0, 30, 50], 0, 24_000), 30);
    assert.throws(() => representativeStart(frames, 10_000, [], 0, 1000), RangeError);
  });
});

describe('bench perf probes: windowLoad', () => {
  it('splits the machine CPU into the gateway, the bench, interrupts and everyone else', () => {
    const s0: CpuSnap = {
      at: 0,
      gateway: 10,
      bench: 5,
      cores: [
        { busy: 100, irq: 1, total: 1000 },
        { busy: 200, irq: 2, total: 1000 },
      ],
    };
    // 10 s: core 0 busy 6 s, core 1 busy 5 s; interrupts 0.5 s; gateway 5 s, bench 4 s -> others 1.5 s
    const s1: CpuSnap = {
      at: 10_000,
      gateway: 15,
      bench: 9,
      cores: [
        { busy: 106, irq: 1.3, total: 1010 },
        { busy: 205, irq: 2.2, total: 1010 },
      ],
    };
    const l = windowLoad(s0, s1);
    assert.equal(l.seconds, 10);
    assert.equal(l.gatewayPct, 50);
    assert.equal(l.benchPct, 40);
    assert.ok(Math.abs(l.irqCores - 0.05) < 1e-9);
    assert.ok(Math.abs(l.othersCores - 0.15) < 1e-9);
    assert.deepEqual(
      l.coreBusyPct.map((p) => Math.round(p)),
      [60, 50],
    );
    assert.deepEqual(
      l.coreIrqPct.map((p) => Math.round(p)),
      [3, 2],
    );
  });
});

describe('bench perf probes: the fanout and open-latency benches', () => {
  it('are registered and parse their arguments', () => {
    assert.ok('fanout' in BENCHES && 'open-latency' in BENCHES);
    const f = parseFanout([]);
    assert.equal(f.players, 2000);
    assert.equal(f.ws, false);
    const w = parseFanout(['--players', '50', '--ws', '--procs', '3', '--seconds', '7']);
    assert.deepEqual([w.players, w.ws, w.procs, w.seconds], [50, true, 3, 7]);
    assert.throws(() => parseFanout(['--players', 'lots']), /--players needs a whole number/);
    assert.throws(() => parseFanout(['--bogus']), /unknown argument/);
    assert.deepEqual([f.floor, f.vsFloor], [false, 0]);
    const fl = parseFanout(['--vs-floor', '3']);
    assert.deepEqual([fl.floor, fl.vsFloor], [false, 3]);
    assert.equal(parseFanout(['--floor']).floor, true);
    assert.throws(() => parseFanout(['--floor', '--vs-floor', '2']), /one or the other/);
    assert.throws(() => parseFanout(['--ws', '--floor']), /the floor serves HTTP-FLV only/);
    assert.throws(() => parseFanout(['--vs-floor', '2', '--ws']), /the floor serves HTTP-FLV only/);
    const o = parseOpenLatency([]);
    assert.deepEqual([o.terminals, o.rate, o.busyClient], [1000, 20, true]);
    const p = parseOpenLatency(['--terminals', '20', '--rate', '5', '--baseline-seconds', '0', '--idle-client']);
    assert.deepEqual([p.terminals, p.rate, p.baselineSeconds, p.busyClient], [20, 5, 0, false]);
    assert.throws(() => parseOpenLatency(['--rate', '0']), /--rate needs a number/);
  });
});
