import * as http from 'node:http';
import * as https from 'node:https';
import type { Logger } from 'pino';
import { got, type RequestError } from './got';
import { parseCallbackUrl, type ParsedCallback } from './callback-url';
import { DEFAULT_SITE_HOST_POLICY, HostPolicy, pinnedLookup } from './host-policy';
import { fullJitterDelay, parseRetryAfter } from './retry-timing';
import type { NoticePayload } from './payload';
import type { CallbackMetrics } from './metrics';
import { isCertificateRefusal, trustedCertificates } from './trust-store';
import { StopSignal } from './stop-signal';

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

export interface CallbackStats {
  delivered: number;
  retried: number;
  failed: number;
  dropped: number;
  /** notices waiting per host origin (hosts with nothing waiting or sending are absent) */
  queueDepth: Record<string, number>;
  /** notices being sent (those waiting out a backoff are in queueDepth) */
  inFlight: number;
  /** requests with at least one notice not yet delivered or given up: the only ones whose credentials are held */
  pendingRequests: number;
}

/**
 * Per-request state, alive only while the request has notices outstanding. Only the first of `pending` may be sent:
 * the next one is not started before the current one is delivered or given up, retries included.
 */
interface RequestState {
  key: string;
  hostKey: string;
  /** not yet settled, in enqueue order */
  pending: PendingNotice[];
}

interface PendingNotice {
  request: RequestState;
  /** cleared as soon as the notice is settled, so credentials live no longer than the notice */
  callback: ParsedCallback | undefined;
  reqId: string;
  act: NoticePayload['act'];
  body: string;
  /** enqueue order, to put a notice back where it was after a failed attempt */
  seq: number;
  queuedAt: number;
  deadline: number;
  attempts: number;
  /** no attempt before this time (a backoff); 0 for a notice not yet tried */
  notBefore: number;
}

/** One per callback origin: its own queue and its own sending slots, so one dead host cannot hold up another. */
interface HostWorker {
  key: string;
  /**
   * Everything not being sent, in enqueue order, including notices waiting out a backoff: those must not keep a
   * sending slot while they wait, or a dead host's first few notices would hold every slot for the whole budget and
   * the ones queued behind them would get no attempt before their own budget had run out.
   */
  waiting: PendingNotice[];
  active: number;
  /** wakes the worker when the earliest backoff among its sendable notices ends */
  timer: NodeJS.Timeout | undefined;
  timerAt: number;
}

type AttemptOutcome =
  | { kind: 'delivered'; status: number }
  | { kind: 'retry'; reason: string; retryAfterMs?: number }
  | { kind: 'fail'; reason: string }
  | { kind: 'cancelled' };

const noMetrics: CallbackMetrics = { delivered() {}, retried() {}, failed() {}, dropped() {}, queueDepth() {} };

/**
 * Sends `POST <cb>/strm_notif` notices. enqueue() only queues; all network work happens on per-host workers.
 *
 * Retry budget: a notice is retried until `retryForMs` after it was queued, and a backoff that would end past that
 * moment is cut to it, so the last attempt is made at the deadline rather than skipped. A notice waiting out a
 * backoff gives its sending slot back, so every queued notice keeps being tried while a host is down.
 *
 * Overflow policy: when a host's queue is full the OLDEST waiting notice is dropped, whether new or waiting out a
 * backoff. A host that far behind is down or badly slow; its oldest notices are the stalest (their requests have
 * often ended already), while the newest carry the current state, above all the `closed`/`failed` an application
 * needs to stop keeping a request. Dropping the newest would lose exactly those.
 */
export class CallbackDispatcher {
  private readonly log: Logger;
  private readonly metrics: CallbackMetrics;
  private readonly policy: HostPolicy;
  private readonly attemptTimeoutMs: number;
  private readonly retryForMs: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly retryAfterMaxMs: number;
  private readonly maxQueue: number;
  private readonly concurrency: number;
  private readonly userAgent: string;
  private readonly random: () => number;
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  private readonly workers = new Map<string, HostWorker>();
  private readonly requests = new Map<string, RequestState>();
  private readonly inflight = new Set<AbortController>();
  private idleWaiters: Array<() => void> = [];
  private readonly counts = { delivered: 0, retried: 0, failed: 0, dropped: 0 };
  private active = 0;
  private seq = 0;
  private readonly stopSignal = new StopSignal();

