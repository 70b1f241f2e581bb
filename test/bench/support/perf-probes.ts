/**
 * Pure pieces of the fan-out and open-latency benchmarks, kept apart from sockets and processes so
 * they can be unit tested (test/bench/perf-probes.test.ts):
 * - `LatencyHistogram`: a mergeable log-bucket histogram (1 % wide buckets), so player processes can send their
 *   latency distributions to the bench process without sending every sample;
 * - `summarise`: count, p50, p99, max and mean of raw samples;
 * - `ProbeScheduler`: an open-loop, steady-rate schedule (probe i is due at start + i / rate), catching up on
 *   probes a late timer missed and skipping those that would exceed the in-flight cap, so a slow server shows up
 *   as latency, not as a lower rate;
 * - `checkFrames`: whether one player got every video frame the terminal sent in a window, in order, once;
 * - `windowLoad`: CPU shares from two snapshots of /proc (the gateway's, ours, the rest of the machine).
 */
import { quantile } from './process-probe';

// ------------------------------------------------------------------------------------------------------------
// latency distributions

export interface Summary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** count, exact p50/p99 (nearest rank), max and mean of raw samples; NaN figures when there are none */
export function summarise(samples: ArrayLike<number>): Summary {
  const n = samples.length;
  if (n === 0) return { count: 0, p50: NaN, p99: NaN, max: NaN, mean: NaN };
  let max = -Infinity;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const v = samples[i];
    if (v > max) max = v;
    sum += v;
  }
  const arr = Float64Array.from(samples as ArrayLike<number>);
  return { count: n, p50: quantile(arr, 0.5), p99: quantile(arr, 0.99), max, mean: sum / n };
}

/**
 * Latencies in ms in buckets 1 % wide from `minMs` up (everything below `minMs` in bucket 0, everything past the
 * last bucket in the last). A quantile answers its bucket's geometric middle, so within ~0.5 % of the truth above
 * `minMs`. Histograms with the same bounds merge by adding counts (`merge`, `toJSON`/`fromCounts`).
 */
export class LatencyHistogram {
  static readonly GROWTH = 1.01;
  readonly counts: Float64Array;
  count = 0;
  max = -Infinity;
  /** samples below 0 (clocks of two processes disagreeing); they are counted in bucket 0 */
  negative = 0;
  private readonly logGrowth = Math.log(LatencyHistogram.GROWTH);

  constructor(
    readonly minMs = 0.01,
    readonly maxMs = 120_000,
  ) {
    if (!(minMs > 0) || !(maxMs > minMs)) throw new RangeError('need 0 < minMs < maxMs');
    this.counts = new Float64Array(Math.ceil(Math.log(maxMs / minMs) / this.logGrowth) + 2);
  }

  /** bucket of a value: 0 for <= minMs, then floor(log_1.01(v / minMs)) + 1, capped at the last */
  bucketOf(v: number): number {
    if (!(v > this.minMs)) return 0;
    const b = Math.floor(Math.log(v / this.minMs) / this.logGrowth) + 1;
    return Math.min(this.counts.length - 1, b);
  }

  /** lower and upper bound of bucket b */
  bounds(b: number): [number, number] {
    if (b <= 0) return [0, this.minMs];
    return [this.minMs * LatencyHistogram.GROWTH ** (b - 1), this.minMs * LatencyHistogram.GROWTH ** b];
  }

  add(v: number): void {
    if (v < 0) this.negative++;
    this.counts[this.bucketOf(v)]++;
    this.count++;
    if (v > this.max) this.max = v;
  }

