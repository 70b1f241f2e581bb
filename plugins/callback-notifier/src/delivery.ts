/**
 * Sends `POST <cb>/strm_notif` notices (README "Delivery semantics"). enqueue() only queues; all network work happens
 * on per-host queues (host-queues.ts), one POST at a time per notice (callback-post.ts). This module decides what an
 * attempt's outcome means for the notice, counts and logs each outcome once, and holds a request's credentials no
 * longer than its notices.
 *
 * - Retry budget: a notice is retried until `retryForMs` after it was queued, and a backoff that would end past that
 *   moment is cut to it, so the last attempt is made at the deadline rather than skipped. A notice always gets one
 *   attempt, however long it waited.
 * - Backoff: "full jitter" (retry-timing.ts); a Retry-After answer is honoured, cut to retryAfterMaxMs.
 * - Credentials: a settled notice (delivered, given up or dropped) forgets its cb, and a request's state goes with its
 *   last outstanding notice. So credentials outlive neither a request's final notice nor, between notices, the
 *   notice that brought them: each enqueue brings the request's cb again.
 * - A bad cb is refused at enqueue, counted as failed, and logged without its text: unparseable text could be
 *   anything, credentials included.
 */
import type { Logger } from 'pino';
import { parseCallbackUrl } from './callback-url';
import { CallbackPoster, type AttemptOutcome } from './callback-post';
import { dispatcherSettings, type CallbackDispatcherOptions, type DispatcherSettings } from './dispatcher-options';
import { HostQueues, type HostWorker, type PendingNotice, type RequestState } from './host-queues';
import type { CallbackMetrics } from './metrics';
import type { NoticePayload } from './payload';
import { fullJitterDelay } from './retry-timing';
import { StopSignal } from './stop-signal';

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

export class CallbackDispatcher {
  private readonly s: DispatcherSettings;
  private readonly log: Logger;
  private readonly metrics: CallbackMetrics;
  private readonly poster: CallbackPoster;
  private readonly queues: HostQueues;
  private readonly requests = new Map<string, RequestState>();
  private readonly counts = { delivered: 0, retried: 0, failed: 0, dropped: 0 };
  private seq = 0;
  private readonly stopSignal = new StopSignal();

  /** Throws, naming the option, for an option that is not usable (dispatcher-options.ts). */
  constructor(opts: CallbackDispatcherOptions) {
    const s = (this.s = dispatcherSettings(opts));
    this.log = s.log;
    this.metrics = s.metrics;
    this.poster = new CallbackPoster(s, this.stopSignal);
    this.queues = new HostQueues(s, this.stopSignal, {
      attempt: (n) => this.poster.post(n.callback!, n.body),
      conclude: (worker, n, outcome) => this.conclude(worker, n, outcome),
      drop: (worker, n, reason) => this.drop(worker, n, reason),
    });
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
      request,
      callback: parsed.callback,
      reqId: payload.reqId,
      act: payload.act,
      body,
      seq: ++this.seq,
      queuedAt: now,
      deadline: now + this.s.retryForMs,
      attempts: 0,
      notBefore: 0,
    };
    request.pending.push(n);
    this.queues.add(n);
    return true;
  }

  stats(): CallbackStats {
    return { ...this.counts, queueDepth: this.queues.depths(), inFlight: this.queues.active, pendingRequests: this.requests.size };
  }

  /** Resolves when nothing is waiting or being sent. */
  whenIdle(): Promise<void> {
    return this.queues.whenIdle();
  }

  /** Drops what is queued, aborts what is in flight, cancels backoff timers and closes pooled connections. */
  async stop(): Promise<void> {
    if (!this.stopSignal.stopped) {
      this.stopSignal.fire();
      let unsent = this.queues.dropWaiting();
      unsent += this.queues.active;
      if (unsent > 0) this.log.warn({ unsent }, 'callback dispatcher stopping with undelivered notices');
      this.poster.abortAll();
      this.queues.retireAll();
    }
    await this.queues.whenIdle();
    this.poster.destroy();
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
      this.giveUp(worker, n, ctx, `${outcome.reason}; retry budget of ${this.s.retryForMs} ms spent`);
      return;
    }
    const delay =
      outcome.retryAfterMs !== undefined
        ? Math.min(outcome.retryAfterMs, this.s.retryAfterMaxMs)
        : fullJitterDelay(attempt, this.s.backoffBaseMs, this.s.backoffMaxMs, this.s.random);
    // A backoff that would end past the deadline is cut to it: giving up now would cut the budget short by up to a
    // whole backoff (30 s), and a receiver back within the budget would still lose the notice.
    n.notBefore = Math.min(now + delay, n.deadline);
    this.queues.requeue(worker, n);
    if (n.callback === undefined) return; // the queue was full and this was its oldest notice
    this.counts.retried++;
    this.metrics.retried(worker.key);
    this.log.debug(
      { ...ctx, attempt, reason: outcome.reason, delayMs: n.notBefore - now, lastAttempt: n.notBefore === n.deadline },
      'callback notice will be retried',
    );
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
   * once nothing of it is outstanding.
   */
  private settle(n: PendingNotice): void {
    n.callback = undefined;
    const r = n.request;
    const i = r.pending.indexOf(n);
    if (i >= 0) r.pending.splice(i, 1);
    if (r.pending.length === 0 && this.requests.get(r.key) === r) this.requests.delete(r.key);
  }
}
