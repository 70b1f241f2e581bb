/**
 * Several gateway nodes sharing one PostgreSQL catalog, each with its own data directory (its own record store)
 * and its own apiBase: two kernels in this process, on a real PostgreSQL server. A file recorded on node B lists
 * with B's url whichever node is asked, downloads from B, and a request for it on node C answers 307 to B for its
 * owner (404 / -8 for anyone else, as for an unknown file). Then the upgrade: catalogs made by the previous version
 * (no api_base column, PostgreSQL and SQLite) are migrated at boot, and their old rows list with the querying
 * node's url.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { scratchDir } from '../../../test/support/paths';
import { startPostgres, type PostgresServer } from '../../../test/support/postgres';
import { recordPath } from '../src/catalog';
import { openPostgresCatalog } from '../src/catalog-postgres';
import { A, B, NORM_SIM, closeReq, probeCtx, notices, openRecorded, publisherFor, queryReq, recordClip, startGateway, testClip, type Harness } from './harness';
import { unitAt } from './fixtures/h264-clip';
import { pgRows, probeVideo, rawRequest, sleep } from './helpers';
import { pgV1Schema, SQLITE_V1_SCHEMA } from './v1-schema';

/**
 * A node: its own data directory and publicHost (so its own apiBase, http://{publicHost}:{port}), listening on
 * every address so that apiBase, a loopback address other than 127.0.0.1, reaches it. The probe (harness.ts)
 * pushes media into the node started last.
 */
function startNode(dataDir: string, publicHost: string, recorder: Record<string, unknown>): Promise<TestGateway> {
  return startGateway(dataDir, recorder, undefined, { publicHost, listenHost: '0.0.0.0' });
}

const apiBaseOf = (gw: TestGateway, publicHost: string): string => `http://${publicHost}:${gw.ports['gateway.httpPort']}`;

async function createDatabase(server: PostgresServer, name: string): Promise<string> {
  const admin = new Client({ connectionString: server.connectionString });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return server.urlFor(name);
}

const sql = pgRows;