  constructor(opts: CallbackDispatcherOptions) {
    this.log = opts.logger;
    this.metrics = opts.metrics ?? noMetrics;
    this.policy = opts.hostPolicy ?? new HostPolicy(DEFAULT_SITE_HOST_POLICY);
    this.attemptTimeoutMs = positive('attemptTimeoutMs', opts.attemptTimeoutMs ?? 5000);
    this.retryForMs = positive('retryForMs', opts.retryForMs ?? 120_000, true);
    this.backoffBaseMs = positive('backoffBaseMs', opts.backoffBaseMs ?? 500);
    this.backoffMaxMs = positive('backoffMaxMs', opts.backoffMaxMs ?? 30_000);
    this.retryAfterMaxMs = positive('retryAfterMaxMs', opts.retryAfterMaxMs ?? 30_000, true);
    this.maxQueue = positive('maxQueuePerHost', opts.maxQueuePerHost ?? 1000);
    this.concurrency = positive('concurrencyPerHost', opts.concurrencyPerHost ?? 4);
    this.userAgent = opts.userAgent ?? 'jt1078-gateway callback-notifier';
    this.random = opts.random ?? Math.random;
    // Own agents, so stop() can close every pooled socket instead of leaving them to the process-wide agents.
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: this.concurrency });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: this.concurrency, ca: opts.trustedCa ?? trustedCertificates() });
  }

  /**
   * Queues a notice for `<cb>/strm_notif` and returns at once. `requestKey` identifies the request (its notices are
   * delivered strictly in enqueue order). Returns false, after logging why, when the notice cannot be queued
   * (bad cb, dispatcher stopped); that is counted as failed.
   */
  enqueue(requestKey: string, cb: string, payload: NoticePayload): boolean {
    if (this.stopSignal.stopped) return this.refuse(payload, 'dispatcher stopped');
    const parsed = parseCallbackUrl(cb);
    // A bad cb is not logged, not even redacted: unparseable text could be anything, credentials included.
    if (!parsed.ok) return this.refuse(payload, parsed.reason);
    let body: string;
    try {
      body = JSON.stringify(payload);
    } catch (err) {
      return this.refuse(payload, `payload cannot be serialised: ${(err as Error).message}`);
    }
    let request = this.requests.get(requestKey);
    if (!request) {
      request = { key: requestKey, hostKey: parsed.callback.origin, pending: [] };
      this.requests.set(requestKey, request);
    }
    const now = Date.now();
    const n: PendingNotice = {
      request, callback: parsed.callback, reqId: payload.reqId, act: payload.act, body,
      seq: ++this.seq, queuedAt: now, deadline: now + this.retryForMs, attempts: 0, notBefore: 0,
    };
    request.pending.push(n);
    const worker = this.workerFor(request.hostKey);
    worker.waiting.push(n);
    this.trim(worker);
    this.pump(worker);
    return true;
  }

  stats(): CallbackStats {
    const queueDepth: Record<string, number> = {};
    for (const w of this.workers.values()) queueDepth[w.key] = w.waiting.length;
    return { ...this.counts, queueDepth, inFlight: this.active, pendingRequests: this.requests.size };
  }

  /** Resolves when nothing is waiting or being sent. */
  whenIdle(): Promise<void> {
    if (this.workers.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Drops what is queued, aborts what is in flight, cancels backoff timers and closes pooled connections. */
  async stop(): Promise<void> {
    if (!this.stopSignal.stopped) {
      this.stopSignal.fire();
      let unsent = 0;
      for (const worker of this.workers.values()) {
        for (const n of worker.waiting.splice(0)) {
          this.drop(worker, n, undefined);
          unsent++;
        }
      }
      unsent += this.active;
      if (unsent > 0) this.log.warn({ unsent }, 'callback dispatcher stopping with undelivered notices');
      for (const c of this.inflight) c.abort();
      for (const worker of [...this.workers.values()]) {
        if (worker.timer) clearTimeout(worker.timer);
        worker.timer = undefined;
        this.retireIfIdle(worker);
      }
    }
    await this.whenIdle();
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private workerFor(key: string): HostWorker {
    let w = this.workers.get(key);
    if (!w) {
      w = { key, waiting: [], active: 0, timer: undefined, timerAt: 0 };
      this.workers.set(key, w);
    }
    return w;
  }

  private pump(worker: HostWorker): void {
    if (this.stopSignal.stopped) return;
    const now = Date.now();
    let wakeAt = Infinity;
    // Queue order across requests, strict order within one: only a request's first pending notice may go (a later
    // one waits, but does not block other requests behind it), and only once its backoff, if any, is over.
    for (let i = 0; i < worker.waiting.length && worker.active < this.concurrency; ) {
      const n = worker.waiting[i];
      if (n.request.pending[0] !== n) {
        i++;
      } else if (n.notBefore > now) {
        wakeAt = Math.min(wakeAt, n.notBefore);
        i++;
      } else {
        worker.waiting.splice(i, 1);
        this.send(worker, n);
      }
    }
    // With every slot taken the scan stopped early; the slot's release pumps again.
    if (worker.active < this.concurrency && wakeAt !== Infinity) this.wakeAt(worker, wakeAt);
    this.metrics.queueDepth(worker.key, worker.waiting.length);
  }

  private wakeAt(worker: HostWorker, at: number): void {
    if (worker.timer && worker.timerAt <= at) return;
    if (worker.timer) clearTimeout(worker.timer);
    worker.timerAt = at;
    worker.timer = setTimeout(() => {
      worker.timer = undefined;
      this.pump(worker);
    }, Math.max(0, at - Date.now()));
  }

  private send(worker: HostWorker, n: PendingNotice): void {
    worker.active++;
    this.active++;
    n.attempts++;
    void this.attemptSafely(n).then((outcome) => {
      worker.active--;
      this.active--;
      this.conclude(worker, n, outcome);
      this.pump(worker);
      this.retireIfIdle(worker);
    });
  }

  private async attemptSafely(n: PendingNotice): Promise<AttemptOutcome> {
    try {
      return await this.attempt(n.callback!, n.body);
    } catch (err) {
      // attempt() handles the expected failures; anything else is a bug, reported without the error object
      // (it could hold request options, headers included).
      return { kind: 'fail', reason: `internal error: ${(err as Error).message}` };
    }
  }

  /** Every outcome of an attempt is logged and counted here, once. */
  private conclude(worker: HostWorker, n: PendingNotice, outcome: AttemptOutcome): void {
    const ctx = { reqId: n.reqId, act: n.act, cb: n.callback!.redacted };
    const attempt = n.attempts;
    if (outcome.kind === 'delivered') {
      this.counts.delivered++;
      this.metrics.delivered(worker.key);
      this.log.debug({ ...ctx, attempt, status: outcome.status }, 'callback notice delivered');
      this.settle(n);
      return;
    }
    if (this.stopSignal.stopped || outcome.kind === 'cancelled') {
      this.countDropped(worker.key);
      this.settle(n);
      return;
    }
    if (outcome.kind === 'fail') {
      this.giveUp(worker, n, ctx, outcome.reason);
      return;
    }
    const now = Date.now();
    if (now >= n.deadline) {
      this.giveUp(worker, n, ctx, `${outcome.reason}; retry budget of ${this.retryForMs} ms spent`);
      return;
    }
    const delay =
      outcome.retryAfterMs !== undefined
        ? Math.min(outcome.retryAfterMs, this.retryAfterMaxMs)
        : fullJitterDelay(attempt, this.backoffBaseMs, this.backoffMaxMs, this.random);
    // A backoff that would end past the deadline is cut to it: giving up now would cut the budget short by up to a
    // whole backoff (30 s), and a receiver back within the budget would still lose the notice.
    n.notBefore = Math.min(now + delay, n.deadline);
    let at = worker.waiting.findIndex((w) => w.seq > n.seq);
    if (at < 0) at = worker.waiting.length;
    worker.waiting.splice(at, 0, n);
    this.trim(worker);
    if (n.callback === undefined) return; // the queue was full and this was its oldest notice
    this.counts.retried++;
    this.metrics.retried(worker.key);
    this.log.debug({ ...ctx, attempt, reason: outcome.reason, delayMs: n.notBefore - now, lastAttempt: n.notBefore === n.deadline }, 'callback notice will be retried');
  }

  private async attempt(cb: ParsedCallback, body: string): Promise<AttemptOutcome> {
    // A slow resolver must not hold up stop().
    const verdict = await this.stopSignal.race(this.policy.vet(cb.hostname));
    if (verdict === 'stopped' || this.stopSignal.stopped) return { kind: 'cancelled' };
    if (!verdict.ok) return verdict.retryable ? { kind: 'retry', reason: verdict.reason } : { kind: 'fail', reason: verdict.reason };
    const controller = new AbortController();
    this.inflight.add(controller);
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': this.userAgent };
      if (cb.authorization) headers.authorization = cb.authorization;
      const res = await got.post(cb.target, {
        body,
        headers,
        timeout: { request: this.attemptTimeoutMs },
        retry: { limit: 0 },
        throwHttpErrors: false,
        // A redirect would take the credentials, and the request, somewhere the host policy never vetted.
        followRedirect: false,
        signal: controller.signal,
        dnsLookup: pinnedLookup(verdict.addresses),
        agent: { http: this.httpAgent, https: this.httpsAgent },
      });
      const status = res.statusCode;
      if (status >= 200 && status < 300) return { kind: 'delivered', status };
      if (status === 429 || status >= 500) {
        return { kind: 'retry', reason: `HTTP ${status}`, retryAfterMs: parseRetryAfter(res.headers['retry-after'], Date.now()) };
      }
      return { kind: 'fail', reason: `HTTP ${status}` };
    } catch (err) {
      if (controller.signal.aborted) return { kind: 'cancelled' };
      const e = err as RequestError;
      if (isCertificateRefusal(e.code)) {
        return { kind: 'fail', reason: `TLS certificate refused (${e.code}: ${e.message}); if the server's CA is a private one, trust it with the plugin's caFiles` };
      }
      return { kind: 'retry', reason: e.code ? `${e.code}: ${e.message}` : e.message };
    } finally {
      this.inflight.delete(controller);
    }
  }

  private refuse(payload: NoticePayload, reason: string): false {
    this.log.warn({ reqId: payload.reqId, act: payload.act, reason }, 'callback notice not queued');
    this.counts.failed++;
    this.metrics.failed('');
    return false;
  }

  private giveUp(worker: HostWorker, n: PendingNotice, ctx: object, reason: string): void {
    this.counts.failed++;
    this.metrics.failed(worker.key);
    this.log.warn({ ...ctx, attempts: n.attempts, queuedMs: Date.now() - n.queuedAt, reason }, 'callback notice given up');
    this.settle(n);
  }

  /**
   * Keeps a host's waiting notices within maxQueuePerHost (plus at most concurrencyPerHost being sent), dropping the
   * oldest: a notice back from a failed attempt counts like a new one, so an outage cannot grow the queue.
   */
  private trim(worker: HostWorker): void {
    while (worker.waiting.length > this.maxQueue) this.drop(worker, worker.waiting.shift()!, 'callback host queue full');
  }

  private drop(worker: HostWorker, n: PendingNotice, reason: string | undefined): void {
    this.countDropped(worker.key);
    if (reason) this.log.warn({ reqId: n.reqId, act: n.act, cb: n.callback?.redacted, reason }, 'callback notice dropped');
    this.settle(n);
  }

  private countDropped(host: string): void {
    this.counts.dropped++;
    this.metrics.dropped(host);
  }

  /**
   * A notice is done with (delivered, given up or dropped): its credentials are forgotten, and the request's state
   * once nothing of it is outstanding. So credentials outlive neither a request's final notice nor, between notices,
   * the notice that brought them: each enqueue brings the request's cb again.
   */
  private settle(n: PendingNotice): void {
    n.callback = undefined;
    const r = n.request;
    const i = r.pending.indexOf(n);
    if (i >= 0) r.pending.splice(i, 1);
    if (r.pending.length === 0 && this.requests.get(r.key) === r) this.requests.delete(r.key);
  }

  private retireIfIdle(worker: HostWorker): void {
    if (worker.waiting.length > 0 || worker.active > 0 || this.workers.get(worker.key) !== worker) return;
    if (worker.timer) clearTimeout(worker.timer);
    worker.timer = undefined;
    this.workers.delete(worker.key);
    this.metrics.queueDepth(worker.key, 0);
    if (this.workers.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }
}

function positive(name: string, value: number, allowZero = false): number {
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new Error(`callback dispatcher option ${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${value}`);
  }
  return value;
}
