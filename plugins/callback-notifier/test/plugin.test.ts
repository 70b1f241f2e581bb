import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { definePlugin, type PluginContext, type PluginDefinition } from '../../../plugin-sdk';
import { videoUnit } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { startRedis, type RedisServer } from '../../../test/support/redis';
import { streamFieldsToNotice } from '../src/redis-publisher';
import type { NoticePayload } from '../src/payload';
import { Receiver, until } from './helpers';

// End to end: the plugin as the kernel loads it (dist/plugins/callback-notifier/index.js), fed by real sessions over
// the real HTTP API, delivering to a real loopback receiver and a real redis-server.

const SIM = '013800138000';
const NORM_SIM = '13800138000';
const USER_TOKEN = 'user-token-7f3a';
const PASSWORD_FORMS = ['p%3Ass', 'p:ss', Buffer.from('us@er:p:ss').toString('base64')];
const EXPECTED_AUTH = 'Basic ' + Buffer.from('us@er:p:ss').toString('base64');

type StreamEntries = Array<[string, string[]]>;

/** An in-process plugin that hands the test its context, to push media into a stream as an ingest would. */
function probePlugin(): { def: PluginDefinition<object>; ctx: () => PluginContext<object> } {
  let captured: PluginContext<object> | undefined;
  const def = definePlugin<object>({
    name: 'probe',
    setup(ctx) {
      captured = ctx;
    },
  });
  return { def, ctx: () => captured! };
}

