/**
 * The behaviour every RecordCatalog must have; catalog-sqlite.test.ts and catalog-postgres.test.ts run it
 * against the real databases.
 */
import assert from 'node:assert/strict';
import { DuplicateRecordError, type RecordCatalog, type RecordStart, type StoredRecord } from '../src/catalog';

export interface CatalogHarness {
  /** Prepares a new empty store; called before each test. */
  fresh(): Promise<void>;
  /** Opens (or reopens) the current test's store. */
  open(opts?: { timeZone?: string }): Promise<RecordCatalog>;
  /** Called after each test, after the catalogs it opened are closed. */
  cleanup?(): Promise<void>;
}

const T0 = Date.parse('2024-05-01T00:00:00Z');
const MIN = 60_000;

function start(overrides: Partial<RecordStart> & { reqId: string }): RecordStart {
  return { appId: 'appA', simNo: '13800001111', chan: 1, live: true, reqTm: new Date(T0), ...overrides };
}

const ids = (rows: StoredRecord[]): string[] => rows.map((r) => r.reqId);

/** Deterministic shuffle so insertion order differs from the order queries must return. */
function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  let seed = 12345;
  for (let i = out.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const j = seed % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

export function catalogContract(name: string, harness: CatalogHarness): void {
  describe(`${name} catalog (contract)`, function () {
    const opened: RecordCatalog[] = [];
    const open = async (opts?: { timeZone?: string }): Promise<RecordCatalog> => {
      const c = await harness.open(opts);
      opened.push(c);
      return c;
    };

    beforeEach(async () => {
      await harness.fresh();
    });
    afterEach(async () => {
      for (const c of opened.splice(0)) await c.close();
      await harness.cleanup?.();
    });

    it('insertStart stores a recording row with normalised simNo and a dated path; getByReqId reads it back', async () => {
      const c = await open({ timeZone: 'Asia/Shanghai' });
      // 16:30 UTC on 30 April is 00:30 on 1 May in UTC+8: the path must use the server zone's month.
      const reqTm = new Date('2024-04-30T16:30:00.123Z');
      const r = await c.insertStart(
        start({ reqId: 'req-0001', simNo: '013800001111', chan: 3, live: false, reqTm, mediaTyp: 'v', apiBase: 'http://node-b.example:7080' }),
      );
      const expected: StoredRecord = {
        reqId: 'req-0001',
        appId: 'appA',
        simNo: '13800001111',
        chan: 3,
        live: false,
        reqTm,
        path: '2024/05/13800001111/req-0001.flv',
        ext: 'flv',
        sz: 0,
        mediaTyp: 'v',
        state: 'recording',
        endTm: null,
        error: null,
        apiBase: 'http://node-b.example:7080',
      };
      assert.deepEqual(r, expected);
      assert.deepEqual(await c.getByReqId('appA', 'req-0001'), expected);

      const utc = await open({ timeZone: 'UTC' });
      const r2 = await utc.insertStart(start({ reqId: 'req-0002', reqTm }));
      assert.equal(r2.path, '2024/04/13800001111/req-0002.flv');
      assert.equal((await utc.getByReqId('appA', 'req-0002'))!.mediaTyp, null);
    });

    it("keeps the recording node's apiBase with the row (trailing slash dropped), through updates and queries", async () => {
      const c = await open({ timeZone: 'UTC' });
      await c.insertStart(start({ reqId: 'node-0001', apiBase: 'https://gw-b.example/api/' }));
      await c.insertStart(start({ reqId: 'node-0002', reqTm: new Date(T0 + MIN) }));
      await c.update('node-0001', { sz: 10, state: 'done', endTm: new Date(T0 + MIN) });
      assert.equal((await c.getByReqId('appA', 'node-0001'))!.apiBase, 'https://gw-b.example/api');
      assert.equal((await c.getByReqId('appA', 'node-0002'))!.apiBase, null, 'no apiBase given: null');
      const rows = await c.queryRange({ appId: 'appA', start: new Date(T0), end: new Date(T0 + 10 * MIN), page: 1, limit: 10 });
      assert.deepEqual(
        rows.map((r) => [r.reqId, r.apiBase]),
        [
          ['node-0001', 'https://gw-b.example/api'],
          ['node-0002', null],
        ],
      );
      assert.deepEqual(
        (await c.oldest(5)).map((r) => r.apiBase),
        ['https://gw-b.example/api'],
      );
      assert.deepEqual(
        (await c.listUnfinished()).map((r) => r.apiBase),
        [null],
      );
      await assert.rejects(c.insertStart(start({ reqId: 'node-0003', apiBase: 'http://a b' })), TypeError);
    });

    it('insertStart refuses a duplicate reqId and ids that could escape the store', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'dup-00001' }));
      await assert.rejects(c.insertStart(start({ reqId: 'dup-00001', appId: 'appB' })), DuplicateRecordError);
      await assert.rejects(c.insertStart(start({ reqId: '../../etc/x' })), TypeError);
      await assert.rejects(c.insertStart(start({ reqId: 'okid-0001', simNo: 'a/b' })), TypeError);
      // The failed inserts left nothing behind and did not touch the first row.
      assert.equal((await c.getByReqId('appA', 'dup-00001'))!.appId, 'appA');
      assert.equal(await c.getByReqId('appB', 'dup-00001'), null);
      assert.equal(await c.getByReqId('appA', 'okid-0001'), null);
    });

    it('update changes only the given fields and reports unknown reqIds', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'upd-00001' }));
      const endTm = new Date(T0 + 5 * MIN);
      // Beyond 2^32 so a 32-bit column or a lost bigint conversion would show.
      assert.equal(await c.update('upd-00001', { sz: 5_000_000_123, mediaTyp: 'av' }), true);
      let r = (await c.getByReqId('appA', 'upd-00001'))!;
      assert.equal(r.sz, 5_000_000_123);
      assert.equal(r.mediaTyp, 'av');
      assert.equal(r.state, 'recording');
      assert.equal(r.endTm, null);

      assert.equal(await c.update('upd-00001', { state: 'failed', endTm, error: 'terminal stopped sending' }), true);
      r = (await c.getByReqId('appA', 'upd-00001'))!;
      assert.equal(r.sz, 5_000_000_123);
      assert.equal(r.state, 'failed');
      assert.deepEqual(r.endTm, endTm);
      assert.equal(r.error, 'terminal stopped sending');

      assert.equal(await c.update('upd-00001', { mediaTyp: null, error: null }), true);
      r = (await c.getByReqId('appA', 'upd-00001'))!;
      assert.equal(r.mediaTyp, null);
      assert.equal(r.error, null);

      assert.equal(await c.update('nope-0001', { sz: 1 }), false);
      assert.equal(await c.update('upd-00001', {}), true);
      await assert.rejects(c.update('upd-00001', { sz: -1 }), TypeError);
      await assert.rejects(c.update('upd-00001', { state: 'paused' as never }), TypeError);
    });

    it('update with ifRecording changes a row only while it is recording (one of two writers closing it does)', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'cas-00001' }));
      const endTm = new Date(T0 + 5 * MIN);
      const [a, b] = await Promise.all([
        c.update('cas-00001', { state: 'done', sz: 100, endTm }, true),
        c.update('cas-00001', { state: 'failed', sz: 7, endTm, error: 'x' }, true),
      ]);
      assert.deepEqual([a, b].sort(), [false, true], 'exactly one of the two closes it');
      const r = (await c.getByReqId('appA', 'cas-00001'))!;
      assert.deepEqual([r.state, r.sz], a ? ['done', 100] : ['failed', 7], 'the row holds what the one that closed it wrote');
      assert.equal(await c.update('cas-00001', { sz: 1 }, true), false, 'a closed row stays as it is');
      assert.equal(await c.update('cas-00001', {}, true), false);
      assert.equal(await c.update('nope-0001', { sz: 1 }, true), false);
      assert.equal(await c.update('cas-00001', { sz: 200 }), true, 'without ifRecording any row');
    });

    it('getByReqId answers only the owning application', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'own-00001', appId: 'appA' }));
      assert.equal((await c.getByReqId('appA', 'own-00001'))!.reqId, 'own-00001');
      assert.equal(await c.getByReqId('appB', 'own-00001'), null);
      assert.equal(await c.getByReqId('appA', 'unknown-1'), null);
    });

    it('queryRange orders by reqTm then reqId and pages with OFFSET without gaps or repeats', async () => {
      const c = await open({ timeZone: 'UTC' });
      // 45 records over 15 minutes, three per minute, so ties on reqTm must be broken by reqId.
      const all: RecordStart[] = [];
      for (let i = 0; i < 45; i++) {
        all.push(start({ reqId: `r${String((i * 7) % 45).padStart(3, '0')}-xyz`, reqTm: new Date(T0 + Math.floor(i / 3) * MIN) }));
      }
      for (const r of shuffled(all)) await c.insertStart(r);
      const expected = [...all]
        .sort((a, b) => a.reqTm.getTime() - b.reqTm.getTime() || (a.reqId < b.reqId ? -1 : a.reqId > b.reqId ? 1 : 0))
        .map((r) => r.reqId);
      const q = { appId: 'appA', start: new Date(T0), end: new Date(T0 + 60 * MIN), limit: 20 };
      const p1 = await c.queryRange({ ...q, page: 1 });
      const p2 = await c.queryRange({ ...q, page: 2 });
      const p3 = await c.queryRange({ ...q, page: 3 });
      const p4 = await c.queryRange({ ...q, page: 4 });
      assert.deepEqual([p1.length, p2.length, p3.length, p4.length], [20, 20, 5, 0]);
      assert.deepEqual([...ids(p1), ...ids(p2), ...ids(p3)], expected);
      // Rows come back complete, not just keys.
      assert.equal(p1[0]!.path, `2024/05/13800001111/${expected[0]}.flv`);
      assert.equal(p1[0]!.appId, 'appA');
      assert.deepEqual(await c.queryRange({ ...q, page: 1, limit: 2000 }).then(ids), expected);
    });

    it('queryRange breaks reqTm ties bytewise on reqId, whatever the database collation', async () => {
      const c = await open();
      const tied = ['a_b-0001', 'Zeta-001', 'alpha-01', 'B-000001', 'a-c-0001', 'a$b~0001'];
      for (const reqId of tied) await c.insertStart(start({ reqId, reqTm: new Date(T0) }));
      const bytewise = [...tied].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      const q = { appId: 'appA', start: new Date(T0), end: new Date(T0), limit: 4 };
      const rows = [...(await c.queryRange({ ...q, page: 1 })), ...(await c.queryRange({ ...q, page: 2 }))];
      assert.deepEqual(ids(rows), bytewise);
    });

    it('queryRange includes both ends of the range and nothing outside', async () => {
      const c = await open();
      const s = T0 + 10 * MIN;
      const e = T0 + 20 * MIN;
      await c.insertStart(start({ reqId: 'before-01', reqTm: new Date(s - 1) }));
      await c.insertStart(start({ reqId: 'atstart-1', reqTm: new Date(s) }));
      await c.insertStart(start({ reqId: 'middle-01', reqTm: new Date(s + 5 * MIN) }));
      await c.insertStart(start({ reqId: 'atend-001', reqTm: new Date(e) }));
      await c.insertStart(start({ reqId: 'after-001', reqTm: new Date(e + 1) }));
      const rows = await c.queryRange({ appId: 'appA', start: new Date(s), end: new Date(e), page: 1, limit: 20 });
      assert.deepEqual(ids(rows), ['atstart-1', 'middle-01', 'atend-001']);
    });

    it('queryRange filters by normalised simNo and keeps paging within the filter', async () => {
      const c = await open();
      for (let i = 0; i < 6; i++) {
        await c.insertStart(start({ reqId: `simA-000${i}`, simNo: '013800001111', reqTm: new Date(T0 + i * MIN) }));
        await c.insertStart(start({ reqId: `simB-000${i}`, simNo: '13900002222', reqTm: new Date(T0 + i * MIN) }));
      }
      const q = { appId: 'appA', start: new Date(T0), end: new Date(T0 + 10 * MIN), limit: 4 };
      // Asked with the 2019 layout's zero padding; stored under the normalised number.
      const p1 = await c.queryRange({ ...q, simNo: '00000000013800001111', page: 1 });
      const p2 = await c.queryRange({ ...q, simNo: '13800001111', page: 2 });
      assert.deepEqual([...ids(p1), ...ids(p2)], ['simA-0000', 'simA-0001', 'simA-0002', 'simA-0003', 'simA-0004', 'simA-0005']);
      assert.ok(p1.every((r) => r.simNo === '13800001111'));
      assert.deepEqual(await c.queryRange({ ...q, simNo: '999', page: 1 }), []);
      assert.equal((await c.queryRange({ ...q, limit: 20, page: 1 })).length, 12);
    });

    it("queryRange never returns another application's records; the appId filter can only narrow", async () => {
      const c = await open();
      for (let i = 0; i < 3; i++) {
        await c.insertStart(start({ reqId: `mine-000${i}`, appId: 'appA', reqTm: new Date(T0 + i * MIN) }));
        await c.insertStart(start({ reqId: `theirs-00${i}`, appId: 'appB', reqTm: new Date(T0 + i * MIN) }));
      }
      const q = { start: new Date(T0), end: new Date(T0 + 10 * MIN), page: 1, limit: 20 };
      assert.deepEqual(ids(await c.queryRange({ ...q, appId: 'appA' })), ['mine-0000', 'mine-0001', 'mine-0002']);
      assert.deepEqual(ids(await c.queryRange({ ...q, appId: 'appA', appIdFilter: 'appA' })), ['mine-0000', 'mine-0001', 'mine-0002']);
      // Naming the other application in the filter must not widen the caller's scope to it.
      assert.deepEqual(await c.queryRange({ ...q, appId: 'appA', appIdFilter: 'appB' }), []);
      assert.deepEqual(await c.queryRange({ ...q, appId: 'appA', appIdFilter: 'appB', simNo: '13800001111' }), []);
      assert.deepEqual(ids(await c.queryRange({ ...q, appId: 'appB' })), ['theirs-000', 'theirs-001', 'theirs-002']);
      assert.deepEqual(await c.queryRange({ ...q, appId: 'appC' }), []);
    });

    it('queryRange can restrict states', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'st-rec-01', reqTm: new Date(T0) }));
      await c.insertStart(start({ reqId: 'st-done-1', reqTm: new Date(T0 + MIN) }));
      await c.insertStart(start({ reqId: 'st-fail-1', reqTm: new Date(T0 + 2 * MIN) }));
      await c.update('st-done-1', { state: 'done' });
      await c.update('st-fail-1', { state: 'failed' });
      const q = { appId: 'appA', start: new Date(T0), end: new Date(T0 + 10 * MIN), page: 1, limit: 20 };
      assert.deepEqual(ids(await c.queryRange(q)), ['st-rec-01', 'st-done-1', 'st-fail-1']);
      assert.deepEqual(ids(await c.queryRange({ ...q, states: ['done', 'recording'] })), ['st-rec-01', 'st-done-1']);
      assert.deepEqual(ids(await c.queryRange({ ...q, states: ['failed'] })), ['st-fail-1']);
      assert.deepEqual(await c.queryRange({ ...q, states: [] }), []);
    });

    it('queryRange rejects a page below 1 or a limit below 1', async () => {
      const c = await open();
      const q = { appId: 'appA', start: new Date(T0), end: new Date(T0 + MIN) };
      await assert.rejects(c.queryRange({ ...q, page: 0, limit: 20 }), RangeError);
      await assert.rejects(c.queryRange({ ...q, page: 1, limit: 0 }), RangeError);
      await assert.rejects(c.queryRange({ ...q, page: 1.5, limit: 20 }), RangeError);
    });

    it('keeps its rows across close and reopen (a gateway restart)', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'keep-0001', reqTm: new Date(T0) }));
      await c.insertStart(start({ reqId: 'keep-0002', reqTm: new Date(T0 + MIN) }));
      await c.update('keep-0001', { state: 'done', sz: 1234, endTm: new Date(T0 + 2 * MIN) });
      const before = await c.queryRange({ appId: 'appA', start: new Date(T0), end: new Date(T0 + 10 * MIN), page: 1, limit: 20 });
      await c.close();
      await assert.rejects(c.getByReqId('appA', 'keep-0001'), /closed/);

      const again = await open();
      const after = await again.queryRange({ appId: 'appA', start: new Date(T0), end: new Date(T0 + 10 * MIN), page: 1, limit: 20 });
      assert.deepEqual(after, before);
      assert.equal(after[0]!.sz, 1234);
      assert.deepEqual(ids(await again.listUnfinished()), ['keep-0002']);
    });

    it('listUnfinished lists only recordings in progress, oldest first, from every application', async () => {
      const c = await open();
      await c.insertStart(start({ reqId: 'unf-late1', reqTm: new Date(T0 + 2 * MIN) }));
      await c.insertStart(start({ reqId: 'unf-done1', reqTm: new Date(T0) }));
      await c.insertStart(start({ reqId: 'unf-early', appId: 'appB', reqTm: new Date(T0 + MIN) }));
      await c.insertStart(start({ reqId: 'unf-fail1', reqTm: new Date(T0) }));
      await c.update('unf-done1', { state: 'done' });
      await c.update('unf-fail1', { state: 'failed' });
      assert.deepEqual(ids(await c.listUnfinished()), ['unf-early', 'unf-late1']);
    });

    it('retention helpers: oldest skips recordings in progress, totalBytes counts everything, delete removes', async () => {
      const c = await open();
      const sizes = [100, 200, 300, 400];
      for (let i = 0; i < 4; i++) {
        await c.insertStart(start({ reqId: `ret-000${i}`, appId: i % 2 ? 'appB' : 'appA', reqTm: new Date(T0 + i * MIN) }));
      }
      // ret-0000 is still recording; the others finished.
      await c.update('ret-0000', { sz: sizes[0] });
      for (let i = 1; i < 4; i++) await c.update(`ret-000${i}`, { sz: sizes[i], state: i === 2 ? 'failed' : 'done' });
      assert.equal(await c.totalBytes(), 1000);
      assert.deepEqual(ids(await c.oldest(2)), ['ret-0001', 'ret-0002']);
      assert.deepEqual(ids(await c.oldest(10)), ['ret-0001', 'ret-0002', 'ret-0003']);
      assert.deepEqual(await c.oldest(0), []);
      assert.equal(await c.delete(['ret-0001', 'ret-0003', 'missing-1']), 2);
      assert.equal(await c.delete([]), 0);
      assert.equal(await c.totalBytes(), 400);
      assert.deepEqual(ids(await c.oldest(10)), ['ret-0002']);
      assert.equal(await c.getByReqId('appB', 'ret-0001'), null);
    });

    it("one node's rows: listUnfinished with its own and unnamed rows, oldest and totalBytes with its own only; listUnnamed pages; claim names only unnamed rows", async () => {
      const c = await open();
      const NB = 'http://node-b.example:7080';
      const NC = 'http://node-c.example:7080';
      const rows: Array<[string, string | undefined, number, 'recording' | 'done' | 'failed']> = [
        ['own-b0001', NB, 100, 'done'],
        ['own-c0001', NC, 200, 'done'],
        ['none-0001', undefined, 400, 'done'],
        ['own-b0002', NB, 800, 'failed'],
        ['own-c0002', NC, 1600, 'recording'],
        ['none-0002', undefined, 3200, 'recording'],
        ['own-b0003', NB, 6400, 'recording'],
      ];
      for (const [i, [reqId, apiBase, sz, state]] of rows.entries()) {
        await c.insertStart(start({ reqId, reqTm: new Date(T0 + i * MIN), ...(apiBase ? { apiBase } : {}) }));
        await c.update(reqId, { sz, state });
      }
      assert.deepEqual(ids(await c.listUnfinished({ apiBase: NB })), ['none-0002', 'own-b0003']);
      assert.deepEqual(ids(await c.listUnfinished({ apiBase: `${NC}/` })), ['own-c0002', 'none-0002'], 'a trailing slash is dropped');
      assert.deepEqual(ids(await c.listUnfinished()), ['own-c0002', 'none-0002', 'own-b0003']);
      assert.deepEqual(ids(await c.oldest(10, { apiBase: NB })), ['own-b0001', 'own-b0002']);
      assert.deepEqual(ids(await c.oldest(1, { apiBase: NC })), ['own-c0001']);
      assert.deepEqual(ids(await c.oldest(10, { apiBase: 'http://elsewhere' })), []);
      assert.deepEqual(ids(await c.oldest(10)), ['own-b0001', 'own-c0001', 'none-0001', 'own-b0002']);
      assert.equal(await c.totalBytes({ apiBase: NB }), 100 + 800 + 6400);
      assert.equal(await c.totalBytes({ apiBase: NC }), 200 + 1600);
      assert.equal(await c.totalBytes(), 12700);

      assert.deepEqual(ids(await c.listUnnamed(null, 10)), ['none-0001', 'none-0002']);
      assert.deepEqual(ids(await c.listUnnamed(null, 1)), ['none-0001']);
      assert.deepEqual(ids(await c.listUnnamed('none-0001', 1)), ['none-0002']);
      assert.deepEqual(ids(await c.listUnnamed('none-0002', 10)), []);
      assert.equal(await c.claim(['none-0001', 'own-c0001', 'missing-1'], `${NB}/`), 1, 'a row naming a node keeps it');
      assert.equal(await c.claim([], NB), 0);
      await assert.rejects(c.claim(['none-0002'], 'http://a b'), TypeError);
      assert.equal((await c.getByReqId('appA', 'none-0001'))!.apiBase, NB);
      assert.equal((await c.getByReqId('appA', 'own-c0001'))!.apiBase, NC);
      assert.equal(await c.claim(['none-0001'], NC), 0, 'claimed already');
      assert.deepEqual(ids(await c.oldest(10, { apiBase: NB })), ['own-b0001', 'none-0001', 'own-b0002']);
      assert.equal(await c.totalBytes({ apiBase: NB }), 100 + 400 + 800 + 6400);
      assert.deepEqual(ids(await c.listUnnamed(null, 10)), ['none-0002']);
    });

    it('delete handles more ids than one statement can bind', async () => {
      const c = await open();
      const n = 1200;
      for (let i = 0; i < n; i++) await c.insertStart(start({ reqId: `bulk-${String(i).padStart(5, '0')}`, reqTm: new Date(T0 + i) }));
      const all = Array.from({ length: n }, (_, i) => `bulk-${String(i).padStart(5, '0')}`);
      assert.equal(await c.delete(all.slice(0, 1100)), 1100);
      const left = await c.queryRange({ appId: 'appA', start: new Date(T0), end: new Date(T0 + n), page: 1, limit: 2000 });
      assert.deepEqual(ids(left), all.slice(1100));
    });
  });
}
