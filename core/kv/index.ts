import { Keyv } from 'keyv';
import { SqliteKvStore } from './sqlite-kv-store';
import { RedisKvStore } from './redis-kv-store';

export { SqliteKvStore } from './sqlite-kv-store';
export { RedisKvStore, pingRedis } from './redis-kv-store';
export { redactUrlPassword as redactRedisUrl } from '../../plugin-sdk/redact';
export type { Keyv } from 'keyv';

export type KeyvBackend = { kind: 'sqlite'; file: string } | { kind: 'redis'; url: string } | { kind: 'memory' };

/**
 * A Keyv on the site's backend, its keys under `<namespace>:`. Each call opens its own connection (close it with
 * `disconnect()`). Store failures reject the call (`throwOnErrors`) rather than reading as "not found".
 */
export function createKeyv(backend: KeyvBackend, namespace: string): Keyv {
  // keyv joins namespace and key with ':'; a ':' in the namespace could make two namespaces overlap.
  if (!/^[A-Za-z0-9_.-]+$/.test(namespace)) {
    throw new Error(`keyv namespace '${namespace}' must be letters, digits, '_', '.' or '-'`);
  }
  switch (backend.kind) {
    case 'sqlite':
      return new Keyv({ store: new SqliteKvStore(backend.file), namespace, throwOnErrors: true });
    case 'redis':
      return new Keyv({ store: new RedisKvStore(backend.url), namespace, throwOnErrors: true });
    case 'memory':
      return new Keyv({ namespace, throwOnErrors: true });
    default:
      throw new Error(`unknown keyv backend ${JSON.stringify((backend as { kind?: unknown }).kind)}`);
  }
}
