import * as path from 'node:path';
import { BootError } from './config';
import type { KeyValueStore } from '../plugin-sdk/plugin';

type KeyvLike = KeyValueStore & { disconnect?: () => Promise<void> };

/** Small state behind keyv: embedded SQLite in the data directory by default, Redis when the site says so. */
export class StoreFactory {
  private open: KeyvLike[] = [];
  private readonly spec: { kind: 'sqlite'; file: string } | { kind: 'redis'; url: string } | { kind: 'memory' };

  constructor(raw: Record<string, unknown>, dataDir: string, where: string) {
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

  keyv(namespace: string): KeyValueStore {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { createKeyv } = require('../plugin-sdk/stores') as typeof import('../plugin-sdk/stores');
    const k = createKeyv(this.spec, namespace) as unknown as KeyvLike;
    this.open.push(k);
    return k;
  }

  async close(): Promise<void> {
    const all = this.open;
    this.open = [];
    await Promise.all(all.map((k) => k.disconnect?.().catch(() => undefined)));
  }
}
