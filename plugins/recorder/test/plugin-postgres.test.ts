/**
 * The recorder with its catalog in a real PostgreSQL server (a throwaway cluster started here, Debian's
 * package): the shared plugin-level suite that plugin.test.ts runs on SQLite (plugin-suite.ts; each of its
 * describes in a database of its own), then what only PostgreSQL has: the rows as columns of the configured
 * table, and the shared-catalog rule for rows another gateway may still be writing.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import { scratchDir } from '../../../test/support/paths';
import { startPostgres, type PostgresServer } from '../../../test/support/postgres';
import { openPostgresCatalog } from '../src/catalog-postgres';
import { A, B, NORM_SIM, queryReq, recordClip, startGateway, testClip, utcText, type Harness } from './harness';
import { pgRows, probeVideo, rawRequest, sleep } from './helpers';
import { postgresBackend, recorderPluginSuite } from './plugin-suite';

describe('recorder plugin (PostgreSQL catalog)', function () {
  this.timeout(60_000);
  let server: PostgresServer;

  before(async () => {
    server = await startPostgres('recorder-plugin-pg');
  });
  after(async () => {
    await server?.stop();
  });

  recorderPluginSuite(postgresBackend(() => server));

  describe('PostgreSQL only: rows as table columns, the configured table name, the shared-catalog rule', function () {
    let url: string;
    let scratch: string;
    const h = {} as Harness;
    const ids: string[] = [];

    const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> => pgRows<T>(url, text, params);

    before(async () => {
      testClip();
      const admin = new Client({ connectionString: server.connectionString });
      await admin.connect();
      await admin.query('CREATE DATABASE recorder');
      await admin.end();
      url = server.urlFor('recorder');
      scratch = scratchDir('recorder-plugin-pg-only');
      h.dataDir = path.join(scratch, 'data');
      h.gw = await startGateway(h.dataDir, { postgresUrl: url, postgresTable: 'media_records' });
    });
    after(async () => {
      await h.gw?.stop();
      fs.rmSync(scratch, { recursive: true, force: true });
    });

    it('catalogs recordings in PostgreSQL; queries by reqId and by time range across pages', async () => {
      for (let i = 0; i < 4; i++) {
        ids.push(await recordClip(h, A, { chanId: 1 + i, frames: 26, simNo: i === 2 ? '13900139000' : '13800138000' }));
        await sleep(5);
      }
      const rows = await sql<{ req_id: string; app_id: string; state: string; sz: string; path: string; media_typ: string }>(
        'SELECT req_id, app_id, state, sz, path, media_typ FROM media_records ORDER BY req_tm, req_id',
      );
      assert.deepEqual(
        rows.map((r) => r.req_id),
        ids,
      );
      for (const r of rows) {
        assert.equal(r.state, 'done');
        assert.equal(r.media_typ, 'v');
        assert.equal(Number(r.sz), fs.statSync(path.join(h.dataDir, 'records', ...r.path.split('/'))).size);
      }
      assert.equal(fs.existsSync(path.join(h.dataDir, 'recorder', 'records.sqlite')), false, 'no embedded catalog alongside');

      const [av] = await queryReq(h, A, ids[0]!);
      assert.equal(av.reqId, ids[0]);
      assert.equal(av.appId, 'A');
      assert.equal(av.simNo, NORM_SIM);
      assert.equal(av.sz, Number(rows[0]!.sz));
      assert.match(av.reqTm, /\+00:00$/);

      const start = encodeURIComponent(utcText(new Date(Date.now() - 60_000)));
      const pages: string[][] = [];
      for (let page = 1; page <= 3; page++) {
        const r = await h.gw.api('GET', `/strm/record?startTm=${start}&__page=${page}&__limit=3`, undefined, A);
        assert.equal(r.json.errCode, 0);
        pages.push(r.json.data.map((x: { reqId: string }) => x.reqId));
      }
      assert.deepEqual(pages, [ids.slice(0, 3), ids.slice(3), []]);
      const bySim = await h.gw.api('GET', `/strm/record?startTm=${start}&simNo=013900139000`, undefined, A);
      assert.deepEqual(
        bySim.json.data.map((x: { reqId: string }) => x.reqId),
        [ids[2]],
      );
      const bad = await h.gw.api('GET', `/strm/record?startTm=${start}&__limit=2001`, undefined, A);
      assert.deepEqual([bad.json.errCode, bad.json.message], [-7, 'Invalid parameter `__limit`.']);
    });

    it('serves the files to their owner only; what it serves decodes', async () => {
      const [av] = await queryReq(h, A, ids[1]!);
      const dl = await rawRequest(h.gw.baseUrl, 'GET', new URL(av.url).pathname, A);
      assert.equal(dl.status, 200);
      assert.equal(dl.body.length, av.sz);
      const saved = path.join(scratch, 'pg-download.flv');
      fs.writeFileSync(saved, dl.body);
      const p = probeVideo(saved);
      assert.equal(p.frames, 26);
      assert.ok(Math.abs(p.duration - 1.04) <= 1.04 * 0.05, `duration ${p.duration}`);

      assert.deepEqual(await queryReq(h, B, ids[1]!), []);
      const start = encodeURIComponent(utcText(new Date(Date.now() - 3_600_000)));
      assert.deepEqual((await h.gw.api('GET', `/strm/record?startTm=${start}`, undefined, B)).json.data, []);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', new URL(av.url).pathname, B)).status, 404);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', `/strm/record/file/${av.path.replace(/[^/]+$/, '..%2f..%2f..%2f..%2frecorder')}`, A)).status, 404);
    });

    it('a restart keeps the catalog', async () => {
      const start = encodeURIComponent(utcText(new Date(Date.now() - 3_600_000)));
      const list = async () =>
        ((await h.gw.api('GET', `/strm/record?startTm=${start}`, undefined, A)).json.data as any[]).map((x) => ({ ...x, url: new URL(x.url).pathname }));
      const before = await list();
      assert.equal(before.length, 4);
      await h.gw.stop();
      h.gw = await startGateway(h.dataDir, { postgresUrl: url, postgresTable: 'media_records' });
      assert.deepEqual(await list(), before);
    });

    it('a row another gateway may still be recording is left alone until its file has been quiet for orphanQuietSec', async () => {
      // a "recording" row as a gateway that died would leave it, with a real file
      const other = await openPostgresCatalog({ connectionString: url, table: 'media_records', timeZone: 'UTC' });
      const row = await other.insertStart({
        reqId: 'orphan-0001',
        appId: 'A',
        simNo: '13800138000',
        chan: 9,
        live: true,
        reqTm: new Date(Date.now() - 120_000),
      });
      await other.close();
      const [src] = await queryReq(h, A, ids[0]!);
      const file = path.join(h.dataDir, 'records', ...row.path.split('/'));
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.copyFileSync(path.join(h.dataDir, 'records', ...src.path.split('/')), file);
      const state = async () =>
        (await sql<{ state: string; sz: string; end_tm: Date | null }>('SELECT state, sz, end_tm FROM media_records WHERE req_id = $1', ['orphan-0001']))[0]!;

      await h.gw.stop();
      h.gw = await startGateway(h.dataDir, { postgresUrl: url, postgresTable: 'media_records', orphanQuietSec: 300 });
      assert.equal((await state()).state, 'recording', 'a fresh file may belong to a live gateway');

      const quietSince = new Date(Date.now() - 600_000);
      fs.utimesSync(file, quietSince, quietSince);
      await h.gw.stop();
      h.gw = await startGateway(h.dataDir, { postgresUrl: url, postgresTable: 'media_records', orphanQuietSec: 300 });
      const after = await state();
      assert.equal(after.state, 'done');
      assert.equal(Number(after.sz), fs.statSync(file).size);
      assert.equal(after.end_tm!.getTime(), fs.statSync(file).mtime.getTime());
      const [av] = await queryReq(h, A, 'orphan-0001');
      assert.equal(av.mediaTyp, 'v', 'media type read from the file header');
    });
  });
});