/** The value of one sample line of a Prometheus text exposition (0 when the series is absent). */
async function metric(gw: TestGateway, name: string): Promise<number> {
  const res = await fetch(gw.baseUrl + '/metrics');
  assert.equal(res.status, 200);
  const text = await res.text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

/** Polls an async condition until it holds; rejects after `ms`. */
async function eventually(cond: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function assertNoCredentialsIn(text: string): void {
  for (const secret of PASSWORD_FORMS) assert.ok(!text.includes(secret), `the log leaks the callback password (${secret})`);
}

describe('callback-notifier plugin (gateway end to end)', function () {
  this.timeout(30_000);

  describe('delivery to cb and to Redis', () => {
    let gw: TestGateway;
    let redis: RedisServer;
    let app: Redis;
    const receivers: Receiver[] = [];
    const probe = probePlugin();

    before(async () => {
      redis = await startRedis();
      app = new Redis(redis.url);
      app.on('error', () => undefined);
      const stub = stubMediaPlugin();
      gw = await startTestGateway({
        // the receivers below listen on loopback, which the plugin refuses unless told otherwise
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'probe', def: probe.def },
          { name: 'callback-notifier', config: { allowLoopback: true } },
        ],
        gateway: { instId: 'gw-e2e' },
        // the README's env name for the key, rather than the site file
        env: { GW_CALLBACK_NOTIFIER_REDIS_URL: redis.url },
        captureLogs: true,
      });
    });

    after(async () => {
      await gw?.stop();
      await Promise.all(receivers.splice(0).map((r) => r.close()));
      app?.disconnect();
      await redis?.stop();
    });

    async function receiver(answer?: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
      const r = await new Receiver(answer).start();
      receivers.push(r);
      return r;
    }

    async function open(over: Record<string, unknown>): Promise<{ reqId: string; playUrl: string; ready: boolean }> {
      const r = await gw.api('POST', '/strm/open', { user: { token: USER_TOKEN }, typ: 'live', simNo: SIM, chanId: 1, keepIntv: 600, ...over });
      assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
      return r.json.data[0];
    }

    async function close(reqId: string): Promise<void> {
      const r = await gw.api('POST', '/strm/close', { reqIds: [reqId] });
      assert.deepEqual(r.json.data, [{ reqId, closed: true }]);
    }

    /** What a JT/T 1078 ingest does at the first keyframe: the stream turns ready and waiting requests get `ready`. */
    function pushKeyframe(chanId: number): void {
      const stream = probe.ctx().sessions.findStream(NORM_SIM, chanId, 'live');
      assert.ok(stream, `stream ${NORM_SIM}_${chanId}_1 is open`);
      const pub = stream.media.attachPublisher();
      pub.setTrack({ kind: 'video', codec: 'h264', width: 352, height: 288 });
      pub.push(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: Buffer.from([0, 0, 0, 1, 0x65, 0x88]) }));
    }

    async function streamNotices(reqId: string): Promise<NoticePayload[]> {
      const entries = (await app.xrange('gw:strm_notif:demo', '-', '+')) as StreamEntries;
      return entries.map(([, fields]) => streamFieldsToNotice(fields)).filter((n) => n.reqId === reqId);
    }

    it('POSTs ready then closed to <cb>/strm_notif with the decisions.md payload and the cb credentials as Basic auth', async () => {
      const r = await receiver();
      const opened = await open({ chanId: 1, cb: `http://us%40er:p%3Ass@127.0.0.1:${r.port}/base` });
      assert.equal(opened.ready, false);
      pushKeyframe(1);
      // closed right away: it is queued while ready may still be on its way, and must not overtake it
      await close(opened.reqId);
      await r.waitForArrivals(2);

      assert.deepEqual(
        r.arrivals.map((a) => [a.path, a.body.act]),
        [
          ['/base/strm_notif', 'ready'],
          ['/base/strm_notif', 'closed'],
        ],
      );
      for (const a of r.arrivals) {
        assert.equal(a.authorization, EXPECTED_AUTH);
        assert.match(a.contentType ?? '', /^application\/json/);
      }
      assert.deepEqual(r.arrivals[0].body, {
        instId: 'gw-e2e',
        act: 'ready',
        reqId: opened.reqId,
        typ: 'live',
        simNo: SIM,
        chan: 1,
        mediaTyp: 'av',
        playUrl: opened.playUrl,
        vc: 'h264',
      });
      assert.deepEqual(r.arrivals[1].body, {
        instId: 'gw-e2e',
        act: 'closed',
        reqId: opened.reqId,
        typ: 'live',
        simNo: SIM,
        chan: 1,
        mediaTyp: 'av',
        closeCause: 1,
        closeReason: 'clientReq',
        vc: 'h264',
      });

      await until(() => gw.logText().includes('callback notice delivered'), 5000, 'the delivery log line');
      const text = gw.logText();
      // the cb was logged (redacted), so the absence of the password below is not an absence of logging
      assert.ok(text.includes(`us%40er:***@127.0.0.1:${r.port}/base`), 'deliveries are logged with the redacted cb');
      assertNoCredentialsIn(text);
      assert.ok(!text.includes(USER_TOKEN), 'the payload (play URL with the user token) is not logged');
      assert.equal(await metric(gw, 'gw_callback_notifier_delivered_total'), 2);
      assert.deepEqual(await streamNotices(opened.reqId), [], 'a request with cb is not published on the message queue');
    });

    it('retries a receiver that answers 503, and holds closed back until ready is through', async () => {
      const r = await receiver((_body, i) => (i === 0 ? { status: 503, headers: { 'retry-after': '0' } } : 200));
      const retriedBefore = await metric(gw, 'gw_callback_notifier_retried_total');
      const opened = await open({ chanId: 2, cb: `http://127.0.0.1:${r.port}/hooks/` });
      pushKeyframe(2);
      await close(opened.reqId);
      await r.waitForArrivals(3);
      assert.deepEqual(
        r.arrivals.map((a) => [a.path, a.body.act, a.answered]),
        [
          ['/hooks/strm_notif', 'ready', 503],
          ['/hooks/strm_notif', 'ready', 200],
          ['/hooks/strm_notif', 'closed', 200],
        ],
      );
      assert.equal(r.arrivals[0].authorization, undefined, 'no credentials in the cb, no Authorization header');
      assert.equal(await metric(gw, 'gw_callback_notifier_retried_total'), retriedBefore + 1);
    });

    it('publishes the notices of a request without cb on the Redis stream, readable through a consumer group', async () => {
      await app.xgroup('CREATE', 'gw:strm_notif:demo', 'e2e-app', '$', 'MKSTREAM');
      const publishedBefore = await metric(gw, 'gw_callback_notifier_mq_published_total');
      const opened = await open({ chanId: 3 });
      pushKeyframe(3);
      await close(opened.reqId);

      const read: StreamEntries = [];
      await eventually(
        async () => {
          const res = (await app.xreadgroup('GROUP', 'e2e-app', 'worker-1', 'COUNT', 10, 'STREAMS', 'gw:strm_notif:demo', '>')) as Array<
            [string, StreamEntries]
          > | null;
          if (res) read.push(...res[0][1]);
          return read.length >= 2;
        },
        10_000,
        'two notices on the Redis stream',
      );

      const notices = read.map(([, fields]) => streamFieldsToNotice(fields));
      assert.deepEqual(notices, [
        { instId: 'gw-e2e', act: 'ready', reqId: opened.reqId, typ: 'live', simNo: SIM, chan: 3, mediaTyp: 'av', playUrl: opened.playUrl, vc: 'h264' },
        {
          instId: 'gw-e2e',
          act: 'closed',
          reqId: opened.reqId,
          typ: 'live',
          simNo: SIM,
          chan: 3,
          mediaTyp: 'av',
          closeCause: 1,
          closeReason: 'clientReq',
          vc: 'h264',
        },
      ]);
      assert.equal(await app.xack('gw:strm_notif:demo', 'e2e-app', ...read.map(([id]) => id)), 2);
      assert.equal(await metric(gw, 'gw_callback_notifier_mq_published_total'), publishedBefore + 2);
    });
  });

  describe("a callback host refused by the host policy (the plugin's defaults refuse loopback)", () => {
    let gw: TestGateway;
    let receiver: Receiver;

    before(async () => {
      receiver = await new Receiver().start();
      const stub = stubMediaPlugin();
      gw = await startTestGateway({
        // no config: blockInternal and allowLoopback keep their defaults, which must refuse a loopback cb
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'callback-notifier', config: {} },
        ],
        captureLogs: true,
      });
    });

    after(async () => {
      await gw?.stop();
      await receiver?.close();
    });

    it('still answers the open with 0; the notice is logged as given up (without the password), counted, and never sent', async () => {
      const failedBefore = await metric(gw, 'gw_callback_notifier_failed_total');
      const r = await gw.api('POST', '/strm/open', {
        user: { token: USER_TOKEN },
        typ: 'live',
        simNo: SIM,
        chanId: 1,
        cb: `http://us%40er:p%3Ass@127.0.0.1:${receiver.port}/base`,
      });
      assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
      const reqId: string = r.json.data[0].reqId;
      const c = await gw.api('POST', '/strm/close', { reqIds: [reqId] });
      assert.equal(c.json.errCode, 0);

      await until(() => gw.logs.some((l) => l.reqId === reqId && l.msg === 'callback notice given up'), 10_000, 'the refusal log line');
      const line = gw.logs.find((l) => l.reqId === reqId && l.msg === 'callback notice given up')!;
      assert.equal(line.act, 'closed');
      assert.match(String(line.reason), /127\.0\.0\.1 is a loopback address, refused by the callback host policy/);
      assert.equal(line.cb, `http://us%40er:***@127.0.0.1:${receiver.port}/base`);
      assert.equal(line.attempts, 1, 'a policy refusal is not retried');
      assert.equal(await metric(gw, 'gw_callback_notifier_failed_total'), failedBefore + 1);
      assert.equal(receiver.arrivals.length, 0);
      assertNoCredentialsIn(gw.logText());
    });

    it('a cb the notifier could not use (query, fragment, colon in the user) is refused at open, naming cb, and not logged', async () => {
      for (const cb of [
        'https://cb.example.com/base?key=s3cr3t-query-value',
        'https://cb.example.com/base#s3cr3t-query-value',
        'https://a%3Ab:s3cr3t-query-value@cb.example.com/',
      ]) {
        const r = await gw.api('POST', '/strm/open', { user: { token: USER_TOKEN }, typ: 'live', simNo: SIM, chanId: 3, cb });
        assert.equal(r.json.errCode, -7, JSON.stringify(r.json));
        assert.match(r.json.message, /`cb`/);
      }
      assert.ok(!gw.logText().includes('s3cr3t-query-value'));
    });

    it('counts the notices of a request without cb as unrouted when no Redis is configured', async () => {
      const before = await metric(gw, 'gw_callback_notifier_unrouted_total');
      const r = await gw.api('POST', '/strm/open', { user: { token: USER_TOKEN }, typ: 'live', simNo: SIM, chanId: 2 });
      assert.equal(r.json.errCode, 0);
      await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId] });
      assert.equal(await metric(gw, 'gw_callback_notifier_unrouted_total'), before + 1);
    });
  });
});
