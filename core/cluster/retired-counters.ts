/**
 * What dead workers had counted, kept so the cluster's /metrics never counts backwards.
 *
 * Why: a cluster scrape sums every live worker's series (session-calls.ts, metrics-scrape.ts). When a worker dies,
 * its counters go with it and every summed counter falls by what it held. Prometheus reads any fall as a counter
 * reset: `rate()` and `increase()` then count the whole remaining sum as new, a spike on every graph of the gateway
 * just when someone is looking at why a worker died. Here the primary keeps each worker's last answer to a scrape;
 * when the worker exits, its counters and histograms join a retired part that every later scrape's sum includes,
 * and its replacement counts on from 0 beside it. What the worker counted after its last scrape is lost: the sum
 * stays flat over that, it does not fall. Counters carry only low-cardinality labels (kind, listener, reason,
 * code), so the retired part stays as small as one worker's counters.
 */
import { isRetirable, retireCounters, type MetricJson, type WorkerMetric } from '../metrics-scrape';

/** the rpc method whose answers are a worker's metrics (session-calls.ts) */
export const METRICS_METHOD = 'metrics';

export class RetiredCounters {
  /** each live worker's counters and histograms in its last answer to a scrape, by slot */
  private readonly last = new Map<number, MetricJson[]>();
  private readonly retired = new Map<string, MetricJson>();

  /** a worker answered a scrape: its counters and histograms are kept (not its gauge tables' rows of every stream) */
  answered(slot: number, metrics: unknown): void {
    if (Array.isArray(metrics)) this.last.set(slot, (metrics as WorkerMetric[]).filter(isRetirable));
  }

  /** the worker in this slot exited: what it had counted at its last scrape is kept */
  exited(slot: number): void {
    const last = this.last.get(slot);
    if (last === undefined) return;
    this.last.delete(slot);
    retireCounters(this.retired, last);
  }

  /** the live workers' answers to a scrape, with the retired part as one more worker's when there is one */
  withRetired(answers: unknown[]): unknown[] {
    return this.retired.size === 0 ? answers : [...answers, [...this.retired.values()]];
  }
}
