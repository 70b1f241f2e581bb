import * as fs from 'node:fs';
import * as path from 'node:path';
import { EventEmitter } from 'node:events';
import Database from 'better-sqlite3';

/**
 * A keyv storage adapter on better-sqlite3 (already a dependency for the record catalog), so keyv gets an embedded
 * SQLite backend without @keyv/sqlite and its second native sqlite module. Keyv hands it keys already prefixed
 * with `<namespace>:` and values already serialised; this class only stores strings.
 *
 * One table, `kv(key TEXT PRIMARY KEY, value TEXT, expires INTEGER)`, may be shared by many namespaces (and
 * connections) in one file: clear() deletes only its own namespace's keys.
 */
export class SqliteKvStore extends EventEmitter {
  /** keyv reads this; kept for its adapter check */
  readonly opts: { file: string };
  /** set by Keyv to its namespace */
  namespace?: string;
  private readonly db: Database.Database;
  private readonly q: {
    get: Database.Statement<[string, number], { value: string }>;
    set: Database.Statement<[string, string, number | null]>;
    del: Database.Statement<[string]>;
    has: Database.Statement<[string, number], { one: number }>;
    clearNs: Database.Statement<[string, string]>;
    clearAll: Database.Statement<[]>;
    purge: Database.Statement<[number]>;
  };

  constructor(file: string) {
    super();
    this.opts = { file };
    if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    // WAL lets other connections to the same file (other namespaces, a second process) read while one writes.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec('CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT, expires INTEGER)');
    this.q = {
      get: this.db.prepare('SELECT value FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)'),
      set: this.db.prepare(
        'INSERT INTO kv (key, value, expires) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires = excluded.expires',
      ),
      del: this.db.prepare('DELETE FROM kv WHERE key = ?'),
      has: this.db.prepare('SELECT 1 AS one FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)'),
      // LIKE would take `_` and `%` in a namespace for wildcards; comparing the prefix itself is exact.
      clearNs: this.db.prepare('DELETE FROM kv WHERE substr(key, 1, length(?)) = ?'),
      clearAll: this.db.prepare('DELETE FROM kv'),
      purge: this.db.prepare('DELETE FROM kv WHERE expires IS NOT NULL AND expires <= ?'),
    };
    // Expired rows are skipped on read; clearing them at open keeps the file from collecting them forever.
    this.q.purge.run(Date.now());
  }

  async get(key: string): Promise<string | undefined> {
    return this.q.get.get(key, Date.now())?.value;
  }

  async set(key: string, value: string, ttl?: number): Promise<boolean> {
    const expires = typeof ttl === 'number' && ttl > 0 ? Date.now() + ttl : null;
    this.q.set.run(key, String(value), expires);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    return this.q.del.run(key).changes > 0;
  }

  async has(key: string): Promise<boolean> {
    return this.q.has.get(key, Date.now()) !== undefined;
  }

  async clear(): Promise<void> {
    const prefix = `${this.namespace}:`;
    if (this.namespace) this.q.clearNs.run(prefix, prefix);
    else this.q.clearAll.run();
  }

  async disconnect(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
