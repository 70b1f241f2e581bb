import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlvMuxer, type FlvTag } from '../../../plugin-sdk/formats';
import { parseFlv } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import { FlvFileWriter } from '../src/flv-file-writer';
import { unitAt } from './fixtures/h264-clip';
import { testClip } from './harness';
import { probeVideo } from './helpers';
import { mountSmallFs, type SmallFs } from './small-fs';

/** FLV tags of the first `n` frames of the test clip, one array per frame. */
function clipTags(n: number): FlvTag[][] {
  const clip = testClip();
  const mux = new FlvMuxer();
  mux.setTrack(clip.track);
  return Array.from({ length: n }, (_, i) => mux.push(unitAt(clip, i)));
}

describe('FLV file writer', () => {
  let dir = '';
  beforeEach(() => {
    dir = scratchDir('recorder-writer');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('creates its folders, appends whole tags in order, and the closed file decodes', async () => {
    const file = path.join(dir, 'a', 'b', 'rec.flv');
    let drained: () => void = () => undefined;
    const errors: Error[] = [];
    const w = await FlvFileWriter.create(file, { onError: (e) => errors.push(e), onDrain: () => drained() });
    w.header(true, false);
    const tags = clipTags(50);
    for (const t of tags) w.writeTags(t);
    assert.ok(w.pendingBytes > 0, 'writes are queued, not synchronous');
    await new Promise<void>((resolve) => {
      drained = resolve;
    });
    assert.equal(w.pendingBytes, 0, 'drained: everything is on disk');
    assert.equal(w.size, fs.statSync(file).size);
    const size = await w.close();
    assert.deepEqual(errors, []);
    assert.equal(size, fs.statSync(file).size);
    const flv = parseFlv(fs.readFileSync(file));
    assert.deepEqual(
      flv.tags.map((t) => t.timestamp),
      tags.flat().map((t) => t.timestamp),
    );
    assert.equal(probeVideo(file).frames, 50);
  });

  it('never overwrites an existing file', async () => {
    const file = path.join(dir, 'taken.flv');
    fs.writeFileSync(file, 'keep me');
    await assert.rejects(FlvFileWriter.create(file, { onError: () => undefined }), { code: 'EEXIST' });
    assert.equal(fs.readFileSync(file, 'utf8'), 'keep me');
  });

  it('fails once with EBACKLOG when more than maxPendingBytes wait for the disk, keeping whole tags only', async () => {
    const file = path.join(dir, 'slow.flv');
    const errors: NodeJS.ErrnoException[] = [];
    let drained: () => void = () => undefined;
    const w = await FlvFileWriter.create(file, { maxPendingBytes: 16 * 1024, onError: (e) => errors.push(e), onDrain: () => drained() });
    const tags = clipTags(100);
    w.header(true, false);
    for (const t of tags.slice(0, 10)) w.writeTags(t);
    await new Promise<void>((resolve) => {
      drained = resolve;
    });
    // now faster than any disk: everything at once
    for (const t of tags.slice(10)) w.writeTags(t);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.code, 'EBACKLOG');
    assert.equal(w.error, errors[0]);
    const size = await w.close();
    assert.equal(size, fs.statSync(file).size);
    const flv = parseFlv(fs.readFileSync(file));
    assert.equal(flv.trailing, 0);
    const kept = flv.tags.filter((t) => t.type === 9 && !t.sequenceHeader).length;
    assert.ok(kept >= 10 && kept < 100, `${kept} frames kept`);
    w.writeTags(tags[99]!);
    assert.equal(fs.statSync(file).size, size, 'nothing is written after the failure');
  });

  describe('on a disk that fills (a real small file system)', () => {
    let small: SmallFs;
    beforeEach(() => {
      small = mountSmallFs(path.join(dir, 'disk'), 1024 * 1024);
    });
    afterEach(() => small.unmount());

    /** every tag of 300 frames of the clip (about 120 KB), all at once: one write of many tags */
    const frames = (): FlvTag[] => clipTags(300).flat();

    it('waits for room when the disk is full, then goes on from where it stopped: the file is whole', async () => {
      small.fill(16 * 1024);
      const calls: string[] = [];
      const errors: Error[] = [];
      const w = await FlvFileWriter.create(path.join(small.dir, 'rec.flv'), {
        onError: (e) => errors.push(e),
        onNoSpace: async (err) => {
          calls.push(String(err.code));
          small.unfill();
          return true;
        },
      });
      w.header(true, false);
      const tags = frames();
      w.writeTags(tags);
      const size = await w.close();
      assert.deepEqual(calls, ['ENOSPC'], 'asked once for room');
      assert.deepEqual(errors, []);
      const flv = parseFlv(fs.readFileSync(w.file));
      assert.equal(flv.tags.length, tags.length, 'every tag, once');
      assert.equal(size, fs.statSync(w.file).size);
    });

    it('without room, fails with ENOSPC and cuts the file back to the last whole tag that fitted, inside one write', async () => {
      small.fill(16 * 1024);
      const errors: NodeJS.ErrnoException[] = [];
      let asked = 0;
      const w = await FlvFileWriter.create(path.join(small.dir, 'rec.flv'), {
        onError: (e) => errors.push(e),
        onNoSpace: async () => {
          asked++;
          return false;
        },
      });
      w.header(true, false);
      const tags = frames();
      w.writeTags(tags);
      const size = await w.close();
      assert.equal(asked, 1);
      assert.deepEqual(
        errors.map((e) => e.code),
        ['ENOSPC'],
      );
      const flv = parseFlv(fs.readFileSync(w.file));
      assert.equal(flv.trailing, 0);
      assert.equal(size, fs.statSync(w.file).size);
      assert.ok(flv.tags.length > 0 && flv.tags.length < tags.length, `${flv.tags.length} of ${tags.length} tags kept`);
    });
  });
});