  /** the q-quantile (nearest rank), as its bucket's geometric middle (bucket 0: minMs / 2); NaN when empty */
  quantile(q: number): number {
    if (this.count === 0) return NaN;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let b = 0; b < this.counts.length; b++) {
      seen += this.counts[b];
      if (seen >= rank) {
        if (b === 0) return this.minMs / 2;
        const [lo, hi] = this.bounds(b);
        // never answer more than the largest sample seen
        return Math.min(Math.sqrt(lo * hi), this.max);
      }
    }
    return this.max;
  }

  merge(other: LatencyHistogram): void {
    if (other.counts.length !== this.counts.length || other.minMs !== this.minMs) throw new RangeError('histograms with different buckets');
    for (let b = 0; b < this.counts.length; b++) this.counts[b] += other.counts[b];
    this.count += other.count;
    this.negative += other.negative;
    if (other.max > this.max) this.max = other.max;
  }

  /** what crosses a process boundary: the non-empty buckets only */
  toJSON(): { minMs: number; maxMs: number; buckets: Array<[number, number]>; count: number; max: number; negative: number } {
    const buckets: Array<[number, number]> = [];
    for (let b = 0; b < this.counts.length; b++) if (this.counts[b] > 0) buckets.push([b, this.counts[b]]);
    return { minMs: this.minMs, maxMs: this.maxMs, buckets, count: this.count, max: this.max, negative: this.negative };
  }

  static fromJSON(j: ReturnType<LatencyHistogram['toJSON']>): LatencyHistogram {
    const h = new LatencyHistogram(j.minMs, j.maxMs);
    for (const [b, c] of j.buckets) h.counts[b] = c;
    h.count = j.count;
    h.max = j.count > 0 ? j.max : -Infinity;
    h.negative = j.negative;
    return h;
  }
}

// ------------------------------------------------------------------------------------------------------------
// steady-rate probes

export interface ProbeStart {
  /** the probe's number from 0 */
  index: number;
  /** when it was due (the caller's clock, ms) */
  dueAt: number;
  /** how late it starts: now - dueAt (>= 0) */
  lateMs: number;
}

/**
 * Probe i is due at `startAt + i * 1000 / rate`; probes due at or after `endAt` are never started. `take(now,
 * inFlight)` hands out every probe due by `now` that has not been handed out (a late timer catches up rather than
 * lowering the rate), except that when `inFlight` plus those started reaches `maxInFlight` the rest of the due
 * ones are skipped and counted (`skipped`): a probe never waits for an earlier one, so the server's latency cannot
 * slow the probe's rate down (no coordinated omission).
 */
export class ProbeScheduler {
  readonly intervalMs: number;
  private next = 0;
  skipped = 0;

  constructor(
    readonly rate: number,
    readonly startAt: number,
    readonly endAt: number,
    readonly maxInFlight = 50,
  ) {
    if (!(rate > 0) || !Number.isFinite(rate)) throw new RangeError(`rate must be a positive number, got ${rate}`);
    if (!(maxInFlight >= 1)) throw new RangeError('maxInFlight must be at least 1');
    this.intervalMs = 1000 / rate;
  }

  dueAt(i: number): number {
    return this.startAt + i * this.intervalMs;
  }

  /** probes that will ever be due: those due before endAt */
  get total(): number {
    return Math.max(0, Math.ceil((this.endAt - this.startAt) / this.intervalMs));
  }

  /** every probe handed out or skipped */
  get done(): boolean {
    return this.next >= this.total;
  }

  /** when the next probe not yet handed out is due (Infinity when done) */
  nextDueAt(): number {
    return this.done ? Infinity : this.dueAt(this.next);
  }

  take(now: number, inFlight: number): ProbeStart[] {
    const out: ProbeStart[] = [];
    const total = this.total;
    while (this.next < total && this.dueAt(this.next) <= now) {
      const i = this.next++;
      if (inFlight + out.length >= this.maxInFlight) {
        this.skipped++;
        continue;
      }
      out.push({ index: i, dueAt: this.dueAt(i), lateMs: Math.max(0, now - this.dueAt(i)) });
    }
    return out;
  }
}

// ------------------------------------------------------------------------------------------------------------
// every frame to every player

