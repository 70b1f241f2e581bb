import type { MetricObjectWithValues, MetricValue, Registry } from 'prom-client';
import { hasPromText, holdTableRows } from './metrics';

/**
 * A /metrics scrape that does not stop the media for its whole length.
 *
 * prom-client's `registry.metrics()` formats every metric within one task: at 450 streams (4,500 per-stream series)
 * that stopped the event loop for 30-100 ms a scrape under load, and every frame in flight and every API request
 * waited for it (at a scrape every 15 s, a third of a percent of all frames). Here the metrics are made one at a
 * time and the loop is let go, until the next turn, whenever `sliceMs` has been spent, so the longest stop is about
 * one metric's making. Entries with `promText` (gauge tables) are written as whole strings, which also removes most of
 * the scrape's own work and garbage; the others go through prom-client's formatting, so the text is the same as
 * `registry.metrics()`'s, byte for byte (the unit tests compare them).
 *
 * Gauge tables are held on their first-read rows for the whole scrape (a stream that leaves between two columns
 * still appears in both). Series that change between turns are read when their metric's turn comes: Prometheus
 * reads a scrape as one instant either way, and counters stay monotonic.
 */

/** how long a scrape may hold the event loop before letting it go a turn; about one media read slice */
export const SCRAPE_SLICE_MS = 2;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** the registry's text exposition, made over as many turns as it takes at `sliceMs` each */
export async function scrapeText(registry: Registry, sliceMs = SCRAPE_SLICE_MS): Promise<string> {
  // our fast path writes the Prometheus text format only; an OpenMetrics registry keeps prom-client's own way
  if (registry.contentType !== 'text/plain; version=0.0.4; charset=utf-8') return registry.metrics();
  const release = holdTableRows(registry);
  try {
    const parts: string[] = [];
    let sliceStart = performance.now();
    for (const metric of registry.getMetricsAsArray()) {
      parts.push(hasPromText(metric) ? metric.promText() : await registry.getSingleMetricAsString(metric.name));
      if (performance.now() - sliceStart >= sliceMs) {
        await nextTurn();
        sliceStart = performance.now();
      }
    }
    return `${parts.join('\n\n')}\n`;
  } finally {
    release();
  }
}

/** the registry's metrics as prom-client's JSON (for a cluster's aggregation), made the same way */
export async function scrapeJson(registry: Registry, sliceMs = SCRAPE_SLICE_MS): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
  const release = holdTableRows(registry);
  try {
    const out: MetricObjectWithValues<MetricValue<string>>[] = [];
    let sliceStart = performance.now();
    for (const metric of registry.getMetricsAsArray()) {
      out.push(await (metric as unknown as { get(): Promise<MetricObjectWithValues<MetricValue<string>>> }).get());
      if (performance.now() - sliceStart >= sliceMs) {
        await nextTurn();
        sliceStart = performance.now();
      }
    }
    return out;
  } finally {
    release();
  }
}
