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
      new Gauge({ name: prefix + name, help, labelNames, registers: [registry], ...(collect ? { collect(this: Gauge) { collect(this as never); } } : {}) }),
    histogram: (name, help, buckets, labelNames = []) => new Histogram({ name: prefix + name, help, buckets, labelNames, registers: [registry] }),
    hotCounter: <L extends string>(name: string, help: string, labelNames: L[] = []) => {
      const set = new HotCounterSet<L>();
      // prom-client's own collect hook: the sums are folded in when the registry reads the counter
      new Counter<L>({
        name: prefix + name, help, labelNames, registers: [registry],
        collect(this: Counter<L>) { set.drain((labels, n) => this.inc(labels as never, n)); },
      });
      return { child: (labels: Partial<Record<L, string>>) => set.child(labels) };
    },
    hotHistogram: (name, help, buckets) => {
      const data = new HotHistogramData([...buckets].sort((a, b) => a - b));
      registry.registerMetric(hotHistogramMetric(prefix + name, help, data) as never);
      return data;
    },
  };
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
    name, help, type: 'histogram', aggregator: 'sum',
    get: async () => ({ name, help, type: 'histogram', values: values(), aggregator: 'sum' }),
    reset: () => undefined,
  };
}
