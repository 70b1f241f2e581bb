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
  private db: Database.Database | undefined;
  private closed = false;
  private q!: {
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
  }

  /**
   * Opened at first use, not in the constructor, and again after a failure: a store that cannot be opened at boot
   * (a full disk) makes its calls reject, which a plugin can survive, instead of failing the plugin's setup; and
   * it works once the disk has room again.
   */
  private open(): NonNullable<SqliteKvStore['q']> {
    if (this.db) return this.q;
    if (this.closed) throw new Error('the store is closed');
    const file = this.opts.file;
    if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      // WAL lets other connections to the same file (other namespaces, a second process) read while one writes.
      db.pragma('journal_mode = WAL');
      db.pragma('busy_timeout = 5000');
      db.exec('CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT, expires INTEGER)');
      this.q = {
        get: db.prepare('SELECT value FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)'),
        set: db.prepare(
          'INSERT INTO kv (key, value, expires) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires = excluded.expires',
        ),
        del: db.prepare('DELETE FROM kv WHERE key = ?'),
        has: db.prepare('SELECT 1 AS one FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)'),
        // LIKE would take `_` and `%` in a namespace for wildcards; comparing the prefix itself is exact.
        clearNs: db.prepare('DELETE FROM kv WHERE substr(key, 1, length(?)) = ?'),
        clearAll: db.prepare('DELETE FROM kv'),
        purge: db.prepare('DELETE FROM kv WHERE expires IS NOT NULL AND expires <= ?'),
      };
      // Expired rows are skipped on read; clearing them at open keeps the file from collecting them forever.
      this.q.purge.run(Date.now());
    } catch (err) {
      db.close();
      throw err;
    }
    this.db = db;
    return this.q;
  }

  async get(key: string): Promise<string | undefined> {
    return this.open().get.get(key, Date.now())?.value;
  }

  async set(key: string, value: string, ttl?: number): Promise<boolean> {
    const expires = typeof ttl === 'number' && ttl > 0 ? Date.now() + ttl : null;
    this.open().set.run(key, String(value), expires);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    return this.open().del.run(key).changes > 0;
  }

  async has(key: string): Promise<boolean> {
    return this.open().has.get(key, Date.now()) !== undefined;
  }

  async clear(): Promise<void> {
    const prefix = `${this.namespace}:`;
    const q = this.open();
    if (this.namespace) q.clearNs.run(prefix, prefix);
    else q.clearAll.run();
  }

  async disconnect(): Promise<void> {
    this.closed = true;
    if (this.db?.open) this.db.close();
    this.db = undefined;
  }
}
