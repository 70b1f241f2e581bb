import { EventEmitter } from 'node:events';
import Redis from 'ioredis';

/**
 * A keyv storage adapter on ioredis (already a dependency), instead of adding @keyv/redis. Keys arrive prefixed
 * with `<namespace>:`, values serialised; TTLs become PX expiries so Redis drops expired entries by itself.
 */
export class RedisKvStore extends EventEmitter {
  readonly opts: { url: string };
  /** set by Keyv to its namespace */
  namespace?: string;
  private readonly redis: Redis;

  constructor(url: string) {
    super();
    this.opts = { url };
    this.redis = new Redis(url, { lazyConnect: false });
    // Without a listener ioredis prints every failed reconnect; with Keyv attached, errors surface through it.
    this.redis.on('error', (err: Error) => {
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
  }

  async get(key: string): Promise<string | undefined> {
    return (await this.redis.get(key)) ?? undefined;
  }

  async set(key: string, value: string, ttl?: number): Promise<boolean> {
    if (typeof ttl === 'number' && ttl > 0) await this.redis.set(key, value, 'PX', Math.ceil(ttl));
    else await this.redis.set(key, value);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    return (await this.redis.del(key)) > 0;
  }

  async has(key: string): Promise<boolean> {
    return (await this.redis.exists(key)) === 1;
  }

  /** Deletes this namespace's keys only (SCAN, never KEYS or FLUSHDB: the database may be shared). */
  async clear(): Promise<void> {
    const pattern = this.namespace ? `${this.namespace.replace(/[*?[\]\\]/g, '\\$&')}:*` : '*';
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      if (keys.length > 0) await this.redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  }

  async disconnect(): Promise<void> {
    if (this.redis.status === 'end') return;
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
