import * as promClient from 'prom-client';
import type { MetricObject, MetricObjectWithValues, MetricValue, Registry } from 'prom-client';
import { escapeHelp, escapeLabel, hasCompact, hasPromText, holdTableRows, isCompactColumn, sampleValue, type CompactColumn } from './metrics';

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

export type MetricJson = MetricObjectWithValues<MetricValue<string>>;

/** a function to call between two pieces of work: it lets the event loop go a turn once `ms` has been spent */
function slicer(ms: number): () => Promise<void> | undefined {
  let start = performance.now();
  return () => {
    if (performance.now() - start < ms) return undefined;
    return new Promise((resolve) =>
      setImmediate(() => {
        start = performance.now();
        resolve();
      }),
    );
  };
}

/**
 * `make` for each of the registry's metrics in turn, the loop let go once `sliceMs` is spent, its gauge tables held on
 * one read of their rows throughout
 */
async function eachMetric<T>(registry: Registry, sliceMs: number, make: (metric: MetricObject) => T | Promise<T>): Promise<T[]> {
  const release = holdTableRows(registry);
  try {
    const out: T[] = [];
    const between = slicer(sliceMs);
    for (const metric of registry.getMetricsAsArray()) {
      out.push(await make(metric));
      await between();
    }
    return out;
  } finally {
    release();
  }
}

/** the registry's text exposition, made over as many turns as it takes at `sliceMs` each */
export async function scrapeText(registry: Registry, sliceMs = SCRAPE_SLICE_MS): Promise<string> {
  // our fast path writes the Prometheus text format only; an OpenMetrics registry keeps prom-client's own way
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- an OpenMetrics registry reaches here typed as the default Registry
  if (registry.contentType !== 'text/plain; version=0.0.4; charset=utf-8') return registry.metrics();
  const parts = await eachMetric(registry, sliceMs, (m) => (hasPromText(m) ? m.promText() : registry.getSingleMetricAsString(m.name)));
  return `${parts.join('\n\n')}\n`;
}

/** what a worker sends for the cluster's sum: prom-client's JSON of each metric, gauge-table columns compact */
export type WorkerMetric = MetricJson | CompactColumn;

/** the registry's metrics for a cluster's aggregation (aggregateText), made the same way */
export function scrapeJson(registry: Registry, sliceMs = SCRAPE_SLICE_MS): Promise<WorkerMetric[]> {
  return eachMetric<WorkerMetric>(registry, sliceMs, (m) => (hasCompact(m) ? m.compact() : (m as unknown as { get(): Promise<MetricJson> }).get()));
}

type Aggregator = (metrics: MetricJson[]) => MetricJson | undefined;
/** prom-client's cluster aggregators (sum, first, omit, average, min, max): exported by its index, not its typings */
const aggregators = (promClient as unknown as { aggregators: Record<string, Aggregator> }).aggregators;

interface Sample {
  value: number;
  labels?: Record<string, string | number>;
  metricName?: string;
}

/** a label value as prom-client writes it: strings escaped, other values as they print */
function labelValue(v: unknown): string {
  return typeof v === 'string' ? escapeLabel(v) : `${v as string}`;
}

/** prom-client's grouping key for a label set (util.js hashObject): names sorted, `name:value,` each */
function groupKey(labels: Record<string, unknown> | undefined): string {
  if (labels === undefined) return '';
  const keys = Object.keys(labels);
  if (keys.length > 1) keys.sort();
  let key = '';
  for (const k of keys) if (labels[k] !== undefined) key += `${k}:${labels[k] as string},`;
  return key;
}

/** a series' label text as prom-client writes its labels (object order) */
function labelsText(labels: Record<string, unknown> | undefined): string {
  let text = '';
  if (labels !== undefined) for (const k in labels) text += `${text === '' ? '' : ','}${k}="${labelValue(labels[k])}"`;
  return text === '' ? '' : `{${text}}`;
}

/** an aggregated metric's text, as prom-client's Registry writes a metric (no default labels, Prometheus format) */
function promTextOf(m: MetricJson): string {
  const name = escapeHelp(m.name);
  let out = `# HELP ${name} ${escapeHelp(m.help)}\n# TYPE ${name} ${m.type}`;
  for (const v of m.values as Sample[]) {
    out += `\n${v.metricName ?? name}${labelsText(v.labels)} ${sampleValue(v.value)}`;
  }
  return out;
}

