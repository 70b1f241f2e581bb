import assert from 'node:assert/strict';
import { Client } from 'pg';
import { startPostgres, type PostgresServer } from '../../../test/support/postgres';
import { openPostgresCatalog } from '../src/catalog-postgres';
import { catalogContract } from './catalog-contract';
import { pgV1Schema } from './v1-schema';

let server: PostgresServer | undefined;

let dbCount = 0;
let dbName = '';

async function admin<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: server!.connectionString });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe('PostgreSQL catalog', function () {
  this.timeout(60_000);

  before(async () => {
    server = await startPostgres('recorder-pg');
  });
  after(async () => {
    await server?.stop();
  });

  catalogContract('PostgreSQL', {
    async fresh() {
      // A database per test: nothing one test writes can be seen by the next. Its default collation is
      // ICU en-US, which sorts 'a_b' < 'B' < 'Zeta': only the catalog's own COLLATE "C" gives SQLite's order.
      dbName = `catalog_${++dbCount}`;
      await admin((c) => c.query(`CREATE DATABASE ${dbName} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`));
    },
    async open(opts) {
      return openPostgresCatalog({ connectionString: server!.urlFor(dbName), ...opts });
    },
  });

  describe('PostgreSQL catalog (server specifics)', () => {
    it('creates the table in a chosen name, and several instances opening at once do not collide', async () => {
      await admin((c) => c.query('CREATE DATABASE concurrent_open'));
      const url = server!.urlFor('concurrent_open');
      const catalogs = await Promise.all([1, 2, 3, 4].map(() => openPostgresCatalog({ connectionString: url, table: 'media_rec' })));
      try {
        await catalogs[0]!.insertStart({ reqId: 'shared-01', appId: 'a', simNo: '1', chan: 1, live: true, reqTm: new Date() });
        assert.equal((await catalogs[3]!.getByReqId('a', 'shared-01'))!.reqId, 'shared-01');
        const c = new Client({ connectionString: url });
        await c.connect();
        const tables = await c.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`).finally(() => c.end());
        assert.deepEqual(
          tables.rows.map((r) => r.tablename),
          ['media_rec'],
        );
      } finally {
        for (const c of catalogs) await c.close();
      }
    });

    it('adds api_base to a table of the previous layout (old rows read as null), once, with several instances opening at once', async () => {
      await admin((c) => c.query('CREATE DATABASE upgrade_open'));
      const url = server!.urlFor('upgrade_open');
      const c0 = new Client({ connectionString: url });
      await c0.connect();
      try {
        await c0.query(pgV1Schema('old_rec'));
        await c0.query(`INSERT INTO old_rec (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error)
          VALUES ('old-00001', 'a', '1', 1, true, now(), '2024/05/1/old-00001.flv', 'flv', 77, 'v', 'done', now(), NULL)`);
      } finally {
        await c0.end();
      }
      const catalogs = await Promise.all([1, 2, 3].map(() => openPostgresCatalog({ connectionString: url, table: 'old_rec' })));
      try {
        const old = (await catalogs[0]!.getByReqId('a', 'old-00001'))!;
        assert.equal(old.apiBase, null);
        assert.equal(old.sz, 77);
        await catalogs[1]!.insertStart({ reqId: 'new-00001', appId: 'a', simNo: '1', chan: 1, live: true, reqTm: new Date(), apiBase: 'http://node-b:7080/' });
        assert.equal((await catalogs[2]!.getByReqId('a', 'new-00001'))!.apiBase, 'http://node-b:7080');
        const c = new Client({ connectionString: url });
        await c.connect();
        const cols = (
          await c
            .query(
              `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_name = 'old_rec' AND column_name = 'api_base'`,
            )
            .finally(() => c.end())
        ).rows;
        assert.deepEqual(cols, [{ column_name: 'api_base', data_type: 'text', is_nullable: 'YES', column_default: null }]);
      } finally {
        for (const c of catalogs) await c.close();
      }
    });

    it('rejects a table name that is not a plain identifier, before connecting', async () => {
      await assert.rejects(openPostgresCatalog({ connectionString: server!.connectionString, table: 'x; DROP TABLE y' }), TypeError);
    });

    it('leaves a caller-owned pool open on close', async () => {
      const { Pool } = await import('pg');
      const pool = new Pool({ connectionString: server!.connectionString });
      try {
        const c = await openPostgresCatalog({ pool, table: 'pool_owned' });
        await c.close();
        assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
      } finally {
        await pool.end();
      }
    });

    it('reports an unreachable server as a rejected open, not a crash', async () => {
      await assert.rejects(openPostgresCatalog({ connectionString: 'postgresql://postgres@127.0.0.1:1/postgres' }), /ECONNREFUSED|connect/);
    });
  });
});
