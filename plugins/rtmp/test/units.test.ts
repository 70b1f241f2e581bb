/**
 * A publisher's RTMP messages as bus units: the FLV muxer's own tags (what an RTMP player of ours receives) read back
 * by FlvUnits give the same Annex-B frames, tracks and times; malformed bodies are BadMedia, never a crash. H.265 as
 * Enhanced RTMP `hvc1` is in units-h265.test.ts (its clip is libx265's).
 */
import assert from 'node:assert/strict';
import { FlvMuxer } from '../../../plugin-sdk/formats';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { BadMedia, FlvUnits } from '../src/flv-units';
import { assertSameAfterRoundTrip } from './round-trip';

describe('rtmp: publisher messages to bus units', () => {
  it('H.264 and G.711A: the same frames, key frames and times come back', () => {
    assertSameAfterRoundTrip(fixtureClip({ seconds: 2, audio: true }), 704);
  });

  it('malformed bodies are BadMedia: a NAL length past the frame, an AVC header without PPS, a short AAC config', () => {
    const reader = new FlvUnits({ track: () => undefined, unit: () => undefined, unsupported: () => undefined }, 1 << 20);
    // a config first, so frames are read at all
    const mux = new FlvMuxer();
    const clip = fixtureClip({ seconds: 2 });
    mux.setTrack(clip.video);
    for (const t of mux.push(clip.units[0])) reader.message(t.type, t.timestamp, t.body);
    assert.throws(() => reader.message(9, 40, Buffer.from([0x27, 1, 0, 0, 0, 0, 0, 0, 99, 1, 2])), BadMedia);
    assert.throws(() => reader.message(9, 0, Buffer.from([0x17, 0, 0, 0, 0, 1, 0x64, 0, 0x1f, 0xff, 0xe1, 0, 2, 0x67, 0x64])), BadMedia);
    assert.throws(() => reader.message(8, 0, Buffer.from([0xaf, 0, 0x12])), BadMedia);
  });

  it('a frame over the size cap is BadMedia, not a buffer allocated', () => {
    const reader = new FlvUnits({ track: () => undefined, unit: () => undefined, unsupported: () => undefined }, 1000);
    const mux = new FlvMuxer();
    const clip = fixtureClip({ seconds: 2 });
    mux.setTrack(clip.video);
    const tags = mux.push(clip.units[0]);
    assert.throws(() => {
      for (const t of tags) reader.message(t.type, t.timestamp, t.body);
    }, /a video frame of \d+ bytes/);
  });
});
