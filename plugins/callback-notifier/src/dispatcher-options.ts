/**
 * The callback dispatcher's options (delivery.ts), their defaults, and the check that the numbers among them are
 * usable. A zero or negative timeout, backoff, queue size or concurrency would leave the dispatcher spinning or
 * refusing everything, so construction throws, naming the option; retryForMs and retryAfterMaxMs may be 0 (one
 * attempt per notice; a Retry-After not waited for).
 */
import type { Logger } from 'pino';
import { DEFAULT_SITE_HOST_POLICY, HostPolicy } from './host-policy';
import type { CallbackMetrics } from './metrics';

export interface CallbackDispatcherOptions {
  /** log lines carry the redacted cb, the reqId and act; never credentials, never the payload (play URLs hold user tokens) */
  logger: Logger;
  metrics?: CallbackMetrics;
  /** default: DEFAULT_SITE_HOST_POLICY */
  hostPolicy?: HostPolicy;
  /** one POST, connect to last byte of the answer (default 5000) */
  attemptTimeoutMs?: number;
  /**
   * a notice is retried until this long after it was enqueued, with a last attempt at that moment when a backoff would
   * overshoot it; it always gets at least one attempt (default 120000)
   */
  retryForMs?: number;
  /** first backoff ceiling; doubles per attempt (default 500) */
  backoffBaseMs?: number;
  /** backoff ceiling (default 30000) */
  backoffMaxMs?: number;
  /** a Retry-After longer than this is cut to it (default 30000) */
  retryAfterMaxMs?: number;
  /**
   * notices waiting per callback host (new ones and ones waiting out a backoff, not those being sent), beyond which the
   * oldest waiting one is dropped (default 1000)
   */
  maxQueuePerHost?: number;
  /** notices being sent at once to one host (default 4) */
  concurrencyPerHost?: number;
  userAgent?: string;
  /** CA certificates (PEM) HTTPS callbacks are checked against (default: trustedCertificates(), the system's store) */
  trustedCa?: string[];
  /** jitter source, replaceable in tests (default Math.random) */
  random?: () => number;
}

/** The options with their defaults in place, checked. */
export interface DispatcherSettings {
  log: Logger;
  metrics: CallbackMetrics;
  policy: HostPolicy;
  attemptTimeoutMs: number;
  retryForMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  retryAfterMaxMs: number;
  maxQueue: number;
  concurrency: number;
  userAgent: string;
  random: () => number;
  /** undefined: trustedCertificates() */
  trustedCa: string[] | undefined;
}

const noMetrics: CallbackMetrics = { delivered() {}, retried() {}, failed() {}, dropped() {}, queueDepth() {} };

/** Throws, naming the option, for a number that is not usable (see above). */
export function dispatcherSettings(opts: CallbackDispatcherOptions): DispatcherSettings {
  return {
    log: opts.logger,
    metrics: opts.metrics ?? noMetrics,
    policy: opts.hostPolicy ?? new HostPolicy(DEFAULT_SITE_HOST_POLICY),
    attemptTimeoutMs: positive('attemptTimeoutMs', opts.attemptTimeoutMs ?? 5000),
    retryForMs: positive('retryForMs', opts.retryForMs ?? 120_000, true),
    backoffBaseMs: positive('backoffBaseMs', opts.backoffBaseMs ?? 500),
    backoffMaxMs: positive('backoffMaxMs', opts.backoffMaxMs ?? 30_000),
    retryAfterMaxMs: positive('retryAfterMaxMs', opts.retryAfterMaxMs ?? 30_000, true),
    maxQueue: positive('maxQueuePerHost', opts.maxQueuePerHost ?? 1000),
    concurrency: positive('concurrencyPerHost', opts.concurrencyPerHost ?? 4),
    userAgent: opts.userAgent ?? 'jt1078-gateway callback-notifier',
    random: opts.random ?? Math.random,
    trustedCa: opts.trustedCa,
  };
}

function positive(name: string, value: number, allowZero = false): number {
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new Error(`callback dispatcher option ${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${value}`);
  }
  return value;
}
