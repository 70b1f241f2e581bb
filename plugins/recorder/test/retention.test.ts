import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scratchDir } from '../../../test/support/paths';
import type { RecordState } from '../src/catalog';
import { openSqliteCatalog, type SqliteRecordCatalog } from '../src/catalog-sqlite';
import { applyRetention } from '../src/retention';

const NOW = new Date('2024-06-30T00:00:00Z');
const DAY = 86_400_000;

describe('stored media retention', () => {
  let dir = '';
  let store = '';
  let catalog: SqliteRecordCatalog;

  beforeEach(() => {
    dir = scratchDir('recorder-retention');
    store = path.join(dir, 'store');
    catalog = openSqliteCatalog({ dir: path.join(dir, 'db'), timeZone: 'UTC' });
  });
  afterEach(async () => {
    await catalog.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A record with a real file of sz bytes, ageDays before NOW. */
  async function add(reqId: string, ageDays: number, sz: number, state: RecordState = 'done', appId = 'appA'): Promise<string> {
    const r = await catalog.insertStart({ reqId, appId, simNo: '13800001111', chan: 1, live: true, reqTm: new Date(NOW.getTime() - ageDays * DAY) });
    const file = path.join(store, r.path);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, Buffer.alloc(sz, 0x46));
    await catalog.update(reqId, { sz, state });
    return file;
  }
  const remaining = async (): Promise<string[]> =>
    (await catalog.queryRange({ appId: 'appA', start: new Date(0), end: NOW, page: 1, limit: 2000 })).map((r) => r.reqId);

  it('removes records older than maxAgeDays, file and row together, but not a recording in progress', async () => {
    const f1 = await add('old-00001', 40, 10);
    const f2 = await add('old-00002', 31, 10, 'failed');
    const fRec = await add('old-recng', 50, 10, 'recording');
    const f3 = await add('new-00001', 29, 10);
    const res = await applyRetention(catalog, store, { maxAgeDays: 30 }, { now: NOW });
    assert.deepEqual(
      res.removed.map((r) => r.reqId),
      ['old-00001', 'old-00002'],
    );
    assert.equal(res.freedBytes, 20);
    assert.equal(res.error, undefined);
    assert.equal(fs.existsSync(f1), false);
    assert.equal(fs.existsSync(f2), false);
    assert.equal(fs.existsSync(fRec), true);
    assert.equal(fs.existsSync(f3), true);
    assert.deepEqual(await remaining(), ['old-recng', 'new-00001']);
  });

  it('removes the oldest first until the total is within maxTotalBytes, across applications', async () => {
    const files = [
      await add('sz-000001', 10, 100),
      await add('sz-000002', 9, 200, 'done', 'appB'),
      await add('sz-000003', 8, 300),
      await add('sz-000004', 7, 400),
    ];
    const res = await applyRetention(catalog, store, { maxTotalBytes: 600 }, { now: NOW, batchSize: 1 });
    // 1000 -> 900 -> 700 -> 400: three removed, in age order.
    assert.deepEqual(
      res.removed.map((r) => r.reqId),
      ['sz-000001', 'sz-000002', 'sz-000003'],
    );
    assert.equal(res.freedBytes, 600);
    assert.deepEqual(
      files.map((f) => fs.existsSync(f)),
      [false, false, false, true],
    );
    assert.equal(await catalog.totalBytes(), 400);
  });

  it('counts a recording in progress toward the total but never removes it', async () => {
    const fRec = await add('rec-00001', 10, 5000, 'recording');
    const fDone = await add('done-0001', 5, 100);
    const res = await applyRetention(catalog, store, { maxTotalBytes: 1000 }, { now: NOW });
    assert.deepEqual(
      res.removed.map((r) => r.reqId),
      ['done-0001'],
    );
    assert.equal(fs.existsSync(fRec), true);
    assert.equal(fs.existsSync(fDone), false);
    assert.deepEqual(await remaining(), ['rec-00001']);
  });

  it('applies both limits together, in batches', async () => {
    for (let i = 0; i < 7; i++) await add(`both-000${i}`, 20 - i, 100); // ages 20..14 days
    // Age removes ages 20..16 (5 records), leaving 200 bytes; the size limit of 150 then takes one more.
    const res = await applyRetention(catalog, store, { maxAgeDays: 15.5, maxTotalBytes: 150 }, { now: NOW, batchSize: 2 });
    assert.deepEqual(
      res.removed.map((r) => r.reqId),
      ['both-0000', 'both-0001', 'both-0002', 'both-0003', 'both-0004', 'both-0005'],
    );
    assert.deepEqual(await remaining(), ['both-0006']);
  });

  it('removes the row of a file that is already gone', async () => {
    const f = await add('gone-0001', 40, 10);
    fs.unlinkSync(f);
    const res = await applyRetention(catalog, store, { maxAgeDays: 30 }, { now: NOW });
    assert.deepEqual(
      res.removed.map((r) => r.reqId),
      ['gone-0001'],
    );
    assert.deepEqual(await remaining(), []);
  });

  it('stops at a file it cannot remove, keeping its row, and reports it', async () => {
    const f1 = await add('stuck-001', 40, 10);
    await add('later-001', 39, 10);
    // A directory where the file should be cannot be unlinked (EISDIR/EPERM), even as root.
    fs.unlinkSync(f1);
    fs.mkdirSync(f1);
    fs.writeFileSync(path.join(f1, 'keep'), 'x');
    const res = await applyRetention(catalog, store, { maxAgeDays: 30 }, { now: NOW });
    assert.deepEqual(res.removed, []);
    assert.equal(res.error?.reqId, 'stuck-001');
    assert.deepEqual(await remaining(), ['stuck-001', 'later-001']);
  });

  it('counts bytes on disk the catalog does not show yet (a recording whose size update is due) toward maxTotalBytes', async () => {
    await add('un-000001', 10, 100);
    await add('un-000002', 9, 100);
    await add('un-recng1', 1, 0, 'recording');
    assert.deepEqual((await applyRetention(catalog, store, { maxTotalBytes: 200 }, { now: NOW })).removed, []);
    const res = await applyRetention(catalog, store, { maxTotalBytes: 200 }, { now: NOW, uncataloguedBytes: 50 });
    assert.deepEqual(
      res.removed.map((r) => r.reqId),
      ['un-000001'],
    );
    assert.equal(res.freedBytes, 100);
  });

  it('reports the bytes of files it removed when their rows could not be deleted; the next pass clears the rows', async () => {
    const f1 = await add('rows-00001', 10, 100);
    const del = catalog.delete.bind(catalog);
    catalog.delete = async () => {
      throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    };
    const res = await applyRetention(catalog, store, { maxTotalBytes: 50 }, { now: NOW });
    assert.deepEqual([res.removed, res.freedBytes, res.unlinkedBytes, res.error?.reqId], [[], 0, 100, 'rows-00001']);
    assert.equal(fs.existsSync(f1), false, 'the space is free');
    catalog.delete = del;
    const again = await applyRetention(catalog, store, { maxTotalBytes: 50 }, { now: NOW });
    assert.deepEqual(
      again.removed.map((r) => r.reqId),
      ['rows-00001'],
    );
    assert.deepEqual(await remaining(), []);
  });

  it('does nothing without a policy and rejects a nonsensical one', async () => {
    const f = await add('keep-0001', 4000, 10);
    assert.deepEqual(await applyRetention(catalog, store, {}, { now: NOW }), { removed: [], freedBytes: 0 });
    assert.equal(fs.existsSync(f), true);
    await assert.rejects(applyRetention(catalog, store, { maxAgeDays: 0 }), RangeError);
    await assert.rejects(applyRetention(catalog, store, { maxTotalBytes: -1 }), RangeError);
  });
});
