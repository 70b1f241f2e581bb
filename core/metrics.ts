import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Metrics } from '../plugin-sdk/metrics';
import { HotCounterSet, HotHistogramData } from '../plugin-sdk/hot-metrics';

export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'gw_process_' });
  return registry;
}

/** Metrics of one owner; names get the prefix gw_<owner>_ so two plugins cannot register the same name. */
export function metricsFor(registry: Registry, owner: string): Metrics {
  const prefix = `gw_${owner.replace(/[^a-zA-Z0-9]/g, '_')}_`;
  return {
    registry,
    counter: (name, help, labelNames = []) => new Counter({ name: prefix + name, help, labelNames, registers: [registry] }),
    gauge: (name, help, labelNames = [], collect) =>
      new Gauge({
        name: prefix + name,
        help,
        labelNames,
        registers: [registry],
        ...(collect
          ? {
              collect(this: Gauge) {
                collect(this as never);
              },
            }
          : {}),
      }),
    histogram: (name, help, buckets, labelNames = []) => new Histogram({ name: prefix + name, help, buckets, labelNames, registers: [registry] }),
    hotCounter: <L extends string>(name: string, help: string, labelNames: L[] = []) => {
      const set = new HotCounterSet<L>();
      // prom-client's own collect hook: the sums are folded in when the registry reads the counter
      new Counter<L>({
        name: prefix + name,
        help,
        labelNames,
        registers: [registry],
        collect(this: Counter<L>) {
          set.drain((labels, n) => this.inc(labels as never, n));
        },
      });
      return { child: (labels: Partial<Record<L, string>>) => set.child(labels) };
    },
    hotHistogram: (name, help, buckets) => {
      const data = new HotHistogramData([...buckets].sort((a, b) => a - b));
      registry.registerMetric(hotHistogramMetric(prefix + name, help, data) as never);
      return data;
    },
    gaugeTable: (columns, labelNames, rows) => {
      const table = new GaugeTable(labelNames, columns.length, rows);
      const tables = tablesOf.get(registry);
      if (tables) tables.push(table);
      else tablesOf.set(registry, [table]);
      columns.forEach((c, i) => registry.registerMetric(table.column(prefix + c.name, c.help, i) as never));
    },
  };
}

interface TableRow {
  labels: Record<string, string>;
  /** the series' label part as exposed: `{a="x",b="y"}` */
  text: string;
  values: ArrayLike<number>;
}

