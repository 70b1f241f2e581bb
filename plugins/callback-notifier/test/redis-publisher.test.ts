import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { startRedis, type RedisServer } from '../../../test/support/redis';
import { redactUrlPassword as redactRedisUrl } from '../../../plugin-sdk';
import { RedisNoticePublisher, noticeToStreamFields, streamFieldsToNotice } from '../src/redis-publisher';
import { memoryLogger, notice, until, within } from './helpers';

type StreamEntries = Array<[string, string[]]>;

describe('callback-notifier: RedisNoticePublisher (real redis-server)', function () {
  this.timeout(30_000);

  let server: RedisServer | undefined;
  const cleanups: Array<() => unknown> = [];

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await server?.stop();
    server = undefined;
  });

  function client(url: string): Redis {
    const c = new Redis(url, { lazyConnect: false });
    c.on('error', () => undefined);
    cleanups.push(() => c.disconnect());
    return c;
  }

  function publisher(opts: Partial<ConstructorParameters<typeof RedisNoticePublisher>[0]> & { url: string }) {
    const log = memoryLogger();
    const p = new RedisNoticePublisher({ logger: log.logger, streamKey: 'test:notices', ...opts });
    cleanups.push(() => p.stop());
    return { p, log };
  }

  it('encodes fields as strings, leaves absent ones out, and decodes numbers back', () => {
    const n = notice('req-redis-0001', 'closed', { closeCause: 5, closeReason: 'keepTimeout', playUrl: undefined });
    const fields = noticeToStreamFields(n);
    assert.deepEqual(fields, [
      'instId',
      'gw-test',
      'act',
      'closed',
      'reqId',
      'req-redis-0001',
      'typ',
      'live',
      'simNo',
      '13800001111',
      'chan',
      '1',
      'mediaTyp',
      'av',
      'closeCause',
      '5',
      'closeReason',
      'keepTimeout',
    ]);
    assert.deepEqual(streamFieldsToNotice(fields), JSON.parse(JSON.stringify(n)));
    assert.equal(redactRedisUrl('redis://user:secret@host:6379/2'), 'redis://user:***@host:6379/2');
  });

  it('XADDs notices that an application reads in order through a consumer group', async () => {
    server = await startRedis();
    const app = client(server.url);
    await app.xgroup('CREATE', 'test:notices', 'app', '$', 'MKSTREAM');
    const { p } = publisher({ url: server.url });
    const sent = [
      notice('req-redis-0002', 'ready', { playUrl: 'http://127.0.0.1:7081/live/x.flv?reqId=req-redis-0002&token=t', vc: 'h264', frameRate: 25 }),
      notice('req-redis-0002', 'closed', { closeCause: 1, closeReason: 'clientReq' }),
      notice('req-redis-0003', 'failed', { closeCause: 6, closeReason: 'termDataTimeout' }),
    ];
    for (const n of sent) p.publish(n);
    await within(p.whenIdle(), 10_000, 'publishing');
    assert.deepEqual(p.stats(), { published: 3, dropped: 0, buffered: 0 });

    const res = (await app.xreadgroup('GROUP', 'app', 'worker-1', 'COUNT', 10, 'STREAMS', 'test:notices', '>')) as Array<[string, StreamEntries]>;
    const entries = res[0][1];
    assert.deepEqual(
      entries.map(([, f]) => streamFieldsToNotice(f)),
      sent,
    );
    assert.equal(await app.xack('test:notices', 'app', ...entries.map(([id]) => id)), 3);
    const pending = (await app.xpending('test:notices', 'app')) as [number, ...unknown[]];
    assert.equal(pending[0], 0);
  });

  it('trims the stream with MAXLEN ~', async () => {
    server = await startRedis();
    const { p } = publisher({ url: server.url, maxLen: 50 });
    for (let i = 0; i < 600; i++) p.publish(notice(`req-trim-${String(i).padStart(4, '0')}`, 'ready'));
    await within(p.whenIdle(), 10_000, 'publishing');
    const len = await client(server.url).xlen('test:notices');
    assert.ok(len >= 50 && len < 600, `approximate trim keeps at least 50 and far fewer than 600, kept ${len}`);
  });

  it('buffers while Redis is down, drops the oldest beyond the bound (counted, logged), and catches up after a restart', async () => {
    server = await startRedis();
    const port = server.port;
    const { p, log } = publisher({ url: server.url, bufferLimit: 2 });
    p.publish(notice('req-down-0000', 'ready'));
    await within(p.whenIdle(), 10_000, 'first publish');

    await server.stop();
    server = undefined;
    // Publish only once the publisher has seen the outage, so what is buffered (rather than in flight) is known.
    await until(() => log.lines.some((l) => l.includes('unreachable')), 10_000, 'the outage being noticed');
    for (const id of ['req-down-0001', 'req-down-0002', 'req-down-0003']) p.publish(notice(id, 'closed'));
    assert.equal(p.stats().dropped, 1);
    assert.equal(p.stats().buffered, 2);
    assert.ok(log.lines.some((l) => l.includes('notice dropped') && l.includes('req-down-0001')));

    server = await startRedis({ port });
    await within(p.whenIdle(), 15_000, 'catching up after the restart');
    const entries = (await client(server.url).xrange('test:notices', '-', '+')) as StreamEntries;
    assert.deepEqual(
      entries.map(([, f]) => streamFieldsToNotice(f).reqId),
      ['req-down-0002', 'req-down-0003'],
    );
    assert.deepEqual(p.stats(), { published: 3, dropped: 1, buffered: 0 });
    assert.ok(log.lines.some((l) => l.includes('unreachable')));
    assert.ok(log.lines.some((l) => l.includes('reachable again')));
  });

  it('counts what is still buffered at stop as dropped', async () => {
    const { p } = publisher({ url: 'redis://127.0.0.1:1' });
    p.publish(notice('req-stop-0001', 'ready'));
    p.publish(notice('req-stop-0002', 'closed'));
    await p.stop();
    assert.deepEqual(p.stats(), { published: 0, dropped: 2, buffered: 0 });
  });
});
