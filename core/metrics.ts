import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Metrics } from '../plugin-sdk/metrics';

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
  };
}
