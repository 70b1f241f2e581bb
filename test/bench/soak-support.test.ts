import assert from 'node:assert/strict';
import * as http from 'node:http';
import { CallbackReceiver } from './support/callback-receiver';
import { NoticeLedger, type ReceivedNotice } from './support/notice-ledger';
import { poisson } from './support/soak-context';
import { prng } from '../support/prng';
import { growth, median, slope, verdict, type Point, type VerdictInput } from './support/soak-stats';
import { parseSoakArgs } from './soak-options';
import { BENCHES } from './run';

describe('soak support: NoticeLedger', () => {
  const opened = (l: NoticeLedger, id: string, ready: boolean, at = 0) => {
    l.opening(id, 'c1', at);
    l.opened(id, ready);
  };
  const rx = (l: NoticeLedger, reqId: string, act: string, closeCause?: number, at = 100) => l.receive({ reqId, act, closeCause, at });

  it('accepts ready then closed(1) for a client-closed request, and nothing for one opened ready', () => {
    const l = new NoticeLedger();
    opened(l, 'a', false);
    l.sawReady('a');
    opened(l, 'b', true);
    l.closedByClient('a', 50);
    l.closedByClient('b', 60);
    rx(l, 'a', 'ready');
    rx(l, 'a', 'closed', 1, 70);
    rx(l, 'b', 'closed', 1, 65);
    const s = l.summary(1000);
    assert.equal(s.pendingFinals.length, 0);
    assert.equal(s.missingReady.length, 0);
    assert.deepEqual(s.duplicates, []);
    assert.deepEqual(s.orderViolations, []);
    assert.deepEqual(s.unexpectedCauses, []);
    assert.deepEqual(s.causes, { 1: 2 });
    assert.equal(s.finalDelayMs.max, 20);
  });

  it('owes a final to every ended request and a ready to one seen ready after a not-ready open', () => {
    const l = new NoticeLedger();
    opened(l, 'a', false);
    l.sawReady('a');
    l.closedByClient('a', 10);
    opened(l, 'b', false); // never seen ready: no ready owed
    l.goneAtGateway('b', 20, 'keep answered false', [2, 6]);
    opened(l, 'c', false); // still open: nothing owed yet
    const s = l.summary(1020);
    assert.deepEqual(
      s.pendingFinals.map((p) => [p.reqId, p.ageMs]),
      [
        ['a', 1010],
        ['b', 1000],
      ],
    );
    assert.deepEqual(
      s.missingReady.map((p) => p.reqId),
      ['a'],
    );
  });

  it('does not owe a ready when the final is failed (the gateway never saw the stream ready)', () => {
    const l = new NoticeLedger();
    opened(l, 'a', false);
    l.sawReady('a');
    l.goneAtGateway('a', 5, 'x', [2, 6]);
    rx(l, 'a', 'failed', 6);
    assert.deepEqual(l.summary(10).missingReady, []);
  });

  it('flags duplicates, notices after the final, a ready that is not due and a failed after ready', () => {
    const l = new NoticeLedger();
    opened(l, 'dup', false);
    rx(l, 'dup', 'ready');
    rx(l, 'dup', 'ready');
    opened(l, 'late', false);
    rx(l, 'late', 'closed', 1);
    rx(l, 'late', 'ready');
    opened(l, 'twice', false);
    rx(l, 'twice', 'closed', 1);
    rx(l, 'twice', 'failed', 2);
    opened(l, 'notdue', true);
    rx(l, 'notdue', 'ready');
    opened(l, 'rf', false);
    rx(l, 'rf', 'ready');
    rx(l, 'rf', 'failed', 2);
    const s = l.summary(0);
    assert.deepEqual(s.duplicates, [{ reqId: 'dup', act: 'ready' }]);
    assert.deepEqual(s.orderViolations.map((v) => v.reqId).sort(), ['late', 'notdue', 'rf', 'twice']);
  });

  it('judges the cause by how the request ended, even when the final came before the soak noticed the end', () => {
    const l = new NoticeLedger();
    opened(l, 'client', true);
    l.closedByClient('client', 0);
    rx(l, 'client', 'closed', 5);
    opened(l, 'away', true);
    rx(l, 'away', 'closed', 2, 10);
    l.goneAtGateway('away', 20, 'terminal away past the grace', [2]);
    opened(l, 'kept', true);
    l.goneAtGateway('kept', 0, 'keep answered false', [2, 6]);
    rx(l, 'kept', 'closed', 5);
    opened(l, 'free', true);
    l.goneAtGateway('free', 0, 'anything', []);
    rx(l, 'free', 'closed', 12);
    const s = l.summary(100);
    assert.deepEqual(
      s.unexpectedCauses.map((u) => [u.reqId, u.cause, u.expected]),
      [
        ['client', 5, '1'],
        ['kept', 5, '2 or 6'],
      ],
    );
    assert.equal(s.pendingFinals.length, 0);
  });

  it('lists the requests that ended in a window with when their final arrived (the outage figure)', () => {
    const l = new NoticeLedger();
    opened(l, 'before', true);
    l.closedByClient('before', 5);
    opened(l, 'in', true);
    l.closedByClient('in', 15);
    rx(l, 'in', 'closed', 1, 40);
    opened(l, 'owed', true);
    l.goneAtGateway('owed', 18, 'x', [2]);
    assert.deepEqual(l.endedBetween(10, 20), [
      { reqId: 'in', endAt: 15, finalAt: 40 },
      { reqId: 'owed', endAt: 18, finalAt: undefined },
    ]);
  });

  it('counts notices for reqIds it does not know, and for opens that were refused', () => {
    const l = new NoticeLedger();
    rx(l, 'stranger', 'closed', 1);
    l.opening('refused', 'c1', 0);
    rx(l, 'refused', 'ready');
    l.notOpened('refused');
    const s = l.summary(0);
    assert.equal(s.unknown, 2);
    assert.equal(s.requests, 0);
    assert.throws(() => l.opened('nope', true), /without opening/);
  });
});

