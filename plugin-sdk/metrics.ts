import type { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Per-plugin metrics; names are prefixed `gw_<plugin>_` so plugins cannot collide. */
export interface Metrics {
  readonly registry: Registry;
  counter<L extends string = string>(name: string, help: string, labelNames?: L[]): Counter<L>;
  gauge<L extends string = string>(name: string, help: string, labelNames?: L[], collect?: (g: Gauge<L>) => void): Gauge<L>;
  histogram<L extends string = string>(name: string, help: string, buckets: number[], labelNames?: L[]): Histogram<L>;
}
