/**
 * A publisher's RTMP messages as bus units: the FLV muxer's own tags (what an RTMP player of ours receives, H.265 as
 * Enhanced RTMP `hvc1`) read back by FlvUnits give the same Annex-B frames, tracks and times; malformed bodies are
 * BadMedia, never a crash.
 */
import assert from 'node:assert/strict';
import type { AccessUnit, TrackInfo } from '../../../plugin-sdk';
import { testClip } from '../../../plugin-sdk/testkit';
import { FlvMuxer } from '../../../plugin-sdk/formats';
import { h265Clip } from '../../rtsp-out/test/helpers';
import { BadMedia, FlvUnits } from '../src/flv-units';
import { NAL_SCANS } from '../../../plugin-sdk/formats';

function roundTrip(clip: { tracks: ReadonlyArray<TrackInfo>; units: ReadonlyArray<AccessUnit> }): { tracks: TrackInfo[]; units: AccessUnit[]; unsupported: string[] } {
  const mux = new FlvMuxer({ audioCodecs: ['aac', 'g711a', 'g711u'] });
  for (const t of clip.tracks) mux.setTrack(t);
  const out = { tracks: [] as TrackInfo[], units: [] as AccessUnit[], unsupported: [] as string[] };
  const reader = new FlvUnits({ track: (t) => out.tracks.push(t), unit: (u) => out.units.push(u), unsupported: (w) => out.unsupported.push(w) }, 4 << 20);
  const tags = clip.units.flatMap((u) => mux.push(u));
  const before = NAL_SCANS.count;
  for (const tag of tags) reader.message(tag.type, tag.timestamp, tag.body);
  assert.equal(NAL_SCANS.count, before, 'each frame\'s NAL index is written as its payload is laid out: no search');
  return out;
}

describe('rtmp: publisher messages to bus units', () => {
  for (const [name, clip] of [['H.264 and G.711A', () => testClip({ seconds: 2, audio: true })], ['H.265 (Enhanced RTMP hvc1)', h265Clip]] as const) {
    it(`${name}: the same frames, key frames and times come back`, function () {
      this.timeout(60_000);
      const c = clip();
      const back = roundTrip(c);
      const video = back.tracks.find((t) => t.kind === 'video');
      assert.equal(video?.codec, c.video.codec);
      assert.equal(video?.kind === 'video' && video.width, 320);
      const vIn = c.units.filter((u) => u.kind === 'video');
      const vOut = back.units.filter((u) => u.kind === 'video');
      assert.equal(vOut.length, vIn.length);
      for (let i = 0; i < vIn.length; i++) {
        assert.equal(vOut[i].keyframe, vIn[i].keyframe, `frame ${i}`);
        assert.equal(Math.round(vOut[i].dts), Math.round(vIn[i].dts), `frame ${i}`);
        // the muxer drops parameter sets from key frames (the track has them): compare the slice data
        const n = Math.min(64, vIn[i].payload.length - 8);
        assert.ok(vOut[i].payload.subarray(-n).equals(vIn[i].payload.subarray(-n)), `frame ${i}'s bytes`);
      }
      const aIn = c.units.filter((u) => u.kind === 'audio');
      const aOut = back.units.filter((u) => u.kind === 'audio');
      assert.equal(aOut.length, aIn.length);
      if (aIn.length) assert.ok(aOut[3].payload.equals(aIn[3].payload));
      assert.deepEqual(back.unsupported, []);
    });
  }

  it('malformed bodies are BadMedia: a NAL length past the frame, an AVC header without PPS, a short AAC config', () => {
    const reader = new FlvUnits({ track: () => undefined, unit: () => undefined, unsupported: () => undefined }, 1 << 20);
    // a config first, so frames are read at all
    const mux = new FlvMuxer();
    const clip = testClip({ seconds: 2 });
    mux.setTrack(clip.video);
    for (const t of mux.push(clip.units[0])) reader.message(t.type, t.timestamp, t.body);
    assert.throws(() => reader.message(9, 40, Buffer.from([0x27, 1, 0, 0, 0, 0, 0, 0, 99, 1, 2])), BadMedia);
    assert.throws(() => reader.message(9, 0, Buffer.from([0x17, 0, 0, 0, 0, 1, 0x64, 0, 0x1f, 0xff, 0xe1, 0, 2, 0x67, 0x64])), BadMedia);
    assert.throws(() => reader.message(8, 0, Buffer.from([0xaf, 0, 0x12])), BadMedia);
  });

  it('a frame over the size cap is BadMedia, not a buffer allocated', () => {
    const reader = new FlvUnits({ track: () => undefined, unit: () => undefined, unsupported: () => undefined }, 1000);
    const mux = new FlvMuxer();
    const clip = testClip({ seconds: 2 });
    mux.setTrack(clip.video);
    const tags = mux.push(clip.units[0]);
    assert.throws(() => { for (const t of tags) reader.message(t.type, t.timestamp, t.body); }, /a video frame of \d+ bytes/);
  });
});