describe('soak support: growth and verdict', () => {
  const saw = (n: number, perS: number): Point[] => Array.from({ length: n }, (_x, i) => ({ t: i * 5, v: 300 + (i % 4) * 10 + perS * i * 5 }));

  it('slope, median and growth', () => {
    assert.equal(
      slope([
        { t: 0, v: 1 },
        { t: 2, v: 5 },
      ]),
      2,
    );
    assert.ok(Number.isNaN(slope([{ t: 0, v: 1 }])));
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 2, 3]), 2.5);
    const flat = growth(saw(100, 0), 0);
    assert.ok(Math.abs(flat.perHour) < 20, `flat saw-tooth: ${flat.perHour}`);
    assert.ok(Math.abs(flat.rise) <= 10);
    // 0.05 MB/s = 180 MB/h; the warm-up samples (a steep start) are left out
    const rising = growth([{ t: 0, v: 0 }, { t: 5, v: 100 }, ...saw(100, 0.05).map((p) => ({ t: p.t + 10, v: p.v }))], 10);
    assert.equal(rising.samples, 100);
    assert.ok(Math.abs(rising.perHour - 180) < 20, `rising: ${rising.perHour}`);
    assert.ok(rising.rise > 15);
  });

  const clean: VerdictInput = {
    rss: growth(
      saw(40, 0).map((p) => ({ t: p.t, v: 300 })),
      0,
    ),
    fdIdleStart: 26,
    fdIdleEnd: 27,
    fdOther: growth(
      saw(40, 0).map((p) => ({ t: p.t, v: 25 })),
      0,
    ),
    leakedRequests: 0,
    requestsLeft: 0,
    streamsLeft: 0,
    linksLeft: 0,
    playersLeft: 0,
    lostFinals: 0,
    lostReady: 0,
    duplicates: 0,
    orderViolations: 0,
    notifierFailed: 0,
    notifierDropped: 0,
    unexpectedCauses: 0,
  };
  const limits = { rssMBPerHour: 50, rssMinRiseMB: 20, fdSlack: 16 };

  it('passes a clean run and fails each leak or lost notice', () => {
    assert.deepEqual(verdict(clean, limits), { ok: true, failures: [], warnings: [] });
    const fails = (patch: Partial<VerdictInput>, re: RegExp) => {
      const v = verdict({ ...clean, ...patch }, limits);
      assert.equal(v.ok, false, JSON.stringify(patch));
      assert.match(v.failures.join('\n'), re);
    };
    fails({ rss: growth(saw(100, 0.1), 0) }, /RSS grows/);
    fails({ fdIdleEnd: 60 }, /descriptors/);
    fails({ leakedRequests: 1 }, /listed by the gateway/);
    fails({ streamsLeft: 2 }, /stream\(s\) left/);
    fails({ playersLeft: 1 }, /player\(s\) still counted/);
    fails({ lostFinals: 3 }, /closed\/failed notice/);
    fails({ lostReady: 1 }, /ready notice/);
    fails({ duplicates: 1 }, /duplicate/);
    fails({ orderViolations: 1 }, /out of order/);
  });

  it('only warns on a steep slope without a rise, on notifier give-ups and on unexpected causes', () => {
    // a short run's few samples: a steep slope but a small rise
    const short = growth(
      [
        { t: 0, v: 100 },
        { t: 5, v: 101 },
        { t: 10, v: 100.5 },
        { t: 15, v: 102 },
      ],
      0,
    );
    const v = verdict({ ...clean, rss: short, notifierFailed: 1, unexpectedCauses: 2 }, limits);
    assert.equal(v.ok, true);
    assert.equal(v.warnings.length, 3);
  });
});