/** Prometheus text format: a label value escapes backslash, double quote and line feed */
export function escapeLabel(v: string): string {
  return /[\\"\n]/.test(v) ? v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : v;
}

/** Prometheus text format: HELP text (and, as prom-client does, a name) escapes backslash and line feed */
export function escapeHelp(v: string): string {
  return /[\\\n]/.test(v) ? v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n') : v;
}

/** a sample's value as prom-client writes it */
export function sampleValue(v: number): string {
  if (Number.isNaN(v)) return 'Nan';
  if (!Number.isFinite(v)) return v < 0 ? '-Inf' : '+Inf';
  return `${v}`;
}

/** the gauge tables registered with each registry, so a scrape spread over several turns can hold their rows */
const tablesOf = new WeakMap<Registry, GaugeTable[]>();

/**
 * Keeps every gauge table of `registry` on the rows it reads first until the returned function is called: a scrape
 * that lets the event loop go between metrics (metrics-scrape.ts) then shows all columns of a table on the same rows,
 * read once.
 */
export function holdTableRows(registry: Registry): () => void {
  const tables = tablesOf.get(registry) ?? [];
  for (const t of tables) t.hold();
  let released = false;
  return () => {
    if (released) return;
    released = true;
    for (const t of tables) t.release();
  };
}

/**
 * A registry entry whose text the scraper can take whole, skipping prom-client's per-series formatting (an object,
 * two arrays and a WeakMap entry a series: at 4,500 series that was most of a scrape and its garbage).
 */
export interface PromTextEntry {
  promText(): string;
}

export function hasPromText(m: unknown): m is PromTextEntry {
  return typeof (m as Partial<PromTextEntry>).promText === 'function';
}

/**
 * A gauge-table column as a worker sends it for the cluster's sum: each series' label text (as exposed) and its
 * value, in two arrays instead of an object a series, so the IPC's serialisation and the receiver's parse and
 * collection handle two objects, not thousands (metrics-scrape.ts, aggregateText).
 */
export interface CompactColumn {
  name: string;
  help: string;
  type: 'gauge';
  aggregator: 'sum';
  rows: string[];
  values: Float64Array;
}

export function isCompactColumn(m: unknown): m is CompactColumn {
  return Array.isArray((m as Partial<CompactColumn>).rows);
}

interface CompactEntry {
  compact(): CompactColumn;
}

export function hasCompact(m: unknown): m is CompactEntry {
  return typeof (m as Partial<CompactEntry>).compact === 'function';
}

/**
 * The rows of a Metrics.gaugeTable, read once for all its columns: the registry asks each column in turn within one
 * scrape, so the rows read for the first are kept until the scrape's task ends (or, while a scrape holds them, until
 * it releases them). Each column is a registry entry in prom-client's shape (`get` for JSON and cluster aggregation;
 * `getForPromString`, its text hook, with each line's name and labels made here once a row, so prom-client only joins
 * them) plus `promText`, the whole text at once, for our scraper, and `compact`, what a worker sends for the sum.
 */
class GaugeTable {
  private snapshot: TableRow[] | undefined;
  private holds = 0;
  /** the snapshot's label texts (rowTexts), dropped with it */
  private texts: string[] | undefined;

  constructor(
    private readonly labelNames: readonly string[],
    private readonly width: number,
    private readonly rows: (emit: (labels: Record<string, string>, values: ArrayLike<number>) => void) => void,
  ) {}

  hold(): void {
    this.holds++;
  }

  release(): void {
    if (--this.holds === 0) this.forget();
  }

  private forget(): void {
    this.snapshot = this.texts = undefined;
  }

  column(name: string, help: string, i: number) {
    const head = `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} gauge`;
    return {
      name,
      help,
      type: 'gauge',
      aggregator: 'sum',
      get: async () => ({
        name,
        help,
        type: 'gauge',
        aggregator: 'sum',
        values: this.read().map((r) => ({ labels: r.labels, value: r.values[i] })),
      }),
      getForPromString: async () => ({
        name,
        help,
        type: 'gauge',
        aggregator: 'sum',
        values: this.read().map((r) => ({ metricName: name + r.text, value: r.values[i] })),
      }),
      promText: () => {
        let out = head;
        for (const r of this.read()) out += `\n${name}${r.text} ${sampleValue(r.values[i])}`;
        return out;
      },
      compact: (): CompactColumn => {
        const rows = this.read();
        const values = new Float64Array(rows.length);
        for (let k = 0; k < rows.length; k++) values[k] = rows[k].values[i];
        return { name, help, type: 'gauge', aggregator: 'sum', rows: this.rowTexts(rows), values };
      },
      reset: () => undefined,
    };
  }

  /**
   * The rows' label texts, one array for all columns of a read: the IPC's structured clone writes an object it has
   * seen once, as a reference after that, so a table's labels cross once, not once a column.
   */
  private rowTexts(rows: TableRow[]): string[] {
    // rows is always the snapshot (read()), and the texts are forgotten whenever it is
    return (this.texts ??= rows.map((r) => r.text));
  }

  private read(): TableRow[] {
    if (this.snapshot !== undefined) return this.snapshot;
    const out: TableRow[] = [];
    const names = this.labelNames;
    this.rows((labels, values) => {
      if (values.length < this.width) throw new RangeError(`gauge table row has ${values.length} values for ${this.width} columns`);
      let text = '';
      for (const n of names) {
        const v = labels[n];
        if (v !== undefined) text += `${text === '' ? '' : ','}${n}="${escapeLabel(String(v))}"`;
      }
      out.push({ labels, text: text === '' ? '' : `{${text}}`, values });
    });
    this.snapshot = out;
    setImmediate(() => {
      if (this.holds === 0) this.forget();
    });
    return out;
  }
}

/** A registry entry for a HotHistogramData, in the shape prom-client's Registry reads from its own histograms. */
function hotHistogramMetric(name: string, help: string, data: HotHistogramData) {
  const values = () => {
    const cum = data.cumulative();
    return [
      ...data.bounds.map((le, i) => ({ labels: { le }, value: cum[i], metricName: `${name}_bucket` })),
      { labels: { le: '+Inf' }, value: cum[cum.length - 1], metricName: `${name}_bucket` },
      { labels: {}, value: data.sum, metricName: `${name}_sum` },
      { labels: {}, value: data.count, metricName: `${name}_count` },
    ];
  };
  return {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get: async () => ({ name, help, type: 'histogram', values: values(), aggregator: 'sum' }),
    reset: () => undefined,
  };
}
