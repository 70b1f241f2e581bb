import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { CallbackDispatcher } from '../src/delivery';
import type { CallbackDispatcherOptions } from '../src/dispatcher-options';
import { HostPolicy } from '../src/host-policy';
import { promCallbackMetrics, type CallbackMetrics } from '../src/metrics';
import { memoryLogger, notice, Receiver, until, within } from './helpers';

const PASSWORD_FORMS = ['p:ss', 'p%3Ass', Buffer.from('us@er:p:ss').toString('base64')];
const EXPECTED_AUTH = 'Basic ' + Buffer.from('us@er:p:ss').toString('base64');

describe('callback-notifier: CallbackDispatcher', function () {
  this.timeout(30_000);

  let log: ReturnType<typeof memoryLogger>;
  const receivers: Receiver[] = [];
  const dispatchers: CallbackDispatcher[] = [];

  async function receiver(answer?: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
    const r = await new Receiver(answer).start();
    receivers.push(r);
    return r;
  }

  function dispatcher(opts: Partial<CallbackDispatcherOptions> = {}): CallbackDispatcher {
    // Short backoff so retries happen at once; each test sets the limits it is about.
    const d = new CallbackDispatcher({ logger: log.logger, backoffBaseMs: 5, backoffMaxMs: 20, ...opts });
    dispatchers.push(d);
    return d;
  }

  const cbOf = (r: Receiver, userInfo = 'us%40er:p%3Ass@') => `http://${userInfo}127.0.0.1:${r.port}/base/`;

  beforeEach(() => {
    log = memoryLogger();
  });

  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    // Every log line of every test, at trace level: the callback password never appears, in any form.
    assert.ok(log.lines.length > 0, 'the test should have logged something');
    for (const line of log.lines) {
      for (const secret of PASSWORD_FORMS) assert.ok(!line.includes(secret), `log line leaks credentials: ${line}`);
    }
  });

  it('POSTs ready then closed to <cb>/strm_notif with the payload and the percent-decoded Basic credentials', async () => {
    const r = await receiver();
    const d = dispatcher();
    const ready = notice('req-00000001', 'ready', {
      playUrl: 'http://127.0.0.1:7081/live/13800001111_1_1.flv?reqId=req-00000001&token=ut',
      ac: 'aac',
      vc: 'h264',
    });
    const closed = notice('req-00000001', 'closed', { closeCause: 1, closeReason: 'clientReq' });
    assert.equal(d.enqueue('req-00000001', cbOf(r), ready), true);
    assert.equal(d.enqueue('req-00000001', cbOf(r), closed), true);
    assert.equal(d.stats().pendingRequests, 1, 'credentials are held while notices are outstanding');
    await within(d.whenIdle(), 10_000, 'delivery');
    assert.deepEqual(
      r.arrivals.map((a) => [a.path, a.body.act]),
      [
        ['/base/strm_notif', 'ready'],
        ['/base/strm_notif', 'closed'],
      ],
    );
    assert.deepEqual(r.arrivals[0].body, ready);
    assert.deepEqual(r.arrivals[1].body, closed);
    for (const a of r.arrivals) {
      assert.equal(a.authorization, EXPECTED_AUTH);
      assert.equal(a.contentType, 'application/json');
    }
    const s = d.stats();
    assert.equal(s.delivered, 2);
    assert.equal(s.failed + s.retried + s.dropped, 0);
    assert.equal(s.pendingRequests, 0, 'credentials are forgotten after the final notice');
    assert.ok(
      log.lines.some((l) => l.includes('"cb":"http://us%40er:***@127.0.0.1:')),
      'logs name the redacted cb',
    );
  });

  it('sends no Authorization header when the cb has no credentials', async () => {
    const r = await receiver();
    const d = dispatcher();
    d.enqueue('k', cbOf(r, ''), notice('req-00000002', 'failed'));
    await within(d.whenIdle(), 10_000, 'delivery');
    assert.equal(r.arrivals.length, 1);
    assert.equal(r.arrivals[0].authorization, undefined);
  });

  it('retries 503 with backoff and delivers each notice exactly once, in order, closed held back while ready is retried', async () => {
    const r = await receiver((_body, i) => (i < 2 ? 503 : 200));
    const d = dispatcher();
    d.enqueue('k', cbOf(r), notice('req-00000003', 'ready'));
    d.enqueue('k', cbOf(r), notice('req-00000003', 'closed'));
    await within(d.whenIdle(), 10_000, 'delivery');
    assert.deepEqual(
      r.arrivals.map((a) => `${a.body.act}:${a.answered}`),
      ['ready:503', 'ready:503', 'ready:200', 'closed:200'],
    );
    const s = d.stats();
    assert.equal(s.delivered, 2);
    assert.equal(s.retried, 2);
    assert.equal(s.failed, 0);
  });

  it("does not retry a 400, and still sends the request's next notice", async () => {
    const r = await receiver((body) => (body.act === 'ready' ? 400 : 200));
    const d = dispatcher();
    d.enqueue('k', cbOf(r), notice('req-00000004', 'ready'));
    d.enqueue('k', cbOf(r), notice('req-00000004', 'closed'));
    await within(d.whenIdle(), 10_000, 'delivery');
    assert.deepEqual(
      r.arrivals.map((a) => `${a.body.act}:${a.answered}`),
      ['ready:400', 'closed:200'],
    );
    const s = d.stats();
    assert.equal(s.failed, 1);
    assert.equal(s.retried, 0);
    assert.equal(s.delivered, 1);
    assert.ok(log.lines.some((l) => l.includes('given up') && l.includes('HTTP 400')));
  });

  it('retries 429 after Retry-After, cut to retryAfterMaxMs, instead of its own (here huge) backoff', async () => {
    // First a Retry-After of an hour (must be capped, or the budget would be spent), then one of 0 seconds (must
    // be used: the backoff here would be ~10 minutes, beyond the budget).
    const r = await receiver((_b, i) =>
      i === 0 ? { status: 429, headers: { 'retry-after': '3600' } } : i === 1 ? { status: 503, headers: { 'retry-after': '0' } } : 200,
    );
    const d = dispatcher({ backoffBaseMs: 600_000, backoffMaxMs: 600_000, random: () => 0.99, retryAfterMaxMs: 20, retryForMs: 60_000 });
    d.enqueue('k', cbOf(r), notice('req-00000005', 'ready'));
    await within(d.whenIdle(), 10_000, 'delivery');
    assert.deepEqual(
      r.arrivals.map((a) => a.answered),
      [429, 503, 200],
    );
    assert.equal(d.stats().delivered, 1);
  });

  it('gives up when the retry budget is spent, counts it, forgets the credentials and moves on to the next notice', async () => {
    const r = await receiver((body) => (body.act === 'ready' ? 503 : 200));
    const d = dispatcher({ retryForMs: 150 });
    d.enqueue('k', cbOf(r), notice('req-00000006', 'ready'));
    d.enqueue('k', cbOf(r), notice('req-00000006', 'closed'));
    await within(d.whenIdle(), 10_000, 'give-up');
    const readies = r.arrivals.filter((a) => a.body.act === 'ready');
    assert.ok(readies.length >= 1 && readies.every((a) => a.answered === 503));
    assert.equal(r.arrivals.at(-1)!.body.act, 'closed', 'closed comes after every ready attempt');
    const s = d.stats();
    assert.equal(s.failed, 1);
    assert.equal(s.delivered, 1);
    assert.equal(s.retried, readies.length - 1);
    assert.equal(s.pendingRequests, 0);
    assert.ok(log.lines.some((l) => l.includes('given up') && l.includes('retry budget')));
  });

  it('retries connection failures (nothing listening) until the budget is spent', async () => {
    const r = await receiver();
    const cb = cbOf(r);
    await r.close();
    receivers.splice(receivers.indexOf(r), 1);
    const d = dispatcher({ retryForMs: 100 });
    d.enqueue('k', cb, notice('req-00000007', 'ready'));
    await within(d.whenIdle(), 10_000, 'give-up');
    const s = d.stats();
    assert.equal(s.failed, 1);
    assert.ok(log.lines.some((l) => l.includes('ECONNREFUSED')));
  });

  it('an attempt left unanswered past attemptTimeoutMs is retried, then given up when the budget is spent', async () => {
    const dead = await receiver(() => 'hang');
    const d = dispatcher({ attemptTimeoutMs: 100, retryForMs: 1000 });
    d.enqueue('k', cbOf(dead), notice('req-tout-0001', 'ready'));
    await within(d.whenIdle(), 10_000, 'give-up');
    assert.ok(dead.arrivals.length >= 2, `the timed-out attempt is retried (${dead.arrivals.length} attempts)`);
    assert.equal(d.stats().failed, 1);
    assert.equal(d.stats().retried, dead.arrivals.length - 1);
    assert.ok(log.lines.some((l) => l.includes('given up') && l.includes('ETIMEDOUT')));
  });

  it('keeps each request in order while sending several requests to one host at once, within the concurrency bound', async () => {
    // ready answers slowly and closed at once: unordered sending would let closed overtake ready.
    const answeredReady = new Set<string>();
    const overtaken: string[] = [];
    const r = await receiver((body) => {
      if (body.act === 'closed' && !answeredReady.has(body.reqId)) overtaken.push(body.reqId);
      if (body.act === 'ready') setTimeout(() => answeredReady.add(body.reqId), 25);
      return body.act === 'ready' ? { status: 200, delayMs: 30 } : 200;
    });
    const d = dispatcher({ concurrencyPerHost: 3 });
    for (let i = 0; i < 9; i++) {
      const id = `req-ordr-${i}`;
      d.enqueue(id, cbOf(r), notice(id, 'ready'));
      d.enqueue(id, cbOf(r), notice(id, 'closed'));
    }
    await within(d.whenIdle(), 10_000, 'delivery');
    assert.equal(r.arrivals.length, 18);
    assert.deepEqual(overtaken, []);
    for (let i = 0; i < 9; i++) {
      const acts = r.arrivals.filter((a) => a.body.reqId === `req-ordr-${i}`).map((a) => a.body.act);
      assert.deepEqual(acts, ['ready', 'closed']);
    }
    assert.ok(r.maxOpen <= 3, `at most 3 at once, saw ${r.maxOpen}`);
    assert.ok(r.maxOpen >= 2, 'requests to one host are sent in parallel');
  });

  it('a host that accepts and never answers does not delay another host; stop() aborts the hung request', async () => {
    const dead = await receiver(() => 'hang');
    const alive = await receiver();
    const d = dispatcher({ attemptTimeoutMs: 60_000 });
    d.enqueue('a', cbOf(dead), notice('req-dead-0001', 'ready'));
    d.enqueue('a', cbOf(dead), notice('req-dead-0001', 'closed'));
    await dead.waitForArrivals(1);
    d.enqueue('b', cbOf(alive), notice('req-live-0001', 'ready'));
    d.enqueue('b', cbOf(alive), notice('req-live-0001', 'closed'));
    await alive.waitForArrivals(2);
    await until(() => d.stats().delivered === 2, 10_000, 'delivery to the live host');
    assert.equal(dead.arrivals.length, 1, 'the dead host still holds the first notice');
    assert.equal(dead.open, 1);
    const s = d.stats();
    assert.equal(s.inFlight, 1);
    assert.equal(s.queueDepth[`http://127.0.0.1:${dead.port}`], 1, 'its closed waits behind its ready');

    await within(d.stop(), 5_000, 'stop');
    const after = d.stats();
    assert.equal(after.dropped, 2, 'the hung notice and the one behind it are dropped at stop');
    assert.equal(after.pendingRequests, 0);
    await until(() => dead.open === 0, 5_000, 'the hung request being aborted');
    assert.equal(d.enqueue('c', cbOf(alive), notice('req-late-0001', 'ready')), false, 'nothing is queued after stop');
  });

  it('on queue overflow drops the oldest waiting notice, logs and counts it, and reports the depth', async () => {
    const dead = await receiver(() => 'hang');
    const seen: string[] = [];
    const depths: number[] = [];
    const metrics: CallbackMetrics = {
      delivered: () => seen.push('delivered'),
      retried: () => seen.push('retried'),
      failed: () => seen.push('failed'),
      dropped: () => seen.push('dropped'),
      queueDepth: (_h, n) => depths.push(n),
    };
    const d = dispatcher({ concurrencyPerHost: 1, maxQueuePerHost: 3, metrics });
    for (let i = 1; i <= 6; i++) d.enqueue(`r${i}`, cbOf(dead), notice(`req-over-000${i}`, 'ready'));
    const s = d.stats();
    assert.equal(s.dropped, 2);
    assert.equal(s.inFlight, 1);
    assert.deepEqual(s.queueDepth, { [`http://127.0.0.1:${dead.port}`]: 3 });
    assert.deepEqual(seen, ['dropped', 'dropped']);
    assert.equal(depths.at(-1), 3);
    const droppedIds = log.lines.filter((l) => l.includes('callback notice dropped')).map((l) => JSON.parse(l).reqId);
    assert.deepEqual(droppedIds, ['req-over-0002', 'req-over-0003'], 'the oldest waiting ones go; the one being sent stays');
    assert.equal(s.pendingRequests, 4, 'dropped notices release their credentials');
    await dead.waitForArrivals(1);
    assert.equal(dead.arrivals[0].body.reqId, 'req-over-0001');
  });

  it('exports delivered/retried/failed/dropped counters and a per-host queue gauge through prom-client', async () => {
    const registry = new Registry();
    let readyTries = 0;
    const r = await receiver((body) => (body.act === 'failed' ? 404 : readyTries++ === 0 ? 502 : 200));
    const d = dispatcher({ metrics: promCallbackMetrics(registry, 'test_cb_') });
    d.enqueue('k1', cbOf(r), notice('req-prom-0001', 'ready'));
    d.enqueue('k2', cbOf(r), notice('req-prom-0002', 'failed'));
    await within(d.whenIdle(), 10_000, 'delivery');
    const text = await registry.metrics();
    assert.match(text, /^test_cb_delivered_total 1$/m);
    assert.match(text, /^test_cb_retried_total 1$/m);
    assert.match(text, /^test_cb_failed_total 1$/m);
    assert.match(text, /^test_cb_dropped_total 0$/m);
    assert.doesNotMatch(text, /test_cb_queue_depth\{/, 'an idle host leaves no gauge series behind');
  });

  it('refuses, without retrying, a callback host the policy blocks; and a bad cb is refused at enqueue', async () => {
    const r = await receiver();
    const d = dispatcher({ hostPolicy: new HostPolicy({ blockInternal: true }) });
    assert.equal(d.enqueue('k', cbOf(r), notice('req-pol-00001', 'ready')), true);
    await within(d.whenIdle(), 10_000, 'refusal');
    assert.equal(r.arrivals.length, 0);
    assert.equal(d.stats().failed, 1);
    assert.equal(d.stats().retried, 0);
    assert.ok(log.lines.some((l) => l.includes('127.0.0.1 is a loopback address, refused by the callback host policy')));

    assert.equal(d.enqueue('k', 'ftp://us%40er:p%3Ass@127.0.0.1/x', notice('req-pol-00002', 'ready')), false);
    assert.equal(d.stats().failed, 2);
    assert.ok(log.lines.some((l) => l.includes('scheme must be http or https')));
  });
});
