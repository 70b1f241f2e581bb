import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlvMuxer, type FlvTag } from '../../../plugin-sdk/formats/flv';
import { parseFlv } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import { FlvFileWriter } from '../src/flv-file-writer';
import { unitAt } from './fixtures/h264-clip';
import { testClip } from './harness';
import { probeVideo } from './helpers';

/** FLV tags of the first `n` frames of the test clip, one array per frame. */
function clipTags(n: number): FlvTag[][] {
  const clip = testClip();
  const mux = new FlvMuxer();
  mux.setTrack(clip.track);
  return Array.from({ length: n }, (_, i) => mux.push(unitAt(clip, i)));
}

describe('FLV file writer', () => {
  let dir = '';
  beforeEach(() => { dir = scratchDir('recorder-writer'); });
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
    await new Promise<void>((resolve) => { drained = resolve; });
    assert.equal(w.pendingBytes, 0, 'drained: everything is on disk');
    assert.equal(w.size, fs.statSync(file).size);
    const size = await w.close();
    assert.deepEqual(errors, []);
    assert.equal(size, fs.statSync(file).size);
    const flv = parseFlv(fs.readFileSync(file));
    assert.deepEqual(flv.tags.map((t) => t.timestamp), tags.flat().map((t) => t.timestamp));
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
    await new Promise<void>((resolve) => { drained = resolve; });
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
});