describe('soak support: churn arrivals', () => {
  it('draws Poisson counts with the asked mean, small and large', () => {
    const rnd = prng(7);
    for (const mean of [0.02, 0.8, 4, 50]) {
      let sum = 0;
      const n = 20_000;
      for (let i = 0; i < n; i++) sum += poisson(rnd, mean);
      assert.ok(Math.abs(sum / n - mean) < Math.max(0.01, mean * 0.05), `mean ${mean}: got ${sum / n}`);
    }
    assert.equal(poisson(rnd, 0), 0);
  });
});

describe('soak support: arguments', () => {
  it('derives the outage, reports and warm-up from the length, and refuses an outage past the retry budget', () => {
    const d = parseSoakArgs([]);
    assert.equal(d.minutes, 30);
    assert.equal(d.terminals, 500);
    assert.equal(d.clients, 200);
    assert.equal(d.outageAt, 600);
    assert.equal(d.outageSeconds, 60);
    assert.equal(d.reportSeconds, 60);
    assert.equal(d.warmupSeconds, 300);
    const s = parseSoakArgs(['--minutes', '2', '--terminals', '50', '--clients', '20', '--hold', '3,10']);
    assert.deepEqual([s.outageAt, s.outageSeconds, s.reportSeconds, s.warmupSeconds, s.holdMin, s.holdMax], [40, 30, 30, 24, 3, 10]);
    assert.throws(() => parseSoakArgs(['--outage-seconds', '100']), /retry budget/);
    assert.throws(() => parseSoakArgs(['--minutes', '2', '--outage-at', '100', '--outage-seconds', '30']), /within the run/);
    assert.throws(() => parseSoakArgs(['--hold', '10,60']), /55 s/);
    assert.throws(() => parseSoakArgs(['--terminals', 'x']), /whole number/);
    assert.throws(() => parseSoakArgs(['--bogus']), /unknown argument/);
  });

  it('is registered with the dispatcher', () => {
    assert.ok(BENCHES.soak);
  });
});

describe('soak support: CallbackReceiver', () => {
  const post = (port: number, path: string, body: unknown): Promise<number> =>
    new Promise((resolve, reject) => {
      const data = Buffer.from(JSON.stringify(body));
      const req = http.request(
        { host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': data.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(data);
    });

  it('records notices, refuses connections while down, and comes back on the same port', async () => {
    const got: ReceivedNotice[] = [];
    const r = new CallbackReceiver((n) => got.push(n));
    const port = await r.start();
    try {
      assert.equal(await post(port, '/cb/c1/strm_notif', { reqId: 'x1', act: 'closed', closeCause: 1 }), 204);
      assert.equal(await post(port, '/cb/c1/other', { reqId: 'x1', act: 'closed' }), 404);
      assert.equal(await post(port, '/cb/c1/strm_notif', { act: 'closed' }), 400);
      await r.goDown('refuse');
      await assert.rejects(post(port, '/cb/c1/strm_notif', { reqId: 'x2', act: 'ready' }), /ECONNREFUSED/);
      await r.comeBack();
      assert.equal(r.port, port);
      assert.equal(await post(port, '/cb/c1/strm_notif', { reqId: 'x2', act: 'ready' }), 204);
      await r.goDown('503');
      assert.equal(await post(port, '/cb/c1/strm_notif', { reqId: 'x3', act: 'ready' }), 503);
      await r.comeBack();
      assert.deepEqual(
        got.map((n) => [n.reqId, n.act, n.closeCause]),
        [
          ['x1', 'closed', 1],
          ['x2', 'ready', undefined],
        ],
      );
      assert.equal(r.accepted, 2);
      assert.equal(r.refused, 1);
      assert.equal(r.rejected, 2);
    } finally {
      await r.stop();
    }
  });
});
