/** A clip through the FLV muxer's tags and back through FlvUnits (what a publisher's RTMP messages become). */
import assert from 'node:assert/strict';
import type { AccessUnit, TrackInfo } from '../../../plugin-sdk';
import { FlvMuxer } from '../../../plugin-sdk/formats';
import type { TestClip } from '../../../plugin-sdk/testkit';
import { FlvUnits } from '../src/flv-units';
import { NAL_SCANS } from '../../../plugin-sdk/formats';

export function roundTrip(clip: { tracks: ReadonlyArray<TrackInfo>; units: ReadonlyArray<AccessUnit> }): {
  tracks: TrackInfo[];
  units: AccessUnit[];
  unsupported: string[];
} {
  const mux = new FlvMuxer({ audioCodecs: ['aac', 'g711a', 'g711u'] });
  for (const t of clip.tracks) mux.setTrack(t);
  const out = { tracks: [] as TrackInfo[], units: [] as AccessUnit[], unsupported: [] as string[] };
  const reader = new FlvUnits({ track: (t) => out.tracks.push(t), unit: (u) => out.units.push(u), unsupported: (w) => out.unsupported.push(w) }, 4 << 20);
  const tags = clip.units.flatMap((u) => mux.push(u));
  const before = NAL_SCANS.count;
  for (const tag of tags) reader.message(tag.type, tag.timestamp, tag.body);
  assert.equal(NAL_SCANS.count, before, "each frame's NAL index is written as its payload is laid out: no search");
  return out;
}

/** The round trip gives the same frames, key frames, times and audio as went in, and a video track `width` wide. */
export function assertSameAfterRoundTrip(c: TestClip, width: number): void {
  const back = roundTrip(c);
  const video = back.tracks.find((t) => t.kind === 'video');
  assert.equal(video?.codec, c.video.codec);
  assert.equal(video?.kind === 'video' && video.width, width);
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
}
