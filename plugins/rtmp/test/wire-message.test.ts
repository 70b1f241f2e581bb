/**
 * The one-copy message of a unit (wire-message.ts) is byte for byte what node-media-server's chunksCreate makes of
 * the muxer's tag: small frames, frames over the 65,535-byte chunk size (type-3 headers inside), and timestamps past
 * 2^24-1 ms (extended timestamps, repeated after each type-3 header).
 */
import assert from 'node:assert/strict';
import { shiftUnit, videoUnit } from '../../../plugin-sdk';
import { FlvMuxer } from '../../../plugin-sdk/formats';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { messageOf } from '../src/rtmp-format';
import { wireMessage } from '../src/wire-message';

describe('rtmp: a unit chunked from the wire form', () => {
  for (const offset of [0, 0xffffff + 5000]) {
    it(`equals chunksCreate of the tag, frames small and large${offset ? ', extended timestamps' : ''}`, () => {
      const clip = fixtureClip({ seconds: 2 });
      const a = new FlvMuxer();
      const b = new FlvMuxer();
      a.setTrack(clip.video);
      b.setTrack(clip.video);
      let checked = 0;
      let large = 0;
      const units = clip.units.map((u) => (offset ? shiftUnit(u, offset) : u));
      // a key frame of 200 KB: NAL units past the chunk size, taken by reference from the payload
      const big = Buffer.concat([units[0].payload, Buffer.from([0, 0, 0, 1, 0x65]), Buffer.alloc(200_000, 0x5a)]);
      units.push(videoUnit({ codec: 'h264', dts: units[units.length - 1].dts + 40, keyframe: true, payload: big }));
      for (const u of units) {
        const tags = a.push(u);
        const w = b.pushWire(u);
        if (!w) {
          assert.equal(tags.length, 0);
          continue;
        }
        const media = tags[tags.length - 1];
        const mine = wireMessage(w, 5, 1)!;
        assert.ok(mine.equals(messageOf(media)), `unit at ${u.dts} ms (${media.body.length} bytes)`);
        checked++;
        if (media.body.length > 0xffff) large++;
      }
      assert.ok(checked >= 50 && large >= 1, `${checked} units, ${large} large`);
    });
  }
});