describe('recorder on a fleet: nodes sharing a PostgreSQL catalog, each with its own store', function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let scratch: string;

  before(async () => {
    testClip();
    server = await startPostgres('recorder-fleet-pg');
    scratch = scratchDir('recorder-fleet');
  });
  after(async () => {
    await server?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  describe('a file recorded on node B, asked for on node C', function () {
    let url: string;
    const b = {} as Harness;
    const c = {} as Harness;
    let bBase = '';
    let cBase = '';
    let reqId = '';
    let av: any;

    before(async () => {
      url = await createDatabase(server, 'fleet');
      c.dataDir = path.join(scratch, 'node-c');
      b.dataDir = path.join(scratch, 'node-b');
      // C first: the probe records into B, the node started last
      c.gw = await startNode(c.dataDir, '127.0.0.3', { postgresUrl: url });
      b.gw = await startNode(b.dataDir, '127.0.0.2', { postgresUrl: url });
      bBase = apiBaseOf(b.gw, '127.0.0.2');
      cBase = apiBaseOf(c.gw, '127.0.0.3');
    });
    after(async () => {
      await b.gw?.stop();
      await c.gw?.stop();
    });

    it("the row names B; GET /strm/record on C lists B's url, and so does the closed notice", async () => {
      reqId = await recordClip(b, A, { chanId: 1, frames: 26 });
      const [row] = await sql<{ api_base: string; state: string }>(url, 'SELECT api_base, state FROM stored_av WHERE req_id = $1', [reqId]);
      assert.deepEqual(row, { api_base: bBase, state: 'done' });

      [av] = await queryReq(c, A, reqId);
      assert.ok(av, 'C lists the record B made');
      assert.equal(av.url, `${bBase}/strm/record/file/${av.path}`);
      assert.equal(av.path, recordPath(NORM_SIM, reqId, new Date(Date.parse(av.reqTm)), 'UTC'));
      // the same on B, by time range as well as by reqId
      assert.deepEqual(await queryReq(b, A, reqId), [av]);
      const start = encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z'));
      const listed = (await c.gw.api('GET', `/strm/record?startTm=${start}`, undefined, A)).json.data as any[];
      assert.deepEqual(
        listed.map((x) => x.url),
        [av.url],
      );

      const closed = notices.find((n) => n.payload.reqId === reqId && n.payload.act === 'closed');
      assert.ok(closed, 'closed notice');
      assert.equal(closed.payload.playedAvDumpUrl, av.url);

      assert.ok(fs.existsSync(path.join(b.dataDir, 'records', ...av.path.split('/'))), "the file is in B's store");
      assert.equal(fs.existsSync(path.join(c.dataDir, 'records', ...av.path.split('/'))), false, "and not in C's");
    });

    it("downloading the url gives B's file (whole and by range), which decodes", async () => {
      const u = new URL(av.url);
      assert.equal(u.hostname, '127.0.0.2');
      const dl = await rawRequest(u.origin, 'GET', u.pathname, A);
      assert.equal(dl.status, 200);
      assert.equal(dl.headers['content-type'], 'video/x-flv');
      const onDisk = fs.readFileSync(path.join(b.dataDir, 'records', ...av.path.split('/')));
      assert.equal(dl.body.length, av.sz);
      assert.ok(dl.body.equals(onDisk), "the bytes of B's file");
      const saved = path.join(scratch, 'fleet-download.flv');
      fs.writeFileSync(saved, dl.body);
      assert.equal(probeVideo(saved).frames, 26);

      const part = await rawRequest(u.origin, 'GET', u.pathname, A, { range: 'bytes=100-199' });
      assert.equal(part.status, 206);
      assert.ok(part.body.equals(onDisk.subarray(100, 200)));
    });

    it("the same path on C answers 307 to B's url for the owner, query kept; following it gives the file", async () => {
      const p = new URL(av.url).pathname;
      const r = await rawRequest(c.gw.baseUrl, 'GET', p, A);
      assert.equal(r.status, 307);
      assert.equal(r.headers.location, av.url);
      assert.equal(r.body.length, 0);

      const withQuery = await rawRequest(c.gw.baseUrl, 'GET', `${p}?dl=1&x=a%20b`, A, { range: 'bytes=0-9' });
      assert.equal(withQuery.status, 307);
      assert.equal(withQuery.headers.location, `${av.url}?dl=1&x=a%20b`);
      const head = await rawRequest(c.gw.baseUrl, 'HEAD', p, A);
      assert.equal(head.status, 307);
      assert.equal(head.headers.location, av.url);

      // what a client does with the 307: the same request (credentials, Range) at the location
      const loc = new URL(withQuery.headers.location!);
      const followed = await rawRequest(loc.origin, 'GET', loc.pathname + loc.search, A, { range: 'bytes=0-9' });
      assert.equal(followed.status, 206);
      assert.equal(followed.body.toString('latin1', 0, 3), 'FLV');
    });

    it('another application gets 404 / -8 on C (and on B), exactly as for a file that does not exist', async () => {
      const p = new URL(av.url).pathname;
      const unknown = await rawRequest(c.gw.baseUrl, 'GET', p.replace(/[^/]+\.flv$/, 'nosuchreq0000.flv'), B);
      assert.equal(unknown.status, 404);
      const unknownJson = JSON.parse(unknown.body.toString());
      assert.equal(unknownJson.errCode, -8);
      for (const gw of [c.gw, b.gw]) {
        for (const method of ['GET', 'HEAD']) {
          const r = await rawRequest(gw.baseUrl, method, p, B);
          assert.equal(r.status, 404, `${method} on ${gw.baseUrl}`);
          assert.equal(r.headers.location, undefined);
          if (method === 'GET') assert.deepEqual(JSON.parse(r.body.toString()), unknownJson);
        }
      }
      assert.equal((await rawRequest(c.gw.baseUrl, 'GET', `${p}?x=1`, null)).status, 401, 'no credentials: the auth answer, not a redirect');
      assert.deepEqual(await queryReq(c, B, reqId), []);
    });

    it('a row naming the node asked, or no node, whose file is missing answers 404 (never a redirect to itself)', async () => {
      const cat = await openPostgresCatalog({ connectionString: url, timeZone: 'UTC' });
      try {
        const mine = await cat.insertStart({ reqId: 'onc-000001', appId: 'A', simNo: NORM_SIM, chan: 9, live: true, reqTm: new Date(), apiBase: cBase });
        const nobody = await cat.insertStart({ reqId: 'none-00001', appId: 'A', simNo: NORM_SIM, chan: 9, live: true, reqTm: new Date() });
        for (const rec of [mine, nobody]) {
          await cat.update(rec.reqId, { state: 'done', sz: 0, endTm: new Date() });
          const r = await rawRequest(c.gw.baseUrl, 'GET', `/strm/record/file/${rec.path}`, A);
          assert.equal(r.status, 404, rec.reqId);
          assert.equal(JSON.parse(r.body.toString()).errCode, -8);
        }
        // listed with the row's node, or (no node) the querying one
        assert.equal((await queryReq(b, A, 'onc-000001'))[0].url, `${cBase}/strm/record/file/${mine.path}`);
        assert.equal((await queryReq(b, A, 'none-00001'))[0].url, `${bBase}/strm/record/file/${nobody.path}`);
        assert.equal((await queryReq(c, A, 'none-00001'))[0].url, `${cBase}/strm/record/file/${nobody.path}`);
        await cat.delete([mine.reqId, nobody.reqId]);
      } finally {
        await cat.close();
      }
    });
  });

  describe("each node's recovery and retention treat its own rows (and rows naming no node whose file it holds)", function () {
    let url: string;
    const b = {} as Harness;
    const c = {} as Harness;
    let bBase = '';
    let cBase = '';
    /** an FLV file of `sz` bytes (>= 28): the header and one whole video tag */
    const flv = (sz: number) => {
      const data = sz - 13 - 11 - 4;
      const tag = Buffer.alloc(11 + data + 4, 7);
      tag.writeUInt8(9, 0);
      tag.writeUIntBE(data, 1, 3);
      tag.writeUIntBE(0, 4, 3);
      tag.writeUIntBE(0, 7, 4);
      tag.writeUInt32BE(11 + data, 11 + data);
      return Buffer.concat([Buffer.from('FLV\x01\x01\0\0\0\x09\0\0\0\0', 'latin1'), tag]);
    };
    const fileIn = (h: Harness, p: string) => path.join(h.dataDir, 'records', ...p.split('/'));
    /** a row as a node (or, apiBase null, a gateway of the previous version) left it, with its file in `store` */
    async function row(
      reqId: string,
      opts: { apiBase: string | null; ageSec: number; state: 'recording' | 'done'; store?: Harness; sz?: number },
    ): Promise<string> {
      const cat = await openPostgresCatalog({ connectionString: url, timeZone: 'UTC' });
      try {
        const r = await cat.insertStart({
          reqId,
          appId: 'A',
          simNo: NORM_SIM,
          chan: 7,
          live: true,
          reqTm: new Date(Date.now() - opts.ageSec * 1000),
          ...(opts.apiBase ? { apiBase: opts.apiBase } : {}),
        });
        const sz = opts.sz ?? 100;
        if (opts.store) {
          const f = fileIn(opts.store, r.path);
          fs.mkdirSync(path.dirname(f), { recursive: true });
          fs.writeFileSync(f, flv(sz));
          const quiet = new Date(Date.now() - 3_600_000);
          fs.utimesSync(f, quiet, quiet);
        }
        if (opts.state === 'done') await cat.update(reqId, { state: 'done', sz, endTm: new Date() });
        return r.path;
      } finally {
        await cat.close();
      }
    }
    const rowOf = async (reqId: string) =>
      (await sql<{ state: string; api_base: string | null; sz: string }>(url, 'SELECT state, api_base, sz FROM stored_av WHERE req_id = $1', [reqId]))[0];

    before(async () => {
      url = await createDatabase(server, 'fleet_passes');
      c.dataDir = path.join(scratch, 'passes-c');
      b.dataDir = path.join(scratch, 'passes-b');
      c.gw = await startNode(c.dataDir, '127.0.0.3', { postgresUrl: url, orphanQuietSec: 1 });
      b.gw = await startNode(b.dataDir, '127.0.0.2', { postgresUrl: url, orphanQuietSec: 1 });
      bBase = apiBaseOf(b.gw, '127.0.0.2');
      cBase = apiBaseOf(c.gw, '127.0.0.3');
    });
    after(async () => {
      await b.gw?.stop();
      await c.gw?.stop();
    });

    it("recovery on C leaves B's live recording, B's unfinished rows and rows naming no node whose file C lacks; it closes and removes its own", async () => {
      // B records, and goes on recording while C restarts
      const live = await openRecorded(b, A, { chanId: 5 });
      const { pub } = publisherFor(NORM_SIM, 5);
      for (let i = 0; i < 30; i++) pub.push(unitAt(testClip(), i));
      await sleep(1500); // past orphanQuietSec since the request time
      const liveRow = await rowOf(live);
      assert.deepEqual([liveRow?.state, liveRow?.api_base], ['recording', bBase]);
      // B's row left unfinished, its file quiet in B's store (B died: only B may close it, when it is back)
      const bDead = await row('bdead-0001', { apiBase: bBase, ageSec: 600, state: 'recording', store: b });
      // B's row never got a file (B stopped before the first keyframe): still B's to remove
      await row('bnofile-01', { apiBase: bBase, ageSec: 600, state: 'recording' });
      // rows of the previous version: a file in B's store, and a file nowhere
      const oldOnB = await row('oldonb-001', { apiBase: null, ageSec: 600, state: 'recording', store: b });
      await row('oldnone-01', { apiBase: null, ageSec: 600, state: 'recording' });
      // C's own: a quiet file, no file; and an old-version row whose file is in C's store
      await row('cdead-0001', { apiBase: cBase, ageSec: 600, state: 'recording', store: c, sz: 500 });
      await row('cnofile-01', { apiBase: cBase, ageSec: 600, state: 'recording' });
      await row('oldonc-001', { apiBase: null, ageSec: 600, state: 'recording', store: c, sz: 300 });

      await c.gw.stop();
      c.gw = await startNode(c.dataDir, '127.0.0.3', { postgresUrl: url, orphanQuietSec: 1 });
      assert.equal(probeCtx().site.apiBase, cBase, 'C is the same node (same apiBase)');

      assert.deepEqual(await rowOf(live), { state: 'recording', api_base: bBase, sz: liveRow!.sz }, "B's live recording keeps its row");
      assert.equal((await rowOf('bdead-0001'))?.state, 'recording');
      assert.equal((await rowOf('bnofile-01'))?.state, 'recording');
      assert.deepEqual(await rowOf('oldonb-001'), { state: 'recording', api_base: null, sz: '0' });
      assert.deepEqual(await rowOf('oldnone-01'), { state: 'recording', api_base: null, sz: '0' }, 'a row naming no node is never removed in a fleet');
      assert.deepEqual(await rowOf('cdead-0001'), { state: 'done', api_base: cBase, sz: '500' });
      assert.equal(await rowOf('cnofile-01'), undefined, "C's own row without a file goes, as before");
      assert.deepEqual(await rowOf('oldonc-001'), { state: 'done', api_base: cBase, sz: '300' }, 'claimed by C, whose store holds the file, and closed');
      assert.ok(fs.existsSync(fileIn(b, bDead)) && fs.existsSync(fileIn(b, oldOnB)));

      // B's recording ends as usual, its row whole
      for (let i = 30; i < 50; i++) pub.push(unitAt(testClip(), i));
      await closeReq(b, A, live);
      const [av] = await queryReq(c, A, live);
      assert.equal(av.url.startsWith(`${bBase}/strm/record/file/`), true);
      const ended = await rowOf(live);
      assert.equal(ended?.state, 'done');
      assert.equal(Number(ended?.sz), fs.statSync(fileIn(b, av.path)).size);

      // B back after a restart: closes its own, claims and closes the old row whose file it holds, removes its row
      // without a file; the old row whose file is nowhere stays
      await b.gw.stop();
      b.gw = await startNode(b.dataDir, '127.0.0.2', { postgresUrl: url, orphanQuietSec: 1 });
      assert.equal((await rowOf('bdead-0001'))?.state, 'done');
      assert.equal(await rowOf('bnofile-01'), undefined);
      assert.deepEqual(await rowOf('oldonb-001'), { state: 'done', api_base: bBase, sz: '100' });
      assert.deepEqual(await rowOf('oldnone-01'), { state: 'recording', api_base: null, sz: '0' });
      await sql(url, `DELETE FROM stored_av WHERE req_id = 'oldnone-01'`);
    });

    it("retention on C with a tiny limit removes C's oldest rows and files only; B's rows and files stay", async () => {
      // the oldest rows of all are B's (and an old-version row whose file is in B's store)
      const bOld = [
        await row('bret-00001', { apiBase: bBase, ageSec: 5000, state: 'done', store: b, sz: 1000 }),
        await row('bret-00002', { apiBase: bBase, ageSec: 4900, state: 'done', store: b, sz: 1000 }),
        await row('oldbret-01', { apiBase: null, ageSec: 4800, state: 'done', store: b, sz: 1000 }),
      ];
      const cRows = [
        await row('cret-00001', { apiBase: cBase, ageSec: 4000, state: 'done', store: c, sz: 100 }),
        await row('oldcret-01', { apiBase: null, ageSec: 3900, state: 'done', store: c, sz: 100 }),
        await row('cret-00002', { apiBase: cBase, ageSec: 3800, state: 'done', store: c, sz: 100 }),
      ];
      const before = await sql<{ req_id: string }>(url, 'SELECT req_id FROM stored_av ORDER BY req_tm, req_id');
      const cBytes = Number((await sql<{ n: string }>(url, 'SELECT SUM(sz)::text AS n FROM stored_av WHERE api_base = $1', [cBase]))[0]!.n);

      // C's own rows come to cBytes + 100 with the old row it claims: a limit of cBytes - 100 takes its two oldest
      await c.gw.stop();
      c.gw = await startNode(c.dataDir, '127.0.0.3', { postgresUrl: url, orphanQuietSec: 1, maxTotalBytes: cBytes - 100 });
      const after = (await sql<{ req_id: string }>(url, 'SELECT req_id FROM stored_av ORDER BY req_tm, req_id')).map((r) => r.req_id);
      const gone = before.map((r) => r.req_id).filter((id) => !after.includes(id));
      assert.deepEqual(gone, ['cret-00001', 'oldcret-01'], "C's two oldest, the old row it claimed included");
      for (const id of ['bret-00001', 'bret-00002', 'oldbret-01']) assert.ok(after.includes(id), `${id} stays`);
      for (const p of bOld) assert.ok(fs.existsSync(fileIn(b, p)), `${p} stays in B's store`);
      assert.equal(fs.existsSync(fileIn(c, cRows[0]!)), false);
      assert.equal(fs.existsSync(fileIn(c, cRows[1]!)), false);
      assert.ok(fs.existsSync(fileIn(c, cRows[2]!)));
      const cLeft = Number((await sql<{ n: string }>(url, 'SELECT COALESCE(SUM(sz), 0)::text AS n FROM stored_av WHERE api_base = $1', [cBase]))[0]!.n);
      assert.ok(cLeft <= cBytes - 100, `C's rows within its limit: ${cLeft}`);
      // B's own retention counts its rows, the old row it holds included (claimed at its start), and not C's
      assert.equal((await rowOf('oldbret-01'))?.api_base, null, 'C did not claim a row whose file it lacks');
      await b.gw.stop();
      b.gw = await startNode(b.dataDir, '127.0.0.2', { postgresUrl: url, orphanQuietSec: 1, maxTotalBytes: 1 });
      assert.equal(await rowOf('oldbret-01'), undefined);
      for (const p of bOld) assert.equal(fs.existsSync(fileIn(b, p)), false);
      assert.ok(fs.existsSync(fileIn(c, cRows[2]!)), "C's file stays");
      assert.equal((await rowOf('cret-00002'))?.api_base, cBase);
    });
  });

  describe('upgrade: a catalog made by the previous version (no api_base) is migrated at boot', function () {
    const oldRow = (reqId: string, reqTm: Date) => ({
      reqId,
      path: recordPath(NORM_SIM, reqId, reqTm, 'UTC'),
    });

    it("PostgreSQL: the column is added, old rows list with the querying node's url and download there; new rows name their node", async () => {
      const url = await createDatabase(server, 'upgrade');
      await sql(url, pgV1Schema('stored_av'));
      const reqTm = new Date(Date.now() - 600_000);
      const old = oldRow('oldrec-0001', reqTm);
      const h = { dataDir: path.join(scratch, 'upgrade-pg') } as Harness;
      // the old version's file, in this node's store
      const file = path.join(h.dataDir, 'records', ...old.path.split('/'));
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, Buffer.concat([Buffer.from('FLV\x01\x01\0\0\0\x09\0\0\0\0', 'latin1'), Buffer.alloc(100, 7)]));
      const sz = fs.statSync(file).size;
      await sql(
        url,
        `INSERT INTO stored_av (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error)
        VALUES ($1, 'A', $2, 1, true, $3, $4, 'flv', $5, 'v', 'done', $6, NULL)`,
        [old.reqId, NORM_SIM, reqTm, old.path, sz, new Date(reqTm.getTime() + 60_000)],
      );
      // and one whose file is in no node's store (a node not upgraded yet, or gone)
      const stray = oldRow('oldrec-0003', reqTm);
      await sql(
        url,
        `INSERT INTO stored_av (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error)
        VALUES ($1, 'A', $2, 1, true, $3, $4, 'flv', 10, 'v', 'done', $5, NULL)`,
        [stray.reqId, NORM_SIM, reqTm, stray.path, new Date(reqTm.getTime() + 60_000)],
      );
      const column = `SELECT is_nullable FROM information_schema.columns WHERE table_name = 'stored_av' AND column_name = 'api_base'`;
      assert.deepEqual(await sql(url, column), [], 'the previous layout');

      let base: string;
      h.gw = await startNode(h.dataDir, '127.0.0.4', { postgresUrl: url });
      try {
        base = apiBaseOf(h.gw, '127.0.0.4');
        assert.deepEqual(await sql(url, column), [{ is_nullable: 'YES' }]);
        const [av] = await queryReq(h, A, old.reqId);
        assert.equal(av.url, `${base}/strm/record/file/${old.path}`);
        assert.equal(av.sz, sz);
        const dl = await rawRequest(h.gw.baseUrl, 'GET', new URL(av.url).pathname, A);
        assert.equal(dl.status, 200);
        assert.ok(dl.body.equals(fs.readFileSync(file)));

        const fresh = await recordClip(h, A, { chanId: 2, frames: 10 });
        assert.deepEqual(await sql(url, 'SELECT req_id, api_base FROM stored_av ORDER BY req_tm, req_id'), [
          // the old row whose file this node holds is claimed at its start; the other one names no node still
          { req_id: old.reqId, api_base: base },
          { req_id: stray.reqId, api_base: null },
          { req_id: fresh, api_base: base },
        ]);
      } finally {
        await h.gw.stop();
      }
      // another node asked: an old row naming no node lists with that node's url, and is not redirected (no node to
      // send it to); the claimed one names the node that holds its file
      const other = await startNode(path.join(scratch, 'upgrade-pg-other'), '127.0.0.5', { postgresUrl: url });
      try {
        const [av] = await queryReq({ gw: other, dataDir: other.dataDir }, A, stray.reqId);
        assert.equal(av.url, `${apiBaseOf(other, '127.0.0.5')}/strm/record/file/${stray.path}`);
        assert.equal((await rawRequest(other.baseUrl, 'GET', `/strm/record/file/${stray.path}`, A)).status, 404);
        const [claimed] = await queryReq({ gw: other, dataDir: other.dataDir }, A, old.reqId);
        assert.equal(claimed.url, `${base}/strm/record/file/${old.path}`);
        const r = await rawRequest(other.baseUrl, 'GET', `/strm/record/file/${old.path}`, A);
        assert.equal(r.status, 307);
        assert.equal(r.headers.location, claimed.url);
      } finally {
        await other.stop();
      }
    });

    it("SQLite: a version 1 file gets the column (version 2) at boot; old rows list with this node's url", async () => {
      const h = { dataDir: path.join(scratch, 'upgrade-sqlite') } as Harness;
      const reqTm = new Date(Date.now() - 600_000);
      const old = oldRow('oldrec-0002', reqTm);
      const dbFile = path.join(h.dataDir, 'recorder', 'records.sqlite');
      fs.mkdirSync(path.dirname(dbFile), { recursive: true });
      const file = path.join(h.dataDir, 'records', ...old.path.split('/'));
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, Buffer.concat([Buffer.from('FLV\x01\x01\0\0\0\x09\0\0\0\0', 'latin1'), Buffer.alloc(50, 7)]));
      const db = new Database(dbFile);
      db.pragma('journal_mode = WAL');
      db.exec(SQLITE_V1_SCHEMA);
      db.pragma('user_version = 1');
      db.prepare(
        `INSERT INTO stored_av (req_id, app_id, sim_no, chan, live, req_tm, path, ext, sz, media_typ, state, end_tm, error)
        VALUES (?, 'A', ?, 1, 1, ?, ?, 'flv', ?, 'v', 'done', ?, NULL)`,
      ).run(old.reqId, NORM_SIM, reqTm.getTime(), old.path, fs.statSync(file).size, reqTm.getTime() + 60_000);
      db.close();

      h.gw = await startNode(h.dataDir, '127.0.0.6', {});
      try {
        const [av] = await queryReq(h, A, old.reqId);
        assert.equal(av.url, `${apiBaseOf(h.gw, '127.0.0.6')}/strm/record/file/${old.path}`);
        assert.equal((await rawRequest(h.gw.baseUrl, 'GET', new URL(av.url).pathname, A)).status, 200);
        const fresh = await recordClip(h, A, { chanId: 3, frames: 10 });
        assert.equal((await queryReq(h, A, fresh))[0].url.startsWith(`${apiBaseOf(h.gw, '127.0.0.6')}/strm/record/file/`), true);
      } finally {
        await h.gw.stop();
      }
      const after = new Database(dbFile, { readonly: true });
      try {
        assert.equal(after.pragma('user_version', { simple: true }), 2);
        assert.deepEqual(
          after
            .prepare('SELECT req_id, api_base FROM stored_av ORDER BY req_tm')
            .all()
            .map((r: any) => r.api_base),
          [null, apiBaseOf(h.gw, '127.0.0.6')],
        );
      } finally {
        after.close();
      }
    });
  });
});
