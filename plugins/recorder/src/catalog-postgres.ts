/**
 * Catalog in PostgreSQL, for several gateway instances sharing one store. Same rows, order and paging as
 * the SQLite catalog; text keys use the "C" collation so reqId ties sort bytewise there as here.
 */
import { Pool, type PoolConfig } from 'pg';
import {
  appFilterExcludesAll,
  checkClaim,
  checkLimit,
  checkRangeQuery,
  checkRecordUpdate,
  DuplicateRecordError,
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

export interface PostgresCatalogOptions extends CatalogOptions {
  /** A pool the caller owns (close() leaves it open) ... */
  pool?: Pool;
  /** ... or a connection string / pool config for a pool this catalog owns and ends on close(). */
  connectionString?: string;
  poolConfig?: PoolConfig;
  /** Table name, a plain lower-case identifier; default 'stored_av'. */
  table?: string;
}

interface Row {
  req_id: string;
  app_id: string;
  sim_no: string;
  chan: number;
  live: boolean;
  req_tm: Date;
  path: string;
  ext: string;
  sz: string | number; // bigint arrives as a string
  media_typ: string | null;
  state: string;
  end_tm: Date | null;
  error: string | null;
  /** absent (undefined) only if the table lacked the column, which open() adds */
  api_base?: string | null;
}

function fromRow(r: Row): StoredRecord {
  return {
    reqId: r.req_id,
    appId: r.app_id,
    simNo: r.sim_no,
    chan: r.chan,
    live: r.live,
    reqTm: r.req_tm,
    path: r.path,
    ext: 'flv',
    sz: Number(r.sz),
    mediaTyp: r.media_typ as MediaTyp | null,
    state: r.state as RecordState,
    endTm: r.end_tm,
    error: r.error,
    apiBase: r.api_base ?? null,
  };
}

/**
 * Catalogs created before rows named their node (api_base) get the column here: nullable and without a default,
 * so adding it rewrites nothing, and its old rows read as null (their url falls back to the querying node's
 * apiBase). Gateways of the previous version keep working with the column there (they name their columns).
 */
function migrationSql(t: string): string {
  return `ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS api_base text`;
}

function schemaSql(t: string): string {
  return `
CREATE TABLE IF NOT EXISTS ${t} (
  req_id    text COLLATE "C" PRIMARY KEY,
  app_id    text COLLATE "C" NOT NULL,
  sim_no    text COLLATE "C" NOT NULL,
  chan      integer NOT NULL,
  live      boolean NOT NULL,
  req_tm    timestamptz NOT NULL,
  path      text NOT NULL,
  ext       text NOT NULL,
  sz        bigint NOT NULL DEFAULT 0,
  media_typ text,
  state     text NOT NULL CHECK (state IN ('recording', 'done', 'failed')),
  end_tm    timestamptz,
  error     text,
  api_base  text
);
CREATE INDEX IF NOT EXISTS ${t}_app_tm ON ${t} (app_id, req_tm, req_id, state);
CREATE INDEX IF NOT EXISTS ${t}_app_sim_tm ON ${t} (app_id, sim_no, req_tm, req_id, state);
CREATE INDEX IF NOT EXISTS ${t}_unfinished ON ${t} (req_tm, req_id) WHERE state = 'recording';
CREATE INDEX IF NOT EXISTS ${t}_finished ON ${t} (req_tm, req_id) WHERE state <> 'recording';
`;
}

// Any fixed number: instances starting together serialise their CREATE ... IF NOT EXISTS on it, which
// otherwise can fail with a unique violation in pg_type.
const SCHEMA_LOCK_KEY = 1078_0001;

export class PostgresRecordCatalog implements RecordCatalog {
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly t: string;
  private readonly timeZone: string | undefined;
  private closed = false;

  private constructor(pool: Pool, ownsPool: boolean, table: string, timeZone: string | undefined) {
    this.pool = pool;
    this.ownsPool = ownsPool;
    this.t = table;
    this.timeZone = timeZone;
  }

  /** Connects, creates the table and indexes when missing (adds api_base to an older table), and returns the catalog. */
  static async open(opts: PostgresCatalogOptions): Promise<PostgresRecordCatalog> {
    assertTimeZone(opts.timeZone);
    const table = opts.table ?? 'stored_av';
    if (!/^[a-z_][a-z0-9_]{0,40}$/.test(table)) throw new TypeError(`catalog table name '${table}' must be a lower-case identifier`);
    if (!opts.pool && !opts.connectionString && !opts.poolConfig) throw new TypeError('postgres catalog needs a pool, a connectionString or a poolConfig');
    const ownsPool = !opts.pool;
    const pool = opts.pool ?? new Pool({ ...opts.poolConfig, ...(opts.connectionString ? { connectionString: opts.connectionString } : {}) });
    // An idle client losing its server must not crash the process; the next query reports the failure.
    if (ownsPool) pool.on('error', () => undefined);
    try {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_KEY]);
        await client.query(schemaSql(table));
        // Only when the column is missing: ALTER TABLE takes an exclusive lock on the table even when it has
        // nothing to do, and every gateway of a fleet opens the catalog at each boot.
        const col = await client.query(`SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'api_base' AND NOT attisdropped`, [table]);
        if (col.rowCount === 0) await client.query(migrationSql(table));
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    } catch (err) {
      if (ownsPool) await pool.end().catch(() => undefined);
      throw err;
    }
    return new PostgresRecordCatalog(pool, ownsPool, table, opts.timeZone);
  }

  private async q(sql: string, params: unknown[] = []): Promise<{ rows: Row[]; rowCount: number }> {
    if (this.closed) throw new Error('record catalog is closed');
    const r = await this.pool.query(sql, params);
    return { rows: r.rows as Row[], rowCount: r.rowCount ?? 0 };
  }

  async insertStart(rec: RecordStart): Promise<StoredRecord> {
    const r = startedRecord(rec, this.timeZone);
    try {
      await this.q(
        `INSERT INTO ${this.t} (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error, api_base)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, NULL, $12)`,
        [r.reqId, r.appId, r.simNo, r.chan, r.live, r.reqTm, r.path, r.ext, r.sz, r.mediaTyp, r.state, r.apiBase],
      );
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw new DuplicateRecordError(r.reqId);
      throw err;
    }
    return r;
  }

  async update(reqId: string, patch: RecordUpdate, ifRecording = false): Promise<boolean> {
    checkRecordUpdate(patch);
    const sets: string[] = [];
    const params: unknown[] = [reqId];
    const set = (col: string, v: unknown): void => {
      params.push(v);
      sets.push(`${col} = $${params.length}`);
    };
    if (patch.sz !== undefined) set('sz', patch.sz);
    if (patch.mediaTyp !== undefined) set('media_typ', patch.mediaTyp);
    if (patch.state !== undefined) set('state', patch.state);
    if (patch.endTm !== undefined) set('end_tm', patch.endTm);
    if (patch.error !== undefined) set('error', patch.error);
    const where = ifRecording ? `req_id = $1 AND state = 'recording'` : 'req_id = $1';
    if (sets.length === 0) return (await this.q(`SELECT 1 FROM ${this.t} WHERE ${where}`, params)).rowCount > 0;
    return (await this.q(`UPDATE ${this.t} SET ${sets.join(', ')} WHERE ${where}`, params)).rowCount > 0;
  }

  async getByReqId(appId: string, reqId: string): Promise<StoredRecord | null> {
    const { rows } = await this.q(`SELECT * FROM ${this.t} WHERE req_id = $1 AND app_id = $2`, [reqId, appId]);
    return rows.length ? fromRow(rows[0]!) : null;
  }

  async queryRange(q: RangeQuery): Promise<StoredRecord[]> {
    checkRangeQuery(q);
    if (this.closed) throw new Error('record catalog is closed');
    if (appFilterExcludesAll(q.appId, q.appIdFilter)) return [];
    if (q.states && q.states.length === 0) return [];
    const params: unknown[] = [q.appId];
    const where = ['app_id = $1'];
    const add = (cond: (n: number) => string, v: unknown): void => {
      params.push(v);
      where.push(cond(params.length));
    };
    if (q.simNo !== undefined) add((n) => `sim_no = $${n}`, normaliseSimNo(q.simNo));
    add((n) => `req_tm >= $${n}`, q.start);
    add((n) => `req_tm <= $${n}`, q.end);
    if (q.states) add((n) => `state = ANY($${n}::text[])`, [...new Set(q.states)]);
    params.push(q.limit, (q.page - 1) * q.limit);
    // The inner query pages over the (app_id[, sim_no], req_tm, req_id, state) index; only the page's rows
    // are read from the table.
    const { rows } = await this.q(
      `SELECT s.* FROM (
         SELECT req_id AS k_id, req_tm AS k_tm FROM ${this.t}
         WHERE ${where.join(' AND ')} ORDER BY req_tm, req_id LIMIT $${params.length - 1} OFFSET $${params.length}
       ) AS k JOIN ${this.t} AS s ON s.req_id = k.k_id ORDER BY k.k_tm, k.k_id`,
      params,
    );
    return rows.map(fromRow);
  }

  async listUnfinished(node?: NodeScope): Promise<StoredRecord[]> {
    const { rows } = node
      ? await this.q(`SELECT * FROM ${this.t} WHERE state = 'recording' AND (api_base = $1 OR api_base IS NULL) ORDER BY req_tm, req_id`, [
          normaliseApiBase(node.apiBase),
        ])
      : await this.q(`SELECT * FROM ${this.t} WHERE state = 'recording' ORDER BY req_tm, req_id`);
    return rows.map(fromRow);
  }

  async oldest(n: number, node?: NodeScope): Promise<StoredRecord[]> {
    checkLimit('oldest', n);
    const { rows } = node
      ? await this.q(`SELECT * FROM ${this.t} WHERE state <> 'recording' AND api_base = $2 ORDER BY req_tm, req_id LIMIT $1`, [
          n,
          normaliseApiBase(node.apiBase),
        ])
      : await this.q(`SELECT * FROM ${this.t} WHERE state <> 'recording' ORDER BY req_tm, req_id LIMIT $1`, [n]);
    return rows.map(fromRow);
  }

  async totalBytes(node?: NodeScope): Promise<number> {
    const { rows } = node
      ? await this.q(`SELECT COALESCE(SUM(sz), 0)::text AS total FROM ${this.t} WHERE api_base = $1`, [normaliseApiBase(node.apiBase)])
      : await this.q(`SELECT COALESCE(SUM(sz), 0)::text AS total FROM ${this.t}`);
    return Number((rows[0] as unknown as { total: string }).total);
  }

  async listUnnamed(after: string | null, n: number): Promise<StoredRecord[]> {
    checkLimit('listUnnamed', n);
    // walks the primary key (C collation: bytewise, as SQLite's) from `after`, so paging through them all reads the table once
    const { rows } =
      after === null
        ? await this.q(`SELECT * FROM ${this.t} WHERE api_base IS NULL ORDER BY req_id LIMIT $1`, [n])
        : await this.q(`SELECT * FROM ${this.t} WHERE api_base IS NULL AND req_id > $2 ORDER BY req_id LIMIT $1`, [n, after]);
    return rows.map(fromRow);
  }

  async claim(reqIds: readonly string[], apiBase: string): Promise<number> {
    const base = checkClaim(apiBase);
    if (reqIds.length === 0) return 0;
    return (await this.q(`UPDATE ${this.t} SET api_base = $1 WHERE req_id = ANY($2::text[]) AND api_base IS NULL`, [base, reqIds])).rowCount;
  }

  async delete(reqIds: readonly string[]): Promise<number> {
    if (reqIds.length === 0) return 0;
    return (await this.q(`DELETE FROM ${this.t} WHERE req_id = ANY($1::text[])`, [reqIds])).rowCount;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
  }
}

export function openPostgresCatalog(opts: PostgresCatalogOptions): Promise<PostgresRecordCatalog> {
  return PostgresRecordCatalog.open(opts);
}
