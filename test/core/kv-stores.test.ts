import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import * as net from 'node:net';
import { createKeyv, pingRedis, redactRedisUrl, SqliteKvStore, type Keyv } from '../../core/kv';
import { scratchDir } from '../support/paths';

describe('core key-value stores: createKeyv', function () {
  this.timeout(30_000);
  const open: Keyv[] = [];
  const keyv = (...args: Parameters<typeof createKeyv>) => {
    const k = createKeyv(...args);
    open.push(k);
    return k;
  };
  const dirs: string[] = [];
  const scratch = () => {
    const d = scratchDir('kv');
    dirs.push(d);
    return d;
  };
  afterEach(async () => {
    await Promise.all(open.splice(0).map((k) => k.disconnect()));
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  describe('sqlite', () => {
    it('stores values of any JSON shape and keeps them across a reopen of the file', async () => {
      const file = path.join(scratch(), 'nested', 'state.sqlite');
      const a = keyv({ kind: 'sqlite', file }, 'tokens');
      await a.set('set', { tokens: [{ digest: 'ab', expiredAt: '2030-01-01T00:00:00.000Z' }], n: 3 });
      await a.set('plain', 'text');
      await a.disconnect();

      const b = keyv({ kind: 'sqlite', file }, 'tokens');
      assert.deepEqual(await b.get('set'), { tokens: [{ digest: 'ab', expiredAt: '2030-01-01T00:00:00.000Z' }], n: 3 });
      assert.equal(await b.get('plain'), 'text');
      assert.equal(await b.get('absent'), undefined);
      assert.equal(await b.has('plain'), true);
      assert.equal(await b.delete('plain'), true);
      assert.equal(await b.delete('plain'), false);
      assert.equal(await b.has('plain'), false);
    });

    it('keeps everything in one kv(key, value, expires) table, keys prefixed by namespace', async () => {
      const file = path.join(scratch(), 'state.sqlite');
      const k = keyv({ kind: 'sqlite', file }, 'ns1');
      await k.set('a', 1);
      await k.disconnect();
      const db = new Database(file, { readonly: true });
      try {
        const cols = (db.prepare('PRAGMA table_info(kv)').all() as Array<{ name: string; type: string; pk: number }>).map((c) => [c.name, c.type, c.pk]);
        assert.deepEqual(cols, [
          ['key', 'TEXT', 1],
          ['value', 'TEXT', 0],
          ['expires', 'INTEGER', 0],
        ]);
        const row = db.prepare('SELECT key, value FROM kv').get() as { key: string; value: string };
        assert.equal(row.key, 'ns1:a');
        assert.deepEqual(JSON.parse(row.value).value, 1);
      } finally {
        db.close();
      }
    });

    it('expires entries by TTL', async () => {
      const k = keyv({ kind: 'sqlite', file: path.join(scratch(), 's.sqlite') }, 'ttl');
      await k.set('short', 'x', 1);
      await k.set('long', 'y', 60_000);
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(await k.get('short'), undefined);
      assert.equal(await k.get('long'), 'y');
    });

    it('clear() empties its own namespace only, even when another namespace would match as a LIKE pattern', async () => {
      const file = path.join(scratch(), 's.sqlite');
      const mine = keyv({ kind: 'sqlite', file }, 'a_b');
      const other = keyv({ kind: 'sqlite', file }, 'axb');
      await mine.set('k', 1);
      await other.set('k', 2);
      await mine.clear();
      assert.equal(await mine.get('k'), undefined);
      assert.equal(await other.get('k'), 2);
    });

    it('is a storage adapter keyv accepts directly', async () => {
      const store = new SqliteKvStore(':memory:');
      await store.set('x:1', '{"value":"v"}');
      assert.equal(await store.get('x:1'), '{"value":"v"}');
      await store.disconnect();
    });
  });

  // a live Redis (a real redis-server) is in stores-redis.test.ts, full tier
  describe('redis reachability without a server (pingRedis, what boot checks)', () => {
    const silent: net.Server[] = [];
    const accepted = new Set<net.Socket>();
    afterEach(async () => {
      for (const sock of accepted) sock.destroy();
      accepted.clear();
      await Promise.all(silent.splice(0).map((s) => new Promise((r) => s.close(r))));
    });

    it('gives up on a refused port within its time, with the reason and without the URL', async () => {
      const t0 = Date.now();
      await assert.rejects(pingRedis('redis://:s3cret-pw@127.0.0.1:1', 1500), (err: Error) => {
        assert.match(err.message, /ECONNREFUSED; gave up after 1\.5 s/);
        assert.ok(!err.message.includes('s3cret-pw') && !err.message.includes('127.0.0.1:1'), err.message);
        return true;
      });
      const took = Date.now() - t0;
      assert.ok(took >= 1400 && took < 3000, `took ${took} ms`);
    });

    it('gives up on a server that accepts and never answers', async () => {
      // reads what it gets (so the client's FIN is seen) and never writes
      const s = net.createServer((sock) => {
        sock.resume();
        accepted.add(sock);
      });
      silent.push(s);
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
      const t0 = Date.now();
      await assert.rejects(pingRedis(`redis://127.0.0.1:${(s.address() as net.AddressInfo).port}`, 1000), /no answer|ETIMEDOUT/);
      assert.ok(Date.now() - t0 < 2500, `took ${Date.now() - t0} ms`);
    });

    it('redacts the password of a URL', () => {
      assert.equal(redactRedisUrl('redis://user:pw@h:6379/2'), 'redis://user:***@h:6379/2');
      assert.equal(redactRedisUrl('rediss://:pw@h'), 'rediss://:***@h');
      assert.equal(redactRedisUrl('redis://h:6379'), 'redis://h:6379');
    });
  });

  it('memory backend works, and a namespace that could overlap another is refused', async () => {
    const m = keyv({ kind: 'memory' }, 'mem');
    await m.set('a', [1, 2]);
    assert.deepEqual(await m.get('a'), [1, 2]);
    assert.throws(() => createKeyv({ kind: 'memory' }, 'a:b'), /namespace 'a:b'/);
  });
});
