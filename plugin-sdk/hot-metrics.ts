/**
 * Metrics written on the media path (per chunk, per frame, per tag). prom-client hashes the label set on every
 * inc() and observe(), even through a labels() child, and walks the buckets: at 500 terminals that was ~4 % of the
 * main thread (profile of ingest-flv at 300 terminals: Histogram.observe 2.5 %, Counter.inc 1.2 %). These keep
 * plain numbers that the registry reads when /metrics is scraped, so the hot path costs an addition.
 */

/**
 * Where a byte total kept in an object's field on the media path starts: 0 as V8 stores a double (-0 is no small
 * integer). A field first seen holding a small integer is kept as one until a sum passes 2^31 - 1; V8 then changes the
 * class of every object of its kind and throws away the optimised code that adds to it (flv-out's player write path,
 * 35 s into a 500 Mbit/s load; a player's own total after ~4.8 h at 1 Mbit/s). JSON and /metrics print it as 0.
 * test/core/byte-totals.test.ts.
 */
export const BYTE_TOTAL_START = -0;

/**
 * A byte total with no object of its own to live in: a plugin's total of bytes in or out, added to from a callback on
 * every unit. A `let` in a closure starting at 0 is a small integer until its sum passes 2^31 - 1, and then every
 * optimised function that adds to it is thrown away: `--trace-deopt` showed rtsp-out's send path, its byte count and
 * its RTCP sender deoptimised 60 s into a 300 Mbit/s load, where rtsp-out's total passed 2^31. The field here starts
 * at BYTE_TOTAL_START, so it is a double from the start. test/core/byte-totals.test.ts.
 */
export class ByteTotal {
  /** the bytes so far (reads 0 when none) */
  n = BYTE_TOTAL_START;

  add(bytes: number): void {
    this.n += bytes;
  }
}

/** A counter child resolved once: add() is a plain addition. */
export interface HotCounter {
  add(n?: number): void;
}

/** A histogram without labels: observe() finds the bucket by binary search and adds. */
export interface HotHistogram {
  observe(value: number): void;
}

/** Per-label-set sums for a counter; the registry folds them in at scrape time. */
export class HotCounterSet<L extends string> {
  private readonly children: Array<{ labels: Partial<Record<L, string>>; pending: number }> = [];

  child(labels: Partial<Record<L, string>>): HotCounter {
    // a byte counter's sum between scrapes passes 2^31 in ~35 s at 500 Mbit/s (or never drains, unscraped)
    const c = { labels, pending: BYTE_TOTAL_START };
    this.children.push(c);
    return {
      add: (n = 1) => {
        c.pending += n;
      },
    };
  }

  /** hands what accumulated since the last call to `inc`, then zeroes it */
  drain(inc: (labels: Partial<Record<L, string>>, n: number) => void): void {
    for (const c of this.children) {
      if (c.pending === 0) continue;
      const n = c.pending;
      c.pending = 0;
      inc(c.labels, n);
    }
  }
}

/** Bucket counts in a typed array; `snapshot` gives Prometheus' cumulative form. */
export class HotHistogramData implements HotHistogram {
  readonly counts: Float64Array;
  /** fractional from the first observation: a double from the start, so that one changes no class */
  sum = BYTE_TOTAL_START;
  /** one a frame for the added-latency histogram: past 2^31 after ~2 days at 12k frames a second */
  count = BYTE_TOTAL_START;

  constructor(readonly bounds: readonly number[]) {
    for (let i = 1; i < bounds.length; i++) if (!(bounds[i] > bounds[i - 1])) throw new RangeError('histogram buckets must rise');
    // the last slot is +Inf
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const b = this.bounds;
    let lo = 0;
    let hi = b.length;
    // first bound >= value (le semantics); b.length means +Inf
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (b[mid] < value) lo = mid + 1;
      else hi = mid;
    }
    this.counts[lo]++;
    this.sum += value;
    this.count++;
  }

  /** cumulative counts per bound, +Inf last */
  cumulative(): number[] {
    const out: number[] = [];
    let acc = 0;
    for (let i = 0; i < this.counts.length; i++) {
      acc += this.counts[i];
      out.push(acc);
    }
    return out;
  }
}
