/**
 * Embedded catalog in one SQLite file (better-sqlite3, WAL). The calls are synchronous underneath and
 * each is a single indexed statement, so they are wrapped in promises only to share the interface.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import {
  appFilterExcludesAll,
  checkClaim,
  checkLimit,
  checkRangeQuery,
  DuplicateRecordError,
  checkRecordUpdate,
  normaliseApiBase,
  startedRecord,
  type CatalogOptions,
  type MediaTyp,
  type NodeScope,
  type RangeQuery,
  type RecordCatalog,
  type RecordStart,
  type RecordState,
  type RecordUpdate,
  type StoredRecord,
} from './catalog';
import { normaliseSimNo } from './sim-no';
import { assertTimeZone } from './zone-time';

export interface SqliteCatalogOptions extends CatalogOptions {
  /** Directory holding the catalog file; created when missing. */
  dir: string;
  /** default 'records.sqlite' */
  fileName?: string;
}

/** 1: the first layout; 2: api_base (the recording node's apiBase), added to version 1 files at open */
const SCHEMA_VERSION = 2;

// Times are integer milliseconds since the epoch, so ordering and range tests are plain integer compares.
// `state` trails both query indexes so a state filter is answered from the index alone, and OFFSET skips
// index entries without reading table rows.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS stored_av (
  req_id    TEXT PRIMARY KEY,
  app_id    TEXT NOT NULL,
  sim_no    TEXT NOT NULL,
  chan      INTEGER NOT NULL,
  live      INTEGER NOT NULL,
  req_tm    INTEGER NOT NULL,
  path      TEXT NOT NULL,
  ext       TEXT NOT NULL,
  sz        INTEGER NOT NULL DEFAULT 0,
  media_typ TEXT,
  state     TEXT NOT NULL,
  end_tm    INTEGER,
  error     TEXT,
  api_base  TEXT
);
CREATE INDEX IF NOT EXISTS stored_av_app_tm ON stored_av (app_id, req_tm, req_id, state);
CREATE INDEX IF NOT EXISTS stored_av_app_sim_tm ON stored_av (app_id, sim_no, req_tm, req_id, state);
CREATE INDEX IF NOT EXISTS stored_av_unfinished ON stored_av (req_tm, req_id) WHERE state = 'recording';
CREATE INDEX IF NOT EXISTS stored_av_finished ON stored_av (req_tm, req_id) WHERE state <> 'recording';
`;

interface Row {
  req_id: string;
  app_id: string;
  sim_no: string;
  chan: number;
  live: number;
  req_tm: number;
  path: string;
  ext: string;
  sz: number;
  media_typ: string | null;
  state: string;
  end_tm: number | null;
  error: string | null;
  api_base: string | null;
}

function fromRow(r: Row): StoredRecord {
  return {
    reqId: r.req_id,
    appId: r.app_id,
    simNo: r.sim_no,
    chan: r.chan,
    live: r.live !== 0,
    reqTm: new Date(r.req_tm),
    path: r.path,
    ext: 'flv',
    sz: r.sz,
    mediaTyp: r.media_typ as MediaTyp | null,
    state: r.state as RecordState,
    endTm: r.end_tm === null ? null : new Date(r.end_tm),
    error: r.error,
    apiBase: r.api_base ?? null,
  };
}

// SQLite's default limit on bound parameters is 32766; stay well below it.
const DELETE_CHUNK = 500;

export class SqliteRecordCatalog implements RecordCatalog {
  readonly file: string;
  private readonly db: Database.Database;
  private readonly timeZone: string | undefined;
  private readonly stmts: {
    insert: Database.Statement;
    byReqId: Database.Statement;
    unfinished: Database.Statement;
    oldest: Database.Statement;
    total: Database.Statement;
    nodeUnfinished: Database.Statement;
    nodeOldest: Database.Statement;
    nodeTotal: Database.Statement;
    unnamedFirst: Database.Statement;
    unnamedAfter: Database.Statement;
  };
  private readonly rangeStmts = new Map<string, Database.Statement>();
  private closed = false;

  constructor(opts: SqliteCatalogOptions) {
    assertTimeZone(opts.timeZone);
    this.timeZone = opts.timeZone;
    fs.mkdirSync(opts.dir, { recursive: true });
    this.file = path.join(opts.dir, opts.fileName ?? 'records.sqlite');
    this.db = new Database(this.file);
    try {
      this.db.pragma('journal_mode = WAL');
      // WAL with NORMAL stays consistent after a crash; only the last commits before a power loss can go.
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma('busy_timeout = 5000');
      const version = this.db.pragma('user_version', { simple: true }) as number;
      if (version > SCHEMA_VERSION) {
        throw new Error(`catalog ${this.file} has schema version ${version}, newer than this gateway's ${SCHEMA_VERSION}`);
      }
      this.db.exec(SCHEMA);
      // A version 1 file has the table without api_base: the column is added (nullable, so its old rows read as
      // null and list with the querying gateway's apiBase). Checked again inside an immediate transaction, as
      // several workers may open the file at once.
      if (!this.hasColumn('api_base')) {
        this.db
          .transaction(() => {
            if (!this.hasColumn('api_base')) this.db.exec('ALTER TABLE stored_av ADD COLUMN api_base TEXT');
          })
          .immediate();
      }
      // Only when it changes: on a full disk an existing catalog must still open, and this would be a write.
      if (version !== SCHEMA_VERSION) this.db.pragma(`user_version = ${SCHEMA_VERSION}`);
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.stmts = {
      insert: this.db.prepare(`INSERT INTO stored_av (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error, api_base)
        VALUES (@req_id, @app_id, @sim_no, @chan, @live, @req_tm, @path, @ext, @sz, @media_typ, @state, @end_tm, @error, @api_base)`),
      byReqId: this.db.prepare('SELECT * FROM stored_av WHERE req_id = ? AND app_id = ?'),
      unfinished: this.db.prepare(`SELECT * FROM stored_av WHERE state = 'recording' ORDER BY req_tm, req_id`),
      oldest: this.db.prepare(`SELECT * FROM stored_av WHERE state <> 'recording' ORDER BY req_tm, req_id LIMIT ?`),
      total: this.db.prepare('SELECT COALESCE(SUM(sz), 0) AS total FROM stored_av'),
      // one node's rows (NodeScope in catalog.ts): the same as above, narrowed by api_base
      nodeUnfinished: this.db.prepare(`SELECT * FROM stored_av WHERE state = 'recording' AND (api_base = ? OR api_base IS NULL) ORDER BY req_tm, req_id`),
      nodeOldest: this.db.prepare(`SELECT * FROM stored_av WHERE state <> 'recording' AND api_base = ? ORDER BY req_tm, req_id LIMIT ?`),
      nodeTotal: this.db.prepare('SELECT COALESCE(SUM(sz), 0) AS total FROM stored_av WHERE api_base = ?'),
      unnamedFirst: this.db.prepare('SELECT * FROM stored_av WHERE api_base IS NULL ORDER BY req_id LIMIT ?'),
      unnamedAfter: this.db.prepare('SELECT * FROM stored_av WHERE api_base IS NULL AND req_id > ? ORDER BY req_id LIMIT ?'),
    };
  }

  private hasColumn(name: string): boolean {
    return (this.db.pragma('table_info(stored_av)') as Array<{ name: string }>).some((c) => c.name === name);
  }

  private live(): Database.Database {
    if (this.closed) throw new Error('record catalog is closed');
    return this.db;
  }

  async insertStart(rec: RecordStart): Promise<StoredRecord> {
    const r = startedRecord(rec, this.timeZone);
    this.live();
    try {
      this.stmts.insert.run({
        req_id: r.reqId,
        app_id: r.appId,
        sim_no: r.simNo,
        chan: r.chan,
        live: r.live ? 1 : 0,
        req_tm: r.reqTm.getTime(),
        path: r.path,
        ext: r.ext,
        sz: r.sz,
        media_typ: r.mediaTyp,
        state: r.state,
        end_tm: null,
        error: null,
        api_base: r.apiBase,
      });
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new DuplicateRecordError(r.reqId);
      throw err;
    }
    return r;
  }

  /**
   * Adds finished rows as they are, in one transaction with one prepared statement (imports, benchmarks).
   * Returns the number inserted; a duplicate reqId rolls the whole batch back.
   */
  insertMany(records: Iterable<StoredRecord>): number {
    this.live();
    let n = 0;
    this.db.transaction(() => {
      for (const r of records) {
        this.stmts.insert.run({
          req_id: r.reqId,
          app_id: r.appId,
          sim_no: r.simNo,
          chan: r.chan,
          live: r.live ? 1 : 0,
          req_tm: r.reqTm.getTime(),
          path: r.path,
          ext: r.ext,
          sz: r.sz,
          media_typ: r.mediaTyp,
          state: r.state,
          end_tm: r.endTm === null ? null : r.endTm.getTime(),
          error: r.error,
          api_base: r.apiBase ?? null,
        });
        n++;
      }
    })();
    return n;
  }

  async update(reqId: string, patch: RecordUpdate, ifRecording = false): Promise<boolean> {
    checkRecordUpdate(patch);
    const sets: string[] = [];
    const params: Record<string, unknown> = { req_id: reqId };
    if (patch.sz !== undefined) {
      sets.push('sz = @sz');
      params.sz = patch.sz;
    }
    if (patch.mediaTyp !== undefined) {
      sets.push('media_typ = @media_typ');
      params.media_typ = patch.mediaTyp;
    }
    if (patch.state !== undefined) {
      sets.push('state = @state');
      params.state = patch.state;
    }
    if (patch.endTm !== undefined) {
      sets.push('end_tm = @end_tm');
      params.end_tm = patch.endTm === null ? null : patch.endTm.getTime();
    }
    if (patch.error !== undefined) {
      sets.push('error = @error');
      params.error = patch.error;
    }
    const db = this.live();
    const where = ifRecording ? `req_id = @req_id AND state = 'recording'` : 'req_id = @req_id';
    if (sets.length === 0) {
      return db.prepare(`SELECT 1 FROM stored_av WHERE ${where}`).get(params) !== undefined;
    }
    // Only a handful of distinct SET lists occur, and better-sqlite3 caches nothing itself; preparing per
    // call costs microseconds next to the write.
    return db.prepare(`UPDATE stored_av SET ${sets.join(', ')} WHERE ${where}`).run(params).changes > 0;
  }

  async getByReqId(appId: string, reqId: string): Promise<StoredRecord | null> {
    this.live();
    const row = this.stmts.byReqId.get(reqId, appId) as Row | undefined;
    return row ? fromRow(row) : null;
  }

  private rangeStatement(bySim: boolean, stateCount: number): Database.Statement {
    const key = `${bySim ? 's' : 'a'}${stateCount}`;
    let stmt = this.rangeStmts.get(key);
    if (!stmt) {
      const states = stateCount > 0 ? ` AND state IN (${Array(stateCount).fill('?').join(', ')})` : '';
      const where = `app_id = ?${bySim ? ' AND sim_no = ?' : ''} AND req_tm >= ? AND req_tm <= ?${states}`;
      // The inner query pages over index entries only (it names only indexed columns); the outer one reads
      // just the rows of the page.
      stmt = this.db.prepare(`SELECT s.* FROM (
          SELECT req_id AS k_id, req_tm AS k_tm FROM stored_av INDEXED BY ${bySim ? 'stored_av_app_sim_tm' : 'stored_av_app_tm'}
          WHERE ${where} ORDER BY req_tm, req_id LIMIT ? OFFSET ?
        ) AS k JOIN stored_av AS s ON s.req_id = k.k_id ORDER BY k.k_tm, k.k_id`);
      this.rangeStmts.set(key, stmt);
    }
    return stmt;
  }

  async queryRange(q: RangeQuery): Promise<StoredRecord[]> {
    checkRangeQuery(q);
    this.live();
    if (appFilterExcludesAll(q.appId, q.appIdFilter)) return [];
    if (q.states && q.states.length === 0) return [];
    const states = q.states ? [...new Set(q.states)] : [];
    const params: unknown[] = [q.appId];
    if (q.simNo !== undefined) params.push(normaliseSimNo(q.simNo));
    params.push(q.start.getTime(), q.end.getTime(), ...states, q.limit, (q.page - 1) * q.limit);
    const rows = this.rangeStatement(q.simNo !== undefined, states.length).all(...params) as Row[];
    return rows.map(fromRow);
  }

  async listUnfinished(node?: NodeScope): Promise<StoredRecord[]> {
    this.live();
    const rows = node ? this.stmts.nodeUnfinished.all(normaliseApiBase(node.apiBase)) : this.stmts.unfinished.all();
    return (rows as Row[]).map(fromRow);
  }

  async oldest(n: number, node?: NodeScope): Promise<StoredRecord[]> {
    checkLimit('oldest', n);
    this.live();
    const rows = node ? this.stmts.nodeOldest.all(normaliseApiBase(node.apiBase), n) : this.stmts.oldest.all(n);
    return (rows as Row[]).map(fromRow);
  }

  async totalBytes(node?: NodeScope): Promise<number> {
    this.live();
    const row = node ? this.stmts.nodeTotal.get(normaliseApiBase(node.apiBase)) : this.stmts.total.get();
    return (row as { total: number }).total;
  }

  async listUnnamed(after: string | null, n: number): Promise<StoredRecord[]> {
    checkLimit('listUnnamed', n);
    this.live();
    const rows = after === null ? this.stmts.unnamedFirst.all(n) : this.stmts.unnamedAfter.all(after, n);
    return (rows as Row[]).map(fromRow);
  }

  async claim(reqIds: readonly string[], apiBase: string): Promise<number> {
    const base = checkClaim(apiBase);
    const db = this.live();
    let named = 0;
    db.transaction(() => {
      for (let i = 0; i < reqIds.length; i += DELETE_CHUNK) {
        const chunk = reqIds.slice(i, i + DELETE_CHUNK);
        named += db
          .prepare(`UPDATE stored_av SET api_base = ? WHERE api_base IS NULL AND req_id IN (${chunk.map(() => '?').join(', ')})`)
          .run(base, ...chunk).changes;
      }
    })();
    return named;
  }

  async delete(reqIds: readonly string[]): Promise<number> {
    const db = this.live();
    let removed = 0;
    const run = db.transaction(() => {
      for (let i = 0; i < reqIds.length; i += DELETE_CHUNK) {
        const chunk = reqIds.slice(i, i + DELETE_CHUNK);
        removed += db.prepare(`DELETE FROM stored_av WHERE req_id IN (${chunk.map(() => '?').join(', ')})`).run(...chunk).changes;
      }
    });
    run();
    return removed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}

export function openSqliteCatalog(opts: SqliteCatalogOptions): SqliteRecordCatalog {
  return new SqliteRecordCatalog(opts);
}
