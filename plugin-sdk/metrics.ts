import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HotCounter, HotHistogram } from './hot-metrics';

/** Per-plugin metrics; names are prefixed `gw_<plugin>_` so plugins cannot collide. */
export interface Metrics {
  readonly registry: Registry;
  counter<L extends string = string>(name: string, help: string, labelNames?: L[]): Counter<L>;
  gauge<L extends string = string>(name: string, help: string, labelNames?: L[], collect?: (g: Gauge<L>) => void): Gauge<L>;
  histogram<L extends string = string>(name: string, help: string, buckets: number[], labelNames?: L[]): Histogram<L>;
  /**
   * A counter for the media path: `child(labels)` once, then `add(n)` per event is a plain addition; the sums reach
   * the registry when /metrics is scraped (see hot-metrics.ts)
   */
  hotCounter<L extends string = string>(name: string, help: string, labelNames?: L[]): { child(labels: Partial<Record<L, string>>): HotCounter };
  /** a histogram without labels for the media path: observe() is a binary search and two additions */
  hotHistogram(name: string, help: string, buckets: number[]): HotHistogram;
  /**
   * Gauges with a series per row of a table (per stream, say), all read in one pass at scrape time: `rows(emit)`
   * calls `emit(labels, values)` once a row, `values[i]` being gauge `columns[i]`'s. Exposed exactly as prom-client
   * Gauges set with those labels would be, at a fraction of the cost: a Gauge's `set` hashes its labels per series,
   * and at 1,000 streams ten per-stream gauges made each scrape stop every stream for ~170 ms. With several workers
   * a scrape sums the rows of every worker's table per series (the same labels in two workers: one series, summed).
   */
  gaugeTable<L extends string = string>(
    columns: ReadonlyArray<{ name: string; help: string }>,
    labelNames: L[],
    rows: (emit: (labels: Record<L, string>, values: ArrayLike<number>) => void) => void,
  ): void;
}
