/**
 * The stores against a real redis-server (full tier): a Redis keyv, pingRedis against a live server, one that comes
 * up late and one that wants a password, and a connection that outlives a restart. stores.test.ts has the rest.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import Redis from 'ioredis';
import { createKeyv, pingRedis, type Keyv } from '../../core/kv';
import { startRedis, type RedisServer } from '../support/redis';

describe('core key-value stores: createKeyv on Redis', function () {
  this.timeout(30_000);
  const open: Keyv[] = [];
  const keyv = (...args: Parameters<typeof createKeyv>) => {
    const k = createKeyv(...args);
    open.push(k);
    return k;
  };
  afterEach(async () => {
    await Promise.all(open.splice(0).map((k) => k.disconnect()));
  });

  describe('redis (real redis-server)', () => {
    let server: RedisServer | undefined;
    after(async () => server?.stop());

    it('stores, expires, survives a new connection and clears only its namespace', async () => {
      server = await startRedis();
      const a = keyv({ kind: 'redis', url: server.url }, 'gov');
      const b = keyv({ kind: 'redis', url: server.url }, 'gov2');
      await a.set('set', { tokens: ['t'] });
      await a.set('short', 'x', 1);
      await b.set('set', 'other');
      await a.disconnect();

      const again = keyv({ kind: 'redis', url: server.url }, 'gov');
      assert.deepEqual(await again.get('set'), { tokens: ['t'] });
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(await again.get('short'), undefined);
      assert.equal(await again.has('set'), true);
      await again.clear();
      assert.equal(await again.get('set'), undefined);
      assert.equal(await b.get('set'), 'other');
    });
  });

  describe('redis reachability (pingRedis, what boot checks) and reconnection', () => {
    let server: RedisServer | undefined;
    afterEach(async () => {
      await server?.stop();
      server = undefined;
    });

    it('resolves against a live server', async () => {
      server = await startRedis();
      await pingRedis(server.url, 2000);
    });

    it('waits for a server that comes up within its time', async () => {
      const probe = net.createServer();
      await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
      const port = (probe.address() as net.AddressInfo).port;
      await new Promise((r) => probe.close(r));
      const pending = pingRedis(`redis://127.0.0.1:${port}`, 8000);
      await new Promise((r) => setTimeout(r, 300));
      server = await startRedis({ port });
      await pending;
    });

    it('a refused or missing password is reported at once, not waited on', async () => {
      server = await startRedis();
      const admin = new Redis(server.url);
      await admin.config('SET', 'requirepass', 'right-pw');
      admin.disconnect();
      for (const [url, why] of [
        [`redis://:wrong-pw@127.0.0.1:${server.port}`, /WRONGPASS/],
        [server.url, /NOAUTH/],
      ] as const) {
        const t0 = Date.now();
        await assert.rejects(pingRedis(url, 5000), (err: Error) => {
          assert.match(err.message, why);
          assert.ok(!err.message.includes('wrong-pw'), err.message);
          return true;
        });
        assert.ok(Date.now() - t0 < 2000, `took ${Date.now() - t0} ms`);
      }
      await pingRedis(`redis://:right-pw@127.0.0.1:${server.port}`, 2000);
    });

    it('a store connection outlives a Redis restart: calls fail while it is down, then work again', async () => {
      server = await startRedis();
      const port = server.port;
      const k = keyv({ kind: 'redis', url: server.url }, 'restart');
      await k.set('a', 1);
      await server.stop();
      server = await startRedis({ port });
      // the restarted server kept nothing (no persistence): a write and a read through the same Keyv prove the reconnect
      const deadline = Date.now() + 10_000;
      for (;;) {
        try {
          await k.set('b', 2);
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      assert.equal(await k.get('b'), 2);
    });
  });
});