/** The video frames a terminal sent, in order: media time (the FLV timestamp players see) and send time. */
export interface SentFrames {
  ts: ArrayLike<number>;
  /** send time, on the clock the players' read times use (ms) */
  at: ArrayLike<number>;
  key: ArrayLike<boolean>;
}

/** What one player read in the window: video frames (sequence headers left out) in the order read. */
export interface ReadFrames {
  count: number;
  ts: ArrayLike<number>;
  /** read time, same clock as SentFrames.at (ms) */
  at: ArrayLike<number>;
  /** the player's own view: the FLV tag said key frame */
  key: ArrayLike<boolean>;
}

export interface FrameCheck {
  /** frames read whose sent index is in [from, to] */
  frames: number;
  keyframes: number;
  /** frames in [from, to] the player never read */
  missing: number;
  /** frames read again, or read after a later one */
  duplicates: number;
  /** frames read whose timestamp the terminal never sent (or sent before the record starts) */
  unknown: number;
  /** frames whose key flag differs between the FLV tag and what the terminal sent */
  keyMismatch: number;
}

/** ts -> index in the sent list (timestamps rise strictly, so each is unique) */
export function indexSent(sent: SentFrames): Map<number, number> {
  const m = new Map<number, number>();
  for (let i = 0; i < sent.ts.length; i++) m.set(sent.ts[i], i);
  return m;
}

/**
 * Checks a player's frames against the sent ones over sent indexes [from, to] (both included): every frame there
 * must be read once, in order. Frames read outside the range are ignored (the window's edges); each frame in it
 * read for the first time adds its latency (read - sent) to `latency`.
 */
export function checkFrames(
  sent: SentFrames,
  index: Map<number, number>,
  from: number,
  to: number,
  read: ReadFrames,
  latency?: (ms: number) => void,
): FrameCheck {
  const r: FrameCheck = { frames: 0, keyframes: 0, missing: 0, duplicates: 0, unknown: 0, keyMismatch: 0 };
  const want = Math.max(0, to - from + 1);
  const got = new Uint8Array(want);
  let last = -1;
  for (let k = 0; k < read.count; k++) {
    const i = index.get(read.ts[k]);
    if (i === undefined) {
      r.unknown++;
      continue;
    }
    if (i <= last) {
      r.duplicates++;
      continue;
    }
    last = i;
    if (i < from || i > to) continue;
    got[i - from] = 1;
    r.frames++;
    if (read.key[k]) r.keyframes++;
    if (read.key[k] !== sent.key[i]) r.keyMismatch++;
    latency?.(read.at[k] - sent.at[i]);
  }
  for (let j = 0; j < want; j++) if (got[j] === 0) r.missing++;
  return r;
}

/** the first index whose time is >= t, or the length when none (times ascending) */
export function firstAtOrAfter(times: ArrayLike<number>, t: number): number {
  let lo = 0;
  let hi = times.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Where one terminal should start so that a window opening `leadMs` later and lasting `spanMs` carries the
 * stream's average rate: the index (into `frames`) of the start point among `starts` whose window's bytes per
 * second come closest to the whole loop's. A capture's rate wanders (glaciall's first 40 s run ~12 % under its
 * average), which many terminals starting at different points average out and one terminal does not.
 */
export function representativeStart(
  frames: ArrayLike<{ t: number; bytes: number }>,
  loopMs: number,
  starts: ArrayLike<number>,
  leadMs: number,
  spanMs: number,
): number {
  if (starts.length === 0) throw new RangeError('no start point');
  const n = frames.length;
  const prefix = new Float64Array(n + 1); // bytes of frames[0 .. i-1]
  for (let i = 0; i < n; i++) prefix[i + 1] = prefix[i] + frames[i].bytes;
  const loopBytes = prefix[n];
  // bytes of frames due before media time x on the looped timeline (x >= 0)
  const cum = (x: number): number => {
    const loops = Math.floor(x / loopMs);
    const y = x - loops * loopMs;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (frames[mid].t < y) lo = mid + 1;
      else hi = mid;
    }
    return loops * loopBytes + prefix[lo];
  };
  const target = loopBytes / loopMs;
  let best = starts[0];
  let bestErr = Infinity;
  for (let k = 0; k < starts.length; k++) {
    const a = frames[starts[k]].t + leadMs;
    const err = Math.abs((cum(a + spanMs) - cum(a)) / spanMs - target);
    if (err < bestErr) {
      bestErr = err;
      best = starts[k];
    }
  }
  return best;
}

