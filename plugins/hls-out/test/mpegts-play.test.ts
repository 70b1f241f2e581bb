/**
 * subFmt mpegts: classic HLS (no parts) of MPEG-TS segments, played by ffmpeg from the play URL and each segment
 * decoded on its own by ffprobe (each starts with PAT, PMT and a keyframe with its parameter sets).
 */
import assert from 'node:assert/strict';
import { Jt1078Packer } from '../../jt1078-ingest/src/packer';
import { testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { hevcAccessUnits, makeHevc } from '../../../test/e2e/helpers';
import { checkRfc, get, pacedTerminal, playWithFfmpeg, probeBytes, resolveUri, startHlsGateway, waitPlaylist } from './helpers';

describe('hls-out: MPEG-TS played by ffmpeg', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  before(async () => {
    gw = await startHlsGateway({ ingest: 'jt1078' });
  });
  after(() => gw.stop());

  it('H.264 with AAC: a version 3 playlist of .ts segments without parts; ffmpeg plays it; each segment decodes alone', async () => {
    const open = await gw.openStream({ simNo: '13900000011', chanId: 1, fmt: 1, extra: { subFmt: 'mpegts' } });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
    const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 2);
    checkRfc(p, 'mpegts');
    assert.equal(p.partTarget, undefined, 'no EXT-X-PART-INF');
    assert.equal(p.preloadHint, undefined);
    assert.ok(!p.tags.includes('#EXT-X-MAP') && !p.tags.includes('#EXT-X-PART'));
    for (const s of p.segments) assert.match(s.uri, /^seg-\d+\.ts\?reqId=[^&]+&token=test-token$/);

    const seg = await get(resolveUri(open.playUrl, p.segments[1].uri));
    assert.equal(seg.headers.get('content-type'), 'video/mp2t');
    assert.equal(seg.body.length % 188, 0, 'whole TS packets');
    for (let i = 0; i < seg.body.length; i += 188) assert.equal(seg.body[i], 0x47, `sync byte of packet ${i / 188}`);
    const one = await probeBytes(seg.body, 'ts');
    assert.equal(one.video?.codec, 'h264');
    assert.equal(one.audio?.codec, 'aac');
    assert.equal(one.frames, 50, 'the 2 s segment decodes on its own, all 50 frames');
    assert.equal(one.errors, '');

    const probe = await playWithFfmpeg(open.playUrl, 4);
    assert.deepEqual(probe.video, { codec: 'h264', width: 320, height: 240 });
    assert.deepEqual(probe.audio, { codec: 'aac', sampleRate: 8000, channels: 1 });
    assert.ok(probe.frames >= 95, `frames: ${probe.frames}`);
    assert.equal(probe.errors, '');
    pub.stop();
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('H.265 from a terminal: stream type 0x24, ffmpeg plays the play URL', async () => {
    const es = makeHevc({ size: '320x240', seconds: 10, keyint: 25 });
    const packer = new Jt1078Packer({ layout: '2013', sim: '013912345679', channel: 1 });
    const frames = hevcAccessUnits(es).map((au, i) =>
      packer.packFrame({ dataType: au.irap ? 0 : 1, pt: 99, timestamp: 2_000_000 + i * 40, payload: au.payload }),
    );
    const open = await gw.openStream({ simNo: '013912345679', chanId: 1, fmt: 1, extra: { subFmt: 'mpegts' } });
    const term = pacedTerminal(gw.ports['jt1078-ingest.livePort2013'], frames, 25);
    try {
      const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 1);
      checkRfc(p, 'mpegts');
      const seg = await get(resolveUri(open.playUrl, p.segments[0].uri));
      const one = await probeBytes(seg.body, 'ts');
      assert.equal(one.video?.codec, 'hevc');
      // x265 places its own IRAP pictures (scenecut): the segment ends at the next one, whatever its frame count
      assert.equal(one.frames, Math.round(p.segments[0].duration * 25), 'every frame of the segment decodes on its own');
      assert.equal(one.errors, '');
      const probe = await playWithFfmpeg(open.playUrl, 3);
      assert.deepEqual(probe.video, { codec: 'hevc', width: 320, height: 240 });
      assert.ok(probe.frames >= 70, `frames: ${probe.frames}`);
      assert.equal(probe.errors, '');
    } finally {
      term.stop();
      await term.done;
    }
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