/** prom-client's 'sum' aggregator (metricAggregators.js), the same series in the same order, without an array a series */
function sumOf(metrics: MetricJson[]): MetricJson {
  const first = metrics[0];
  const series = new Map<string, Sample>();
  for (const m of metrics) {
    for (const v of m.values as Sample[]) {
      const key = `${v.metricName}_${groupKey(v.labels)}`;
      const s = series.get(key);
      if (s) s.value += v.value;
      else series.set(key, v.metricName ? { value: 0 + v.value, labels: v.labels, metricName: v.metricName } : { value: 0 + v.value, labels: v.labels });
    }
  }
  return { help: first.help, name: first.name, type: first.type, aggregator: first.aggregator, values: [...series.values()] } as unknown as MetricJson;
}

/**
 * A dead worker's counters and histograms (`isRetirable`: what it had counted) added into `into`, by metric name and
 * series, for the cluster's sums to keep (retired-counters.ts).
 */
export function retireCounters(into: Map<string, MetricJson>, counted: readonly MetricJson[]): void {
  for (const m of counted) {
    const had = into.get(m.name);
    into.set(m.name, sumOf(had ? [had, m] : [m]));
  }
}

/**
 * A metric a dead worker's sum keeps: a counter or histogram summed across workers. Gauges, gauge tables and metrics
 * not summed are left out: they describe what is live.
 */
export function isRetirable(m: WorkerMetric): m is MetricJson {
  if (isCompactColumn(m)) return false;
  const type = String(m.type);
  return (type === 'counter' || type === 'histogram') && m.aggregator === 'sum';
}

/**
 * A gauge-table column summed over the workers: per series (its label text), in the order first seen. A worker that
 * sent the column as JSON (workers send it compact; a mixed group is handled all the same) has its series keyed by the text
 * prom-client would write for them.
 */
function sumColumns(metrics: WorkerMetric[]): string {
  const sums = new Map<string, number>();
  for (const m of metrics) {
    if (isCompactColumn(m)) {
      for (let i = 0; i < m.rows.length; i++) sums.set(m.rows[i], (sums.get(m.rows[i]) ?? 0) + m.values[i]);
    } else {
      for (const v of m.values as Sample[]) {
        const row = labelsText(v.labels);
        sums.set(row, (sums.get(row) ?? 0) + v.value);
      }
    }
  }
  const first = metrics[0];
  const name = escapeHelp(first.name);
  let out = `# HELP ${name} ${escapeHelp(first.help)}\n# TYPE ${name} ${first.type}`;
  for (const [row, value] of sums) out += `\n${name}${row} ${sampleValue(value)}`;
  return out;
}

/** one metric's JSON from every worker, as prom-client's aggregator for it makes it; undefined: 'omit' */
function aggregatedText(metrics: MetricJson[]): string | undefined {
  const how = metrics[0].aggregator;
  const fn = aggregators[how];
  if (typeof fn !== 'function') throw new Error(`metric ${metrics[0].name}: '${how}' is not a defined aggregator`);
  const aggregated = how === 'sum' ? sumOf(metrics) : fn(metrics);
  return aggregated ? promTextOf(aggregated) : undefined;
}

/**
 * Every worker's metrics summed per series, as text: what prom-client's `AggregatorRegistry.aggregate(parts).metrics()`
 * gives (byte for byte; the unit tests compare them), but a metric at a time with the loop let go every `sliceMs`,
 * summing without an array per series and writing each metric's text at once; gauge-table columns arrive compact
 * (metrics.ts, CompactColumn) and are summed by label text. The worker that got the scrape carries streams: at 1,000
 * streams in two workers prom-client's aggregation and text held it 49-72 ms in one go (test/bench/README.md,
 * metrics-scrape).
 */
export async function aggregateText(perWorker: WorkerMetric[][], sliceMs = SCRAPE_SLICE_MS): Promise<string> {
  const byName = new Map<string, WorkerMetric[]>();
  for (const list of perWorker) {
    for (const m of list) {
      const group = byName.get(m.name);
      if (group) group.push(m);
      else byName.set(m.name, [m]);
    }
  }
  const parts: string[] = [];
  const between = slicer(sliceMs);
  for (const group of byName.values()) {
    const text = group.some(isCompactColumn) ? sumColumns(group) : aggregatedText(group as MetricJson[]);
    if (text !== undefined) parts.push(text);
    await between();
  }
  return `${parts.join('\n\n')}\n`;
}
