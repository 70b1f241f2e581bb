import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlvMuxer, flvFileHeader, serializeTag } from '../../../plugin-sdk/formats';
import { parseFlv } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import { openSqliteCatalog, type SqliteRecordCatalog } from '../src/catalog-sqlite';
import { flvExtent } from '../src/flv-tail';
import { recoverUnfinished } from '../src/recovery';
import { unitAt } from './fixtures/h264-clip';
import { fixtureFrames } from '../../../test/support/fixture-clip';

/** A real FLV recording of `frames` frames of the test clip. */
function flvBytes(frames: number): Buffer {
  const clip = fixtureFrames({ seconds: 4, fps: 25 });
  const mux = new FlvMuxer();
  mux.setTrack(clip.track);
  const parts = [flvFileHeader(true, false)];
  for (let i = 0; i < frames; i++) for (const t of mux.push(unitAt(clip, i))) parts.push(Buffer.from(serializeTag(t)));
  return Buffer.concat(parts);
}

describe('recovery of recordings left unfinished', () => {
  let dir = '';
  let store = '';
  let catalog: SqliteRecordCatalog;
  const NOW = new Date();
  const opts = { now: NOW, quietMs: 0, isActive: () => false };

  beforeEach(() => {
    dir = scratchDir('recorder-recovery');
    store = path.join(dir, 'store');
    catalog = openSqliteCatalog({ dir: path.join(dir, 'db'), timeZone: 'UTC' });
  });
  afterEach(async () => {
    await catalog.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function unfinished(reqId: string, content?: Buffer, mtime?: Date): Promise<string> {
    const r = await catalog.insertStart({ reqId, appId: 'a', simNo: '13800001111', chan: 1, live: true, reqTm: new Date(NOW.getTime() - 60_000) });
    const file = path.join(store, ...r.path.split('/'));
    if (content) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, content);
      if (mtime) fs.utimesSync(file, mtime, mtime);
    }
    return file;
  }
  const row = async (reqId: string) => (await catalog.getByReqId('a', reqId))!;

  it('flvExtent: a file ending on a tag is whole; a torn tail ends where the last whole tag does', async () => {
    const whole = flvBytes(30);
    const f = path.join(dir, 'x.flv');
    fs.writeFileSync(f, whole);
    assert.deepEqual(await flvExtent(f), { size: whole.length, length: whole.length, hasVideo: true, hasAudio: false, flv: true });
    for (const cut of [1, 7, 11, 200]) {
      fs.writeFileSync(f, whole.subarray(0, whole.length - cut));
      const lastWhole = parseFlv(whole.subarray(0, whole.length - cut), { allowTruncated: true });
      const e = await flvExtent(f);
      assert.equal(e.length, whole.length - cut - lastWhole.trailing, `cut ${cut}`);
      assert.ok(e.length < e.size);
    }
    fs.writeFileSync(f, whole.subarray(0, 13));
    assert.equal((await flvExtent(f)).length, 13, 'header only');
    fs.writeFileSync(f, 'not a video');
    assert.equal((await flvExtent(f)).flv, false);
  });

  it('closes rows as done with the file size and mtime; cuts a torn last tag; non-FLV files fail; rows without a file go', async () => {
    const mtime = new Date(Math.floor(NOW.getTime() / 1000) * 1000 - 30_000);
    const good = flvBytes(30);
    const fGood = await unfinished('whole-0001', good, mtime);
    // the last tag again, cut 20 bytes short: a write torn by the kill
    const lastTag = good.subarray(parseFlv(good).tags.at(-1)!.offset);
    const tornBytes = lastTag.length - 20;
    const torn = Buffer.concat([good, lastTag.subarray(0, tornBytes)]);
    const fTorn = await unfinished('torn-00001', torn, mtime);
    await unfinished('missing-01');
    await unfinished('garbage-01', Buffer.from('this is not FLV at all'), mtime);

    const res = await recoverUnfinished(catalog, store, opts);
    assert.deepEqual(res.errors, []);
    assert.deepEqual(res.recovered.map((r) => [r.reqId, r.state, r.truncated]).sort(), [
      ['garbage-01', 'failed', 0],
      ['missing-01', 'removed', 0],
      ['torn-00001', 'done', tornBytes],
      ['whole-0001', 'done', 0],
    ]);

    const g = await row('whole-0001');
    assert.deepEqual([g.state, g.sz, g.endTm!.getTime(), g.mediaTyp], ['done', good.length, mtime.getTime(), 'v']);
    const t = await row('torn-00001');
    assert.deepEqual([t.state, t.sz, t.endTm!.getTime()], ['done', good.length, mtime.getTime()]);
    assert.ok(fs.readFileSync(fTorn).equals(good), 'the torn tail is cut off');
    assert.equal(fs.statSync(fTorn).mtime.getTime(), mtime.getTime(), 'cutting keeps the end time');
    assert.ok(fs.readFileSync(fGood).equals(good), 'a whole file is not touched');
    assert.ok(!(await catalog.getByReqId('a', 'missing-01')), 'a record with no file is not listed with a dead url');
    assert.equal((await row('garbage-01')).state, 'failed');
    assert.deepEqual(await catalog.listUnfinished(), []);
  });

  it('two passes at once (two writers of one catalog) close each orphan once: one of them reports it', async () => {
    const mtime = new Date(Math.floor(NOW.getTime() / 1000) * 1000 - 30_000);
    const good = flvBytes(30);
    const lastTag = good.subarray(parseFlv(good).tags.at(-1)!.offset);
    const fTorn = await unfinished('torn-00002', Buffer.concat([good, lastTag.subarray(0, 9)]), mtime);
    await unfinished('whole-0002', good, mtime);
    await unfinished('missing-02');
    await unfinished('garbage-02', Buffer.from('not FLV'), mtime);
    const [a, b] = await Promise.all([recoverUnfinished(catalog, store, opts), recoverUnfinished(catalog, store, opts)]);
    assert.deepEqual([...a.errors, ...b.errors], []);
    assert.deepEqual([...a.recovered, ...b.recovered].map((r) => r.reqId).sort(), ['garbage-02', 'missing-02', 'torn-00002', 'whole-0002']);
    assert.equal(a.skipped + b.skipped, 4, 'the other pass found each closed already');
    assert.ok(fs.readFileSync(fTorn).equals(good), 'the torn tail is cut off, once');
    assert.deepEqual(await catalog.listUnfinished(), []);
  });

  it('leaves rows alone that are being recorded here, or whose file changed within quietMs', async () => {
    await unfinished('active-001', flvBytes(5));
    await unfinished('fresh-0001', flvBytes(5));
    const old = new Date(Date.now() - 3_600_000);
    await unfinished('quiet-0001', flvBytes(5), old);
    await unfinished('no-file-01'); // opened a minute ago, maybe by another gateway on the same catalog: no file yet
    // NOW, the clock the rows' reqTm was set by (captured when the file loaded: a long suite reaches this test minutes later)
    const res = await recoverUnfinished(catalog, store, { now: NOW, quietMs: 300_000, isActive: (id) => id === 'active-001' });
    assert.deepEqual(
      res.recovered.map((r) => r.reqId),
      ['quiet-0001'],
    );
    assert.equal(res.skipped, 2);
    assert.deepEqual((await catalog.listUnfinished()).map((r) => r.reqId).sort(), ['active-001', 'fresh-0001', 'no-file-01']);
  });
});
