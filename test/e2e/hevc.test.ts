/**
 * H.265 end to end: an ffmpeg-made HEVC stream, packed as JT/T 1078 (PT 99), pushed over TCP, played over HTTP-FLV
 * as Enhanced FLV (hvc1). Debian's ffmpeg cannot read Enhanced FLV, so the Annex-B is rebuilt from the tags
 * (test/support/flv-reader) and ffprobe decodes that.
 */
import assert from 'node:assert/strict';
import {
  HttpFlvPlayer,
  TcpTerminal,
  codedVideo,
  ffprobe,
  firstNonMonotonic,
  hevcAccessUnits,
  makeHevc,
  openLive,
  packHevc,
  probeVideoOf,
  useE2eGateway,
} from './helpers';
import { parseFlv, parseHvcC } from '../support/flv-reader';

describe('e2e: H.265 to Enhanced FLV', function () {
  this.timeout(60_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 });

  for (const layout of ['2013', '2019'] as const) {
    it(`320x240 HEVC, 50 frames, GOP 25, ${layout} layout: the player's Enhanced FLV decodes to every frame`, async () => {
      const es = makeHevc({ size: '320x240', seconds: 2, keyint: 25 });
      // the source itself, as the independent decoder sees it
      const src = ffprobe(es, 'hevc');
      assert.equal(`${src.codec} ${src.width}x${src.height} ${src.frames}`, 'hevc 320x240 50');
      const aus = hevcAccessUnits(es);
      assert.equal(aus.length, 50, 'access units found in the elementary stream');
      assert.equal(aus.filter((a) => a.irap).length, 2, 'an IRAP picture every 25 frames');

      const sim = layout === '2013' ? '013912345678' : '13912345678901';
      const open = await openLive(e.gw, sim, 2);
      const player = await HttpFlvPlayer.connect(open.playUrl);
      const term = await TcpTerminal.connect(layout === '2013' ? e.live2013 : e.live2019);
      await term.send(packHevc(aus, { sim, channel: 2, layout }));
      await term.end();
      await player.ended;

      const flv = parseFlv(player.data());
      const seq = flv.tags.filter((t) => t.type === 9 && t.sequenceHeader);
      assert.equal(seq.length >= 1, true, 'an HEVC sequence start precedes the frames');
      assert.equal(seq[0].enhanced, true);
      assert.equal(seq[0].codec, 'h265', 'Enhanced FLV with FourCC hvc1');
      const hvcc = parseHvcC(seq[0].data);
      assert.equal(hvcc.parameterSets.length, 3, 'VPS, SPS and PPS in the hvcC record');
      const video = codedVideo(flv.tags);
      assert.equal(video.length, 50, 'every frame reaches the player');
      assert.equal(video.filter((t) => t.keyframe).length, 2);
      assert.equal(video[0].keyframe, true);
      assert.equal(firstNonMonotonic(video, true), -1);
      assert.deepEqual(
        video.map((t) => t.timestamp),
        aus.map((_a, i) => i * 40),
        '40 ms apart from 0',
      );

      const p = probeVideoOf(flv, 'h265');
      assert.equal(`${p.codec} ${p.width}x${p.height}`, 'hevc 320x240');
      assert.equal(p.frames, 50, 'ffprobe decodes all 50 frames of the rebuilt stream');
      assert.equal(p.errors, '');
    });
  }
});
