import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { scratchDir } from '../../../test/support/paths';
import { openSqliteCatalog, type SqliteRecordCatalog } from '../src/catalog-sqlite';
import { parseRecordQuery, type RecordQuery } from '../src/query-params';
import { findRecords } from '../src/record-query';

describe('running a parsed record query for the caller', () => {
  let dir = '';
  let c: SqliteRecordCatalog;
  const T0 = Date.parse('2024-06-10T00:00:00Z');
  const parse = (params: Record<string, string>): RecordQuery => {
    const r = parseRecordQuery(params, { now: new Date('2024-06-15T00:00:00Z'), timeZone: 'UTC' });
    assert.ok(r.ok);
    return r.query;
  };
  const ids = async (appId: string, params: Record<string, string>, states?: ('recording' | 'done' | 'failed')[]): Promise<string[]> =>
    (await findRecords(c, appId, parse(params), states ? { states } : {})).map((r) => r.reqId);

  before(async () => {
    dir = scratchDir('recorder-query');
    c = openSqliteCatalog({ dir, timeZone: 'UTC' });
    await c.insertStart({ reqId: 'mine-0001', appId: 'appA', simNo: '013800001111', chan: 1, live: true, reqTm: new Date(T0) });
    await c.insertStart({ reqId: 'mine-0002', appId: 'appA', simNo: '13900002222', chan: 1, live: true, reqTm: new Date(T0 + 1000) });
    await c.insertStart({ reqId: 'theirs-01', appId: 'appB', simNo: '13800001111', chan: 1, live: true, reqTm: new Date(T0) });
    await c.update('mine-0001', { state: 'done' });
  });
  after(async () => {
    await c.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('by reqId: own record, nothing for a foreign or unknown one', async () => {
    assert.deepEqual(await ids('appA', { reqId: 'mine-0001' }), ['mine-0001']);
    assert.deepEqual(await ids('appA', { reqId: 'theirs-01' }), []);
    assert.deepEqual(await ids('appA', { reqId: 'unknown-1' }), []);
  });

  it('by reqId: the appId filter narrows, and only page 1 can hold the record', async () => {
    assert.deepEqual(await ids('appA', { reqId: 'mine-0001', appId: 'appA' }), ['mine-0001']);
    assert.deepEqual(await ids('appA', { reqId: 'mine-0001', appId: 'appB' }), []);
    assert.deepEqual(await ids('appA', { reqId: 'mine-0001', __page: '2' }), []);
    assert.deepEqual(await ids('appA', { reqId: 'mine-0002' }, ['done']), []);
  });

  it("by range: filters pass through; another application's records stay invisible", async () => {
    assert.deepEqual(await ids('appA', { startTm: '2024-06-10 00:00:00', endTm: '2024-06-10 00:00:01' }), ['mine-0001', 'mine-0002']);
    assert.deepEqual(await ids('appA', { startTm: '2024-06-10 00:00:00', endTm: '2024-06-10 00:00:00' }), ['mine-0001']);
    assert.deepEqual(await ids('appA', { startTm: '2024-06-10 00:00:00', simNo: '13800001111' }), ['mine-0001']);
    assert.deepEqual(await ids('appA', { startTm: '2024-06-10 00:00:00', appId: 'appB' }), []);
    assert.deepEqual(await ids('appA', { startTm: '2024-06-10 00:00:00', __limit: '1', __page: '2' }), ['mine-0002']);
    assert.deepEqual(await ids('appA', { startTm: '2024-06-10 00:00:00' }, ['done']), ['mine-0001']);
    assert.deepEqual(await ids('appB', { startTm: '2024-06-10 00:00:00' }), ['theirs-01']);
  });
});
