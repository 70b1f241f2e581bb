import assert from 'node:assert/strict';
import { videoTrack } from '../src/mux-tracks';

describe('hls-out: init segment tracks', () => {
  it("the AVC decoder configuration record a track keeps is not carved from Node's pool (kept-bytes)", () => {
    const track = videoTrack({ kind: 'video', codec: 'h264', sps: Buffer.from([0x67, 0x42, 0xc0, 0x1e, 0xd9]), pps: Buffer.from([0x68, 0xce, 0x3c, 0x80]) });
    const rec = track?.config;
    assert.ok(rec);
    assert.equal(rec[0], 1);
    // kept as long as the stream: memory of its own, not a slice pinning a whole 8 KiB slab
    assert.equal(rec.buffer.byteLength, rec.length);
  });
});
