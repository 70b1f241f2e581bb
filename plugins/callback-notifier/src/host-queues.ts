/**
 * The dispatcher's queues (delivery.ts): one per callback origin, with its own sending slots, so one dead host cannot
 * hold up another.
 *
 * - Order: queue order across requests, strict order within one. Only a request's first pending notice may go (the
 *   next one is not started before it is delivered or given up, retries included), and a later one waits without
 *   blocking other requests behind it.
 * - A notice waiting out a backoff gives its sending slot back and waits in the queue: kept in a slot, a dead host's
 *   first few notices would hold every slot for the whole retry budget, and the ones queued behind them would get no
 *   attempt before their own budget had run out. A host's timer wakes it when the earliest backoff ends.
 * - Overflow: a host's queue holds at most maxQueue waiting notices (plus those being sent); one more, new or back from
 *   a failed attempt, drops the OLDEST waiting one. A host that far behind is down or badly slow; its oldest notices
 *   are the stalest (their requests have often ended already), while the newest carry the current state, above all
 *   the `closed`/`failed` an application needs to stop keeping a request. Dropping the newest would lose exactly those.
 * - A host with nothing waiting or being sent is forgotten (its queue-depth series removed).
 */
import type { AttemptOutcome } from './callback-post';
import type { ParsedCallback } from './callback-url';
import type { CallbackMetrics } from './metrics';
import type { NoticePayload } from './payload';
import type { StopSignal } from './stop-signal';

/**
 * Per-request state, alive only while the request has notices outstanding. Only the first of `pending` may be sent:
 * the next one is not started before the current one is delivered or given up, retries included.
 */
export interface RequestState {
  key: string;
  hostKey: string;
  /** not yet settled, in enqueue order */
  pending: PendingNotice[];
}

export interface PendingNotice {
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

/** One callback origin's queue and sending slots. */
export interface HostWorker {
  key: string;
  /** everything not being sent, in enqueue order, including notices waiting out a backoff */
  waiting: PendingNotice[];
  active: number;
  /** wakes the worker when the earliest backoff among its sendable notices ends */
  timer: NodeJS.Timeout | undefined;
  timerAt: number;
}

/** What the queues hand back to the dispatcher. */
export interface QueueOwner {
  /** one attempt at `n`; never rejects */
  attempt(n: PendingNotice): Promise<AttemptOutcome>;
  /** what the attempt's outcome means for `n`: it is settled, or back in its queue (requeue) */
  conclude(worker: HostWorker, n: PendingNotice, outcome: AttemptOutcome): void;
  /** `n` leaves its queue unsent: overflow (with the reason), or stop (no reason: counted, not logged one by one) */
  drop(worker: HostWorker, n: PendingNotice, reason: string | undefined): void;
}

export interface HostQueuesOptions {
  maxQueue: number;
  concurrency: number;
  metrics: CallbackMetrics;
}

export class HostQueues {
  private readonly workers = new Map<string, HostWorker>();
  private idleWaiters: Array<() => void> = [];
  private sending = 0;

  constructor(
    private readonly o: HostQueuesOptions,
    private readonly stopSignal: StopSignal,
    private readonly owner: QueueOwner,
  ) {}

  /** notices being sent, all hosts together */
  get active(): number {
    return this.sending;
  }

  /** notices waiting per host origin (hosts with nothing waiting or sending are absent) */
  depths(): Record<string, number> {
    const queueDepth: Record<string, number> = {};
    for (const w of this.workers.values()) queueDepth[w.key] = w.waiting.length;
    return queueDepth;
  }

  /** `n` joins its host's queue, and goes out as soon as its request and a sending slot let it. */
  add(n: PendingNotice): void {
    const worker = this.workerFor(n.request.hostKey);
    worker.waiting.push(n);
    this.trim(worker);
    this.pump(worker);
  }

  /** `n` is back from a failed attempt: in its enqueue place again, to wait out its backoff there. */
  requeue(worker: HostWorker, n: PendingNotice): void {
    let at = worker.waiting.findIndex((w) => w.seq > n.seq);
    if (at < 0) at = worker.waiting.length;
    worker.waiting.splice(at, 0, n);
    this.trim(worker);
  }

  /** Resolves when nothing is waiting or being sent. */
  whenIdle(): Promise<void> {
    if (this.workers.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stopping: every waiting notice is dropped (without a reason); how many there were. */
  dropWaiting(): number {
    let dropped = 0;
    for (const worker of this.workers.values()) {
      for (const n of worker.waiting.splice(0)) {
        this.owner.drop(worker, n, undefined);
        dropped++;
      }
    }
    return dropped;
  }

  /** Stopping: backoff timers are cancelled, and hosts with nothing being sent are forgotten. */
  retireAll(): void {
    for (const worker of [...this.workers.values()]) {
      if (worker.timer) clearTimeout(worker.timer);
      worker.timer = undefined;
      this.retireIfIdle(worker);
    }
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
    for (let i = 0; i < worker.waiting.length && worker.active < this.o.concurrency;) {
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
    if (worker.active < this.o.concurrency && wakeAt !== Infinity) this.wakeAt(worker, wakeAt);
    this.o.metrics.queueDepth(worker.key, worker.waiting.length);
  }

  private wakeAt(worker: HostWorker, at: number): void {
    if (worker.timer && worker.timerAt <= at) return;
    if (worker.timer) clearTimeout(worker.timer);
    worker.timerAt = at;
    worker.timer = setTimeout(
      () => {
        worker.timer = undefined;
        this.pump(worker);
      },
      Math.max(0, at - Date.now()),
    );
  }

  private send(worker: HostWorker, n: PendingNotice): void {
    worker.active++;
    this.sending++;
    n.attempts++;
    void this.owner.attempt(n).then((outcome) => {
      worker.active--;
      this.sending--;
      this.owner.conclude(worker, n, outcome);
      this.pump(worker);
      this.retireIfIdle(worker);
    });
  }

  /**
   * Keeps a host's waiting notices within maxQueue (plus at most concurrency being sent), dropping the oldest: a
   * notice back from a failed attempt counts like a new one, so an outage cannot grow the queue.
   */
  private trim(worker: HostWorker): void {
    while (worker.waiting.length > this.o.maxQueue) this.owner.drop(worker, worker.waiting.shift()!, 'callback host queue full');
  }

  private retireIfIdle(worker: HostWorker): void {
    if (worker.waiting.length > 0 || worker.active > 0 || this.workers.get(worker.key) !== worker) return;
    if (worker.timer) clearTimeout(worker.timer);
    worker.timer = undefined;
    this.workers.delete(worker.key);
    this.o.metrics.queueDepth(worker.key, 0);
    if (this.workers.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }
}
