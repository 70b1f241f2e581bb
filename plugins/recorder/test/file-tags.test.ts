/**
 * A recording's file bytes from the stream's shared FLV form (file-tags.ts): the file's time starts at 0 at its
 * first media tag, the configuration goes in at a start point, and after a skip only when it is not the one last
 * written; the forms themselves are never changed (other readers share them).
 */
import assert from 'node:assert/strict';
import { shiftUnit, type AccessUnit } from '../../../plugin-sdk';
import { testClip } from '../../../plugin-sdk/testkit';
import { FlvFormEncoder, WireForm, type FlvForm } from '../../../plugin-sdk/formats';
import { FileTags } from '../src/file-tags';

/** the tags of FLV bytes (no file header): type, timestamp, whether a sequence header */
function tagsOf(b: Buffer): Array<{ type: number; ts: number; seq: boolean }> {
  const out: Array<{ type: number; ts: number; seq: boolean }> = [];
  for (let at = 0; at + 11 <= b.length;) {
    const size = b.readUIntBE(at + 1, 3);
    out.push({ type: b[at], ts: b.readUIntBE(at + 4, 3) | (b[at + 7] << 24), seq: b[at] === 9 && b[at + 12] === 0 });
    at += 11 + size + 4;
  }
  return out;
}

describe('recorder file tags from the shared FLV form', function () {
  this.timeout(30_000);
  const clip = testClip({ seconds: 2 });
  /** the clip's units on a stream whose time is at 5 s, as an FLV format's encoder frames them */
  function forms(): { units: AccessUnit[]; forms: Array<FlvForm | undefined> } {
    const enc = new FlvFormEncoder<FlvForm>(
      { name: 's', tracks: [], wallClock: () => undefined },
      { audioCodecs: ['aac', 'g711a', 'g711u'] },
      {},
      (w, v, init) => new WireForm(w, v, init),
    );
    enc.tracks(clip.tracks);
    const units = clip.units.map((u) => shiftUnit(u, 5000));
    return { units, forms: units.map((u) => enc.encode(u)) };
  }

  it("starts the file at 0 with the configuration, then the units' own tags; the shared forms keep the stream's time", () => {
    const { units, forms: f } = forms();
    const t = new FileTags();
    const first = t.bytesOf(units[0], f[0])!;
    const tags = tagsOf(first);
    assert.deepEqual(
      tags.map((x) => [x.type, x.ts, x.seq]),
      [
        [18, 0, false],
        [9, 0, true],
        [9, 0, false],
      ],
      'onMetaData, sequence header, the key frame',
    );
    assert.deepEqual(t.headerFlags, { video: true, audio: false });
    const second = tagsOf(t.bytesOf(units[1], f[1])!);
    assert.deepEqual(
      second.map((x) => [x.type, x.ts]),
      [[9, 40]],
    );
    // the form itself still says 5 s: another reader gets it as the stream has it
    const again = Buffer.allocUnsafe(f[1]!.mediaBytes);
    f[1]!.copyMedia(again, 0);
    assert.equal(tagsOf(again)[0].ts, 5040);
    assert.equal(t.wroteVideo, true);
    assert.equal(t.wroteAudio, false);
  });

  it('after a skip: waits for a start point, and writes the configuration again only when it changed', () => {
    const { units, forms: f } = forms();
    const t = new FileTags();
    for (let i = 0; i < 10; i++) t.bytesOf(units[i], f[i]);
    t.skipped();
    assert.equal(t.bytesOf(units[12], f[12]), undefined, 'not a start point');
    const key = units.findIndex((u, i) => i > 12 && u.keyframe);
    const resumed = tagsOf(t.bytesOf(units[key], f[key])!);
    assert.deepEqual(
      resumed.map((x) => x.type),
      [9],
      'the same configuration: only the key frame',
    );
    assert.equal(resumed[0].ts, units[key].dts - 5000);
    // a reader whose last form had another configuration version gets the start point's configuration
    const other = new FileTags();
    other.bytesOf(units[0], f[0]);
    other.skipped();
    const changed = { ...f[key]!, version: f[key]!.version + 1, copyMedia: f[key]!.copyMedia.bind(f[key]), copyConfig: f[key]!.copyConfig.bind(f[key]) };
    assert.deepEqual(
      tagsOf(other.bytesOf(units[key], changed)!).map((x) => [x.type, x.seq]),
      [
        [18, false],
        [9, true],
        [9, false],
      ],
    );
  });
});
