import * as path from 'node:path';
import { BootError } from './config';
import type { KeyValueStore } from '../plugin-sdk/plugin';

type KeyvLike = KeyValueStore & { disconnect?: () => Promise<void> };

/** how long boot waits for the Redis store to answer PING, retries included */
const REDIS_BOOT_TIMEOUT_MS = 5000;

/** Small state behind keyv: embedded SQLite in the data directory by default, Redis when the site says so. */
export class StoreFactory {
  private connections: KeyvLike[] = [];
  private readonly spec: { kind: 'sqlite'; file: string } | { kind: 'redis'; url: string } | { kind: 'memory' };

  constructor(
    raw: Record<string, unknown>,
    dataDir: string,
    private readonly where: string,
  ) {
    const kind = raw.kind ?? 'sqlite';
    if (kind === 'sqlite') {
      const file = typeof raw.file === 'string' ? path.resolve(dataDir, raw.file) : path.join(dataDir, 'state.sqlite');
      this.spec = { kind, file };
    } else if (kind === 'redis') {
      if (typeof raw.url !== 'string' || !/^rediss?:\/\//.test(raw.url)) throw new BootError(`${where}.url: a redis:// URL is required with kind redis`);
      this.spec = { kind, url: raw.url };
    } else if (kind === 'memory') {
      this.spec = { kind };
    } else {
      throw new BootError(`${where}.kind: must be sqlite, redis or memory (got ${JSON.stringify(kind)})`);
    }
  }

  /**
   * Checks the backend before any plugin uses it: an unreachable Redis stops boot within seconds, naming the key,
   * instead of hanging every plugin that reads state. Once booted, the stores' own connections reconnect by
   * themselves (a Redis restart costs failed calls, not the gateway).
   */
  async open(): Promise<void> {
    if (this.spec.kind !== 'redis') return;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the Redis client loads only when the site's store is Redis
    const { pingRedis, redactRedisUrl } = require('./kv') as typeof import('./kv');
    try {
      await pingRedis(this.spec.url, REDIS_BOOT_TIMEOUT_MS);
    } catch (err) {
      throw new BootError(`${this.where}.url: Redis at ${redactRedisUrl(this.spec.url)} is not reachable (${(err as Error).message})`);
    }
  }

  keyv(namespace: string): KeyValueStore {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- keyv, SQLite and Redis clients load only when a plugin asks for a store
    const { createKeyv } = require('./kv') as typeof import('./kv');
    const k = createKeyv(this.spec, namespace) as unknown as KeyvLike;
    this.connections.push(k);
    return k;
  }

  async close(): Promise<void> {
    const all = this.connections;
    this.connections = [];
    await Promise.all(all.map((k) => Promise.resolve(k.disconnect?.()).catch(() => undefined)));
  }
}
