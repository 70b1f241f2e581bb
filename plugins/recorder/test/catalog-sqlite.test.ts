import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { scratchDir } from '../../../test/support/paths';
import { openSqliteCatalog } from '../src/catalog-sqlite';
import { catalogContract } from './catalog-contract';
import { SQLITE_V1_SCHEMA } from './v1-schema';

let dir = '';

catalogContract('SQLite', {
  async fresh() {
    dir = scratchDir('recorder-sqlite');
  },
  async open(opts) {
    return openSqliteCatalog({ dir, ...opts });
  },
  async cleanup() {
    fs.rmSync(dir, { recursive: true, force: true });
  },
});

describe('SQLite catalog (file specifics)', () => {
  let d = '';
  beforeEach(() => {
    d = scratchDir('recorder-sqlite-file');
  });
  afterEach(() => fs.rmSync(d, { recursive: true, force: true }));

  it('creates its directory and a WAL-mode file there', async () => {
    const nested = path.join(d, 'a', 'b');
    const c = openSqliteCatalog({ dir: nested, fileName: 'cat.db' });
    assert.equal(c.file, path.join(nested, 'cat.db'));
    await c.close();
    const db = new Database(path.join(nested, 'cat.db'), { readonly: true });
    try {
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    } finally {
      db.close();
    }
  });

  it('pages both query modes from covering indexes (no table rows read while skipping the OFFSET)', async () => {
    const c = openSqliteCatalog({ dir: d });
    await c.close();
    const db = new Database(path.join(d, 'records.sqlite'), { readonly: true });
    try {
      const plan = (sql: string): string =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...Array((sql.match(/\?/g) ?? []).length).fill(1)) as { detail: string }[])
          .map((r) => r.detail)
          .join(' | ');
      const inner = (index: string, where: string): string =>
        `SELECT req_id FROM stored_av INDEXED BY ${index} WHERE ${where} ORDER BY req_tm, req_id LIMIT ? OFFSET ?`;
      const byApp = plan(inner('stored_av_app_tm', "app_id = ? AND req_tm >= ? AND req_tm <= ? AND state IN ('done')"));
      const bySim = plan(inner('stored_av_app_sim_tm', "app_id = ? AND sim_no = ? AND req_tm >= ? AND req_tm <= ? AND state IN ('done')"));
      assert.match(byApp, /USING COVERING INDEX stored_av_app_tm/);
      assert.match(bySim, /USING COVERING INDEX stored_av_app_sim_tm/);
      // Ordered by the index itself: a sort step would read every matching row before OFFSET.
      assert.doesNotMatch(byApp + bySim, /TEMP B-TREE/);
    } finally {
      db.close();
    }
  });

  it('adds api_base to a version 1 file (the previous layout): old rows read as null, new rows keep theirs', async () => {
    const file = path.join(d, 'records.sqlite');
    const v1 = new Database(file);
    v1.exec(SQLITE_V1_SCHEMA);
    v1.pragma('user_version = 1');
    v1.prepare(
      `INSERT INTO stored_av (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error)
      VALUES ('old-00001', 'appA', '13800001111', 1, 1, ?, '2024/05/13800001111/old-00001.flv', 'flv', 123, 'v', 'done', ?, NULL)`,
    ).run(Date.parse('2024-05-01T00:00:00Z'), Date.parse('2024-05-01T00:01:00Z'));
    v1.close();

    const c = openSqliteCatalog({ dir: d, timeZone: 'UTC' });
    const old = (await c.getByReqId('appA', 'old-00001'))!;
    assert.equal(old.apiBase, null);
    assert.equal(old.sz, 123);
    await c.insertStart({ reqId: 'new-00001', appId: 'appA', simNo: '13800001111', chan: 1, live: true, reqTm: new Date(), apiBase: 'http://node-b:7080' });
    assert.equal((await c.getByReqId('appA', 'new-00001'))!.apiBase, 'http://node-b:7080');
    await c.close();
    // opening it again changes nothing
    await openSqliteCatalog({ dir: d }).close();
    const db = new Database(file, { readonly: true });
    try {
      assert.equal(db.pragma('user_version', { simple: true }), 2);
      const cols = db.pragma('table_info(stored_av)') as Array<{ name: string; notnull: number; dflt_value: unknown }>;
      assert.deepEqual(
        cols.filter((x) => x.name === 'api_base').map((x) => [x.notnull, x.dflt_value]),
        [[0, null]],
      );
    } finally {
      db.close();
    }
  });

  it('refuses a file written by a newer schema instead of misreading it', async () => {
    const db = new Database(path.join(d, 'records.sqlite'));
    db.pragma('user_version = 99');
    db.close();
    assert.throws(() => openSqliteCatalog({ dir: d }), /schema version 99/);
  });

  it('refuses an unknown time zone name', () => {
    assert.throws(() => openSqliteCatalog({ dir: d, timeZone: 'Mars/Olympus' }), /unknown time zone 'Mars\/Olympus'/);
  });
});
