import assert from 'node:assert/strict';
import { keptAlloc, keptCopy } from '../kept-bytes';
import { FlvMuxer } from '../formats/flv';
import { videoUnit } from '../media';

/** whether b is a slice of a larger ArrayBuffer (Node's 8 KiB pool, say) rather than memory of its own */
function carved(b: Buffer): boolean {
  return b.buffer.byteLength > b.length;
}

describe("kept bytes: what a stream keeps for its life has memory of its own, not a slab of Node's pool", () => {
  it('keptCopy gives the same bytes in an ArrayBuffer of their size, apart from the source', () => {
    const src = Buffer.from([0x67, 0x42, 0xc0, 0x1e, 0xd9]);
    assert.ok(carved(src), 'the source is a slice of the pool (what the copy must not be)');
    const c = keptCopy(src);
    assert.deepEqual([...c], [...src]);
    assert.equal(c.buffer.byteLength, src.length);
    src[0] = 0;
    assert.equal(c[0], 0x67);
    assert.equal(keptCopy(Buffer.alloc(0)).length, 0);
    assert.equal(keptAlloc(3).buffer.byteLength, 3);
  });

  it("the FLV muxer's config tags (sequence header, onMetaData) are not carved from the pool", () => {
    const sps = [0x67, 0x42, 0xc0, 0x1e, 0xd9, 0x00, 0xa0, 0x47, 0xfe, 0xc8];
    const pps = [0x68, 0xce, 0x3c, 0x80];
    // a key frame as a small pooled Buffer, the way a reassembled frame's views are
    const frame = Buffer.from([0, 0, 0, 1, ...sps, 0, 0, 0, 1, ...pps, 0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00]);
    assert.ok(carved(frame));
    const muxer = new FlvMuxer();
    muxer.setTrack({ kind: 'video', codec: 'h264', width: 320, height: 240 });
    assert.equal(muxer.push(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: frame })).length, 3);
    const config = muxer.configTags();
    assert.deepEqual(
      config.map((t) => t.type),
      [18, 9],
    );
    // each body is framed in place: its memory is its tag, header and trailer included, and nothing else
    for (const t of config) assert.equal(t.body.buffer.byteLength, 11 + t.body.length + 4, `tag type ${t.type}`);
  });
});
