import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * What the dispatcher reports as it works. `host` is the callback origin (scheme://host:port). Hosts come from
 * applications, so an exporter should not turn them into unbounded label sets: the prom-client adapter below
 * labels only the queue-depth gauge, and removes a host's series when its queue empties.
 */
export interface CallbackMetrics {
  delivered(host: string): void;
  /** one per retry scheduled (not per notice) */
  retried(host: string): void;
  /** a notice given up: permanent error (4xx, refused host) or retry budget spent */
  failed(host: string): void;
  /** a notice thrown away unsent: queue overflow, or still queued at stop */
  dropped(host: string): void;
  /** notices waiting for the host (not counting those being sent); 0 once the host is idle */
  queueDepth(host: string, depth: number): void;
}

export function promCallbackMetrics(registry: Registry, prefix = 'gw_callback_notifier_'): CallbackMetrics {
  const counter = (name: string, help: string) => new Counter({ name: prefix + name, help, registers: [registry] });
  const delivered = counter('delivered_total', 'callback notices delivered (2xx)');
  const retried = counter('retried_total', 'callback delivery retries scheduled');
  const failed = counter('failed_total', 'callback notices given up (permanent error or retry budget spent)');
  const dropped = counter('dropped_total', 'callback notices dropped unsent (queue overflow or shutdown)');
  const depth = new Gauge({
    name: prefix + 'queue_depth',
    help: 'callback notices waiting per callback host',
    labelNames: ['host'],
    registers: [registry],
  });
  return {
    delivered: () => delivered.inc(),
    retried: () => retried.inc(),
    failed: () => failed.inc(),
    dropped: () => dropped.inc(),
    queueDepth: (host, n) => (n === 0 ? depth.remove({ host }) : depth.set({ host }, n)),
  };
}
