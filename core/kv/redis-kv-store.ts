import { EventEmitter } from 'node:events';
import Redis from 'ioredis';

/**
 * Resolves once Redis at `url` answers PING, trying again for up to `timeoutMs` (a Redis started beside the
 * gateway may come up a moment later); rejects with the last reason, which never holds the URL.
 *
 * A store's own connection would not do for this: ioredis retries forever and queues commands meanwhile, so an
 * unreachable Redis only shows up ~70 s later as some plugin's command failing (20 retries), far from the cause.
 */
export async function pingRedis(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastReason = 'no answer';
  for (let attempt = 0; ; attempt++) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`${lastReason}; gave up after ${timeoutMs / 1000} s`);
    const client = new Redis(url, {
      lazyConnect: true,
      connectTimeout: Math.max(100, left),
      // one connection per attempt, no queue: each failure comes straight back here
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    let socketError: Error | undefined;
    client.on('error', (err: Error) => {
      socketError ??= err;
    });
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    try {
      // a server that accepts and never answers (a wrong port, a proxy) would hold connect() or PING forever
      const noAnswer = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          timedOut = true;
          reject(new Error('no answer to PING'));
        }, left);
      });
      await Promise.race([client.connect().then(() => client.ping()), noAnswer]);
      return;
    } catch (err) {
      // connect() rejects with a bare "Connection is closed."; the socket's error says why
      const e = socketError ?? (err as Error);
      // A later attempt cut short by the deadline says nothing new (it may have had a millisecond): the reason an
      // earlier attempt got, e.g. ECONNREFUSED, stands.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the timer sets timedOut while the race above is awaited
      if (!(timedOut && socketError === undefined && attempt > 0)) lastReason = (e as NodeJS.ErrnoException).code ?? e.message;
      // a refused password or database will not fix itself while we wait
      // eslint-disable-next-line preserve-caught-error -- e is the socket's error when there is one: the reply that refused us
      if (e.name === 'ReplyError') throw new Error(e.message.split('\n')[0], { cause: e });
    } finally {
      clearTimeout(timer);
      client.disconnect();
    }
    await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** attempt, 1000, Math.max(0, deadline - Date.now()))));
  }
}

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
