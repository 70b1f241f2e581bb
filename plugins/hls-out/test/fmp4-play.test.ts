/**
 * fMP4 HLS played by an independent player: ffmpeg reads the play URL (a live LL-HLS playlist) and copies what it
 * gets; ffprobe decodes every frame of that. H.264 with AAC (the test clip's G.711 tone through the AAC stage),
 * video only (dataTyp 1), audio only (dataTyp 3), H.265 pushed by a terminal over TCP (hvc1, parameter sets in
 * the init segment), and the fixtures' captures replayed in real time by the terminal simulator.
 */
import assert from 'node:assert/strict';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { Jt1078Packer } from '../../jt1078-ingest/src/packer';
import { testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { hevcAccessUnits, makeHevc } from '../../../test/e2e/helpers';
import { fixturePath } from '../../../test/support/paths';
import { get, pacedTerminal, parsePlaylist, playWithFfmpeg, probeBytes, resolveUri, startHlsGateway, waitPlaylist } from './helpers';

/** the init segment and every complete segment of the playlist, joined: one fMP4 file */
async function wholeWindow(playUrl: string): Promise<{ file: Buffer; segments: number; seconds: number }> {
  const p = parsePlaylist((await get(playUrl)).text);
  const init = await get(resolveUri(playUrl, p.segments[0].map!));
  assert.equal(init.status, 200);
  const parts: Buffer[] = [init.body];
  for (const s of p.segments) {
    assert.equal(s.map, p.segments[0].map, 'one init segment for the window');
    const r = await get(resolveUri(playUrl, s.uri));
    assert.equal(r.status, 200);
    parts.push(r.body);
  }
  return { file: Buffer.concat(parts), segments: p.segments.length, seconds: p.segments.reduce((n, s) => n + s.duration, 0) };
}

describe('hls-out: fMP4 played by ffmpeg', function () {
  this.timeout(90_000);

  describe('test clip through the stand-in ingest', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startHlsGateway();
    });
    after(() => gw.stop());

    it('H.264 with AAC audio: ffmpeg plays the play URL; the init segment holds avc1 and mp4a', async () => {
      const open = await gw.openStream({ simNo: '13900000001', chanId: 1, fmt: 1 });
      assert.match(
        open.playUrl,
        new RegExp(`^http://127\\.0\\.0\\.1:${gw.ports['gateway.httpPort']}/hls/13900000001_1_1/index\\.m3u8\\?reqId=[^&]+&token=test-token$`),
      );
      const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
      await waitPlaylist(open.playUrl, (p) => p.segments.length >= 1);
      const probe = await playWithFfmpeg(open.playUrl, 4);
      assert.deepEqual(probe.video, { codec: 'h264', width: 320, height: 240 });
      assert.deepEqual(probe.audio, { codec: 'aac', sampleRate: 8000, channels: 1 });
      // 4 s of 25 fps; AAC frames of 1024 samples at 8 kHz
      assert.ok(probe.frames >= 95, `frames decoded: ${probe.frames}`);
      assert.ok(probe.audioFrames >= 25, `audio frames decoded: ${probe.audioFrames}`);
      assert.equal(probe.errors, '');

      const whole = await wholeWindow(open.playUrl);
      const file = await probeBytes(whole.file, 'mp4');
      assert.equal(file.video?.codecTag, 'avc1');
      assert.equal(file.audio?.codec, 'aac');
      assert.equal(file.frames, whole.segments * 50, 'every frame of the window decodes (2 s segments of 25 fps)');
      assert.equal(file.errors, '');
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it('dataTyp 1: video only (no audio track in the init segment)', async () => {
      const open = await gw.openStream({ simNo: '13900000002', chanId: 1, fmt: 1, dataTyp: 1 });
      const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: 3, realtime: false });
      await pub.done;
      await waitPlaylist(open.playUrl, (p) => p.segments.length >= 2);
      const whole = await wholeWindow(open.playUrl);
      const file = await probeBytes(whole.file, 'mp4');
      assert.equal(file.video?.codec, 'h264');
      assert.equal(file.audio, undefined, 'no audio stream');
      assert.equal(file.raw.length, 1);
      assert.equal(file.errors, '');
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it('dataTyp 3: audio only (AAC, segments cut by time)', async () => {
      const open = await gw.openStream({ simNo: '13900000003', chanId: 1, fmt: 1, dataTyp: 3 });
      const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
      const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 2);
      for (const s of p.segments) assert.ok(s.duration >= 1.9 && Math.round(s.duration) <= p.targetDuration, `segment of ${s.duration} s`);
      const probe = await playWithFfmpeg(open.playUrl, 3);
      assert.equal(probe.video, undefined, 'no video stream');
      assert.deepEqual(probe.audio, { codec: 'aac', sampleRate: 8000, channels: 1 });
      assert.ok(probe.audioFrames >= 20, `audio frames: ${probe.audioFrames}`);
      assert.equal(probe.errors, '');
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  });

  describe('terminals over TCP (jt1078-ingest)', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startHlsGateway({ ingest: 'jt1078' });
    });
    after(() => gw.stop());

    it('H.265: hvc1 with VPS, SPS and PPS in the init segment; ffmpeg plays the play URL', async () => {
      const es = makeHevc({ size: '320x240', seconds: 10, keyint: 25 });
      const aus = hevcAccessUnits(es);
      const packer = new Jt1078Packer({ layout: '2013', sim: '013912345678', channel: 2 });
      const frames = aus.map((au, i) => packer.packFrame({ dataType: au.irap ? 0 : 1, pt: 99, timestamp: 1_000_000 + i * 40, payload: au.payload }));
      const open = await gw.openStream({ simNo: '013912345678', chanId: 2, fmt: 1 });
      const term = pacedTerminal(gw.ports['jt1078-ingest.livePort2013'], frames, 25);
      try {
        await waitPlaylist(open.playUrl, (p) => p.segments.length >= 1);
        const probe = await playWithFfmpeg(open.playUrl, 3);
        assert.deepEqual(probe.video, { codec: 'hevc', width: 320, height: 240 });
        assert.ok(probe.frames >= 70, `frames decoded: ${probe.frames}`);
        assert.equal(probe.errors, '');
        const whole = await wholeWindow(open.playUrl);
        const file = await probeBytes(whole.file, 'mp4');
        assert.equal(file.video?.codecTag, 'hvc1', 'sample entry hvc1 (what Safari plays)');
        // x265 places its own IRAP pictures (scenecut): segments end at them, whatever their frame count
        assert.equal(file.frames, Math.round(whole.seconds * 25), 'every frame of the window decodes');
        assert.equal(file.errors, '');
        // the samples carry no parameter sets: without the init segment's hvcC nothing decodes
        const init = await get(resolveUri(open.playUrl, parsePlaylist((await get(open.playUrl)).text).segments[0].map!));
        const hvcC = init.body.indexOf('hvcC', 0, 'latin1');
        assert.ok(hvcC > 0);
        const arrays = init.body[hvcC + 4 + 22];
        assert.equal(arrays, 3, 'VPS, SPS and PPS arrays');
      } finally {
        term.stop();
        await term.done;
      }
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it('the glaciall capture (H.264 352x288) replayed in real time: ffmpeg plays it; PROGRAM-DATE-TIME follows the wall clock', async () => {
      const open = await gw.openStream({ simNo: '013800138000', chanId: 1, fmt: 1 });
      const ac = new AbortController();
      const sim = runSimulator({
        file: fixturePath('jt1078/glaciall-cif-h264-2013.bin'),
        port: gw.ports['jt1078-ingest.livePort2013'],
        speed: 1,
        signal: ac.signal,
      });
      try {
        const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 1);
        const pdt = p.segments[0].programDateTime!;
        assert.ok(Math.abs(pdt - Date.now()) < 60_000, 'the first segment is dated now, by the gateway clock');
        const probe = await playWithFfmpeg(open.playUrl, 3);
        assert.deepEqual(probe.video, { codec: 'h264', width: 352, height: 288 });
        assert.ok(probe.frames >= 30, `frames decoded: ${probe.frames}`);
        assert.equal(probe.errors, '');
      } finally {
        ac.abort();
        await sim.catch(() => undefined);
      }
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it('the gojt808 capture (H.264 720x576 + G.711A) replayed in real time: ffmpeg plays video and AAC audio', async () => {
      const open = await gw.openStream({ simNo: '156987000796', chanId: 1, fmt: 1 });
      const ac = new AbortController();
      const sim = runSimulator({
        file: fixturePath('jt1078/gojt808-d1-h264-g711a-2013.bin'),
        port: gw.ports['jt1078-ingest.livePort2013'],
        speed: 1,
        loop: true,
        signal: ac.signal,
      });
      try {
        await waitPlaylist(open.playUrl, (x) => x.segments.length >= 1);
        const probe = await playWithFfmpeg(open.playUrl, 3);
        assert.equal(probe.video?.codec, 'h264');
        assert.equal(`${probe.video?.width}x${probe.video?.height}`, '720x576');
        assert.equal(probe.audio?.codec, 'aac');
        assert.ok(probe.audioFrames > 0);
        assert.equal(probe.errors, '');
      } finally {
        ac.abort();
        await sim.catch(() => undefined);
      }
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  });
});
