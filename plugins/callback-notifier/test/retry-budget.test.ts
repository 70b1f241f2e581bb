import assert from 'node:assert/strict';
import { CallbackDispatcher } from '../src/delivery';
import type { CallbackDispatcherOptions } from '../src/dispatcher-options';
import type { CallbackMetrics } from '../src/metrics';
import type { NoticePayload } from '../src/payload';
import { memoryLogger, notice, Receiver, within, type Arrival } from './helpers';

// The retry budget (retryForMs) against a real receiver on loopback that is down for most of it, in real time: the
// dispatcher's timers are Node's own, so the budget is short (seconds) instead of a manual clock. The backoff is the
// production one (0.5 s doubling to 30 s), so a drawn delay overshoots the budget as it does with 120 s in production.

/** Timer lateness plus one loopback POST: how far past its deadline a notice's last attempt may still arrive. */
const SLACK_MS = 250;
/** How early Node may fire a timer relative to Date.now(). */
const EARLY_MS = 25;

/** A seeded jitter source: the backoff draws are the same on every run, and not all alike as a constant would make them. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleepUntil = (at: number) => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
const keyOf = (reqId: string, act: NoticePayload['act']) => `${reqId}:${act}`;

describe('callback-notifier: the retry budget against a receiver that is down for most of it', function () {
  this.timeout(30_000);

  let log: ReturnType<typeof memoryLogger>;
  const receivers: Receiver[] = [];
  const dispatchers: CallbackDispatcher[] = [];

  function dispatcher(opts: Partial<CallbackDispatcherOptions>): CallbackDispatcher {
    const d = new CallbackDispatcher({ logger: log.logger, random: seeded(1078), ...opts });
    dispatchers.push(d);
    return d;
  }

  async function receiver(answer?: ConstructorParameters<typeof Receiver>[0], port = 0): Promise<Receiver> {
    const r = await new Receiver(answer).start(port);
    receivers.push(r);
    return r;
  }

  /** A loopback port nothing listens on (for now): connections to it are refused until a receiver takes it. */
  async function closedPort(): Promise<number> {
    const r = await new Receiver().start();
    await r.close();
    return r.port;
  }

  /** Queues each request's notice of `act` for `cb`, remembering when, for the deadline checks. */
  function enqueueAll(d: CallbackDispatcher, cb: string, ids: string[], act: NoticePayload['act'], queuedAt: Map<string, number>): void {
    for (const id of ids) {
      queuedAt.set(keyOf(id, act), Date.now());
      assert.equal(d.enqueue(id, cb, notice(id, act)), true);
    }
  }

  const givenUp = () =>
    log.lines
      .map((l) => JSON.parse(l) as { msg: string; reqId: string; act: NoticePayload['act']; reason: string; time: number })
      .filter((l) => l.msg === 'callback notice given up');

  /**
   * Every notice was delivered exactly once, each request's ready before its closed, and no attempt (delivered or not)
   * reached the receiver later than its notice's budget allows.
   */
  function assertAllDeliveredWithinBudget(r: Receiver, ids: string[], queuedAt: Map<string, number>, budgetMs: number): void {
    const late = r.arrivals.filter((a) => a.at > queuedAt.get(keyOf(a.body.reqId, a.body.act))! + budgetMs + SLACK_MS);
    assert.deepEqual(late.map(show), [], 'no attempt after the budget');
    for (const id of ids) {
      const delivered = r.arrivals.filter((a) => a.body.reqId === id && a.answered === 200).map((a) => a.body.act);
      assert.deepEqual(delivered, ['ready', 'closed'], `${id}: each notice delivered once, ready before closed`);
      const acts = r.arrivals.filter((a) => a.body.reqId === id).map((a) => a.body.act);
      assert.ok(acts.indexOf('closed') > acts.lastIndexOf('ready'), `${id}: closed is not sent while its ready is still being retried`);
    }
    assert.deepEqual(givenUp(), [], 'nothing given up');
  }

  function show(a: Arrival): string {
    return `${a.body.reqId}:${a.body.act}:${a.answered}`;
  }

  beforeEach(() => {
    log = memoryLogger();
  });

  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  it('connections refused for 90% of the budget: every queued notice arrives once the receiver is back, in order, none after the budget', async () => {
    // A long outage scaled down 40 times (120 s budget, receiver back at 115 s): 5 requests, more than the 4
    // sending slots, each with a ready queued at the start of the outage and its closed a little later.
    const budget = 3000;
    const port = await closedPort();
    const cb = `http://127.0.0.1:${port}/hooks`;
    const d = dispatcher({ retryForMs: budget });
    const ids = [1, 2, 3, 4, 5].map((i) => `req-outage-00${i}`);
    const queuedAt = new Map<string, number>();
    const t0 = Date.now();
    enqueueAll(d, cb, ids, 'ready', queuedAt);
    await sleepUntil(t0 + 300);
    enqueueAll(d, cb, ids, 'closed', queuedAt);
    await sleepUntil(t0 + 2700);
    assert.equal(d.stats().failed, 0, 'nothing is given up before its budget is spent');
    const r = await receiver(() => 200, port);
    await within(d.whenIdle(), budget + 3000, 'delivery');

    assert.equal(r.arrivals.length, 10);
    assertAllDeliveredWithinBudget(r, ids, queuedAt, budget);
    const s = d.stats();
    assert.equal(s.delivered, 10);
    assert.equal(s.failed + s.dropped, 0);
    assert.equal(s.pendingRequests, 0);
    assert.ok(s.retried > 0);
  });

  it('503 for 90% of the budget, 6 requests on 2 sending slots: a notice waiting out a backoff does not starve the queue behind it', async () => {
    const budget = 3000;
    let t0 = 0;
    const r = await receiver(() => (Date.now() < t0 + 2700 ? 503 : 200));
    const cb = `http://127.0.0.1:${r.port}/hooks`;
    const d = dispatcher({ retryForMs: budget, concurrencyPerHost: 2 });
    const ids = [1, 2, 3, 4, 5, 6].map((i) => `req-busy-000${i}`);
    const queuedAt = new Map<string, number>();
    t0 = Date.now();
    enqueueAll(d, cb, ids, 'ready', queuedAt);
    await sleepUntil(t0 + 300);
    enqueueAll(d, cb, ids, 'closed', queuedAt);
    await within(d.whenIdle(), budget + 3000, 'delivery');

    assertAllDeliveredWithinBudget(r, ids, queuedAt, budget);
    for (const id of ids) {
      assert.ok(
        r.arrivals.some((a) => a.body.reqId === id && a.answered === 503),
        `${id} was tried during the outage, not only after it`,
      );
    }
    assert.ok(r.maxOpen <= 2, `at most 2 at once, saw ${r.maxOpen}`);
    const s = d.stats();
    assert.equal(s.delivered, 12);
    assert.equal(s.failed + s.dropped, 0);
    assert.equal(s.retried, r.arrivals.filter((a) => a.answered === 503).length, 'one retry counted per failed attempt');
  });

  it('a budget that runs out while the receiver is still down: a last attempt at the deadline, then given up once (logged, counted), and the next notice goes on', async () => {
    const budget = 1000;
    let t0 = 0;
    const r = await receiver(() => (Date.now() < t0 + 1500 ? 503 : 200));
    const cb = `http://127.0.0.1:${r.port}/hooks`;
    let failedMetric = 0;
    const metrics: CallbackMetrics = { delivered() {}, retried() {}, failed: () => void failedMetric++, dropped() {}, queueDepth() {} };
    const d = dispatcher({ retryForMs: budget, metrics });
    const ids = [1, 2, 3].map((i) => `req-spent-00${i}`);
    const queuedAt = new Map<string, number>();
    t0 = Date.now();
    enqueueAll(d, cb, ids, 'ready', queuedAt);
    // queued before the receiver is back, with a budget that lasts past it
    await sleepUntil(t0 + 700);
    enqueueAll(d, cb, ids, 'closed', queuedAt);
    await within(d.whenIdle(), budget + 3000, 'give-up and delivery');

    const ups = givenUp();
    assert.deepEqual(
      ups.map((l) => keyOf(l.reqId, l.act)).sort(),
      ids.map((id) => keyOf(id, 'ready')),
      'each ready given up exactly once',
    );
    for (const up of ups) {
      const deadline = queuedAt.get(keyOf(up.reqId, 'ready'))! + budget;
      assert.match(up.reason, /HTTP 503; retry budget of 1000 ms spent/);
      assert.ok(up.time >= deadline - EARLY_MS, `${up.reqId}: given up ${deadline - up.time} ms before its deadline`);
      const readies = r.arrivals.filter((a) => a.body.reqId === up.reqId && a.body.act === 'ready');
      assert.ok(readies.every((a) => a.answered === 503));
      const last = readies.at(-1)!;
      assert.ok(last.at >= deadline - EARLY_MS, `${up.reqId}: last attempt ${deadline - last.at} ms before the deadline, none at it`);
      assert.ok(last.at <= deadline + SLACK_MS, `${up.reqId}: attempted ${last.at - deadline} ms after the deadline`);
    }
    for (const id of ids) {
      const closed = r.arrivals.filter((a) => a.body.reqId === id && a.body.act === 'closed');
      assert.equal(closed.at(-1)?.answered, 200, `${id}: closed delivered after its ready was given up`);
      assert.ok(closed.every((a) => a.at <= queuedAt.get(keyOf(id, 'closed'))! + budget + SLACK_MS));
    }
    const s = d.stats();
    assert.equal(s.failed, 3);
    assert.equal(failedMetric, 3);
    assert.equal(s.delivered, 3);
    assert.equal(s.dropped, 0);
    assert.equal(s.pendingRequests, 0, 'the given-up notices released their credentials');
  });

  it('stays bounded during an outage: past maxQueuePerHost the oldest waiting notice goes, even one waiting out a backoff', async () => {
    const port = await closedPort();
    const cb = `http://127.0.0.1:${port}/hooks`;
    const host = `http://127.0.0.1:${port}`;
    const d = dispatcher({ retryForMs: 2000, concurrencyPerHost: 1, maxQueuePerHost: 3 });
    const ids = Array.from({ length: 10 }, (_, i) => `req-bound-00${i}`);
    const t0 = Date.now();
    for (const id of ids) d.enqueue(id, cb, notice(id, 'ready'));
    let maxDepth = 0;
    let maxInFlight = 0;
    while (Date.now() < t0 + 1000) {
      const s = d.stats();
      maxDepth = Math.max(maxDepth, s.queueDepth[host] ?? 0);
      maxInFlight = Math.max(maxInFlight, s.inFlight);
      await new Promise((res) => setTimeout(res, 2));
    }
    const r = await receiver(() => 200, port);
    await within(d.whenIdle(), 4000, 'delivery');

    assert.ok(maxDepth <= 3, `at most 3 waiting, saw ${maxDepth}`);
    assert.ok(maxInFlight <= 1, `at most 1 being sent, saw ${maxInFlight}`);
    const dropped = log.lines.filter((l) => l.includes('callback notice dropped')).map((l) => JSON.parse(l) as { reqId: string; reason: string });
    assert.deepEqual(dropped.map((l) => l.reqId).sort(), ids.slice(0, 7), 'the oldest go, the first one too once it is back from its failed attempt');
    assert.ok(dropped.every((l) => l.reason === 'callback host queue full'));
    // each retries on its own backoff, so across requests they may come back in any order
    assert.deepEqual(r.arrivals.map((a) => a.body.reqId).sort(), ids.slice(7), 'the newest are delivered');
    const s = d.stats();
    assert.equal(s.dropped, 7);
    assert.equal(s.delivered, 3);
    assert.equal(s.failed, 0);
    assert.equal(s.pendingRequests, 0);
  });
});