// ------------------------------------------------------------------------------------------------------------
// who used the CPU in a window

export interface CpuSnap {
  /** performance.now() */
  at: number;
  /** the gateway's CPU seconds (all its threads, all its processes) */
  gateway: number;
  /** this bench's own processes' CPU seconds (this process and its children) */
  bench: number;
  /** per core since boot: busy (not idle, not iowait), interrupts, total (seconds) */
  cores: Array<{ busy: number; irq: number; total: number }>;
}

export interface WindowLoad {
  seconds: number;
  /** % of one core */
  gatewayPct: number;
  benchPct: number;
  /** CPU other processes used, in cores (the gateway, the bench and interrupts left out); a disturbed run when high */
  othersCores: number;
  /** interrupt time, in cores (loopback TCP delivery is charged here, to no process) */
  irqCores: number;
  /** each core's busy %, interrupts included */
  coreBusyPct: number[];
  /** each core's interrupt %, so busy - interrupts - the processes pinned there = others on that core */
  coreIrqPct: number[];
}

export function windowLoad(s0: CpuSnap, s1: CpuSnap): WindowLoad {
  const seconds = (s1.at - s0.at) / 1000;
  const d = (f: (c: { busy: number; irq: number; total: number }) => number) =>
    s1.cores.reduce((sum, c, i) => sum + f(c) - (s0.cores[i] ? f(s0.cores[i]) : 0), 0);
  const busy = d((c) => c.busy);
  const irq = d((c) => c.irq);
  const gw = s1.gateway - s0.gateway;
  const bench = s1.bench - s0.bench;
  return {
    seconds,
    gatewayPct: (100 * gw) / seconds,
    benchPct: (100 * bench) / seconds,
    othersCores: Math.max(0, (busy - irq - gw - bench) / seconds),
    irqCores: irq / seconds,
    coreBusyPct: s1.cores.map((c, i) => {
      const p = s0.cores[i];
      return p ? (100 * (c.busy - p.busy)) / Math.max(1e-9, c.total - p.total) : NaN;
    }),
    coreIrqPct: s1.cores.map((c, i) => {
      const p = s0.cores[i];
      return p ? (100 * (c.irq - p.irq)) / Math.max(1e-9, c.total - p.total) : NaN;
    }),
  };
}

/** other processes past this many cores make a window's figures doubtful: the benches say so and ask for a rerun */
export const DISTURBED_CORES = 0.1;

/** ms on the system-wide monotonic clock (CLOCK_MONOTONIC, what process.hrtime reads): comparable between processes */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * this process's performance.now() -> monotonicMs(): add this (fixed for a process's life: both read the same clock).
 * Taken from the tightest of several bracketed readings: one pair of reads is wrong by however long the process was
 * preempted between them, and a player process taking it while core 1 was busy put 51,097 of a run's 490,000 frame
 * lags below zero (fanout: "negative: clocks disagree").
 */
export function perfToMonotonic(): number {
  let bracket = Infinity;
  let offset = 0;
  for (let i = 0; i < 64; i++) {
    const before = performance.now();
    const m = monotonicMs();
    const after = performance.now();
    if (after - before < bracket) {
      bracket = after - before;
      offset = m - (before + after) / 2;
    }
  }
  return offset;
}
