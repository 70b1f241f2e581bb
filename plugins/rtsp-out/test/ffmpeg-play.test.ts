/**
 * Independent players: ffmpeg reads the play URL over TCP interleaving and over UDP, H.264 and H.265 with G.711A
 * carried as PCMA, or AAC from the audio-aac stage; ffprobe counts and decodes what it got.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { recordRtsp, startRtspGateway, h264Clip, h265Clip, type RtspGateway } from './helpers';
import { probeFile } from '../../../test/support/ffprobe';
import { requireTool } from '../../../test/support/tools';
import { runProcess } from '../../../test/support/run-process';

describe('rtsp-out: ffmpeg plays the play URL', function () {
  this.timeout(90_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway();
  });
  after(() => g.stop());

  const cases = [
    { codec: 'h264', transport: 'tcp' },
    { codec: 'h264', transport: 'udp' },
    { codec: 'h265', transport: 'tcp' },
    { codec: 'h265', transport: 'udp' },
  ] as const;
  let sim = 13900000100;
  for (const c of cases) {
    it(`${c.codec.toUpperCase()} + PCMA over ${c.transport.toUpperCase()}: ffprobe decodes 320x240 video and 8 kHz A-law`, async () => {
      const clip = c.codec === 'h264' ? h264Clip() : h265Clip();
      const open = await g.open(String(sim++));
      const pub = g.gw.publish(open.stream, clip, { loop: true });
      await g.gw.waitReady(open.reqId);
      const rec = await recordRtsp(open.url, c.transport, 3);
      pub.stop();
      assert.equal(rec.code, 0, `ffmpeg: ${rec.stderr}`);
      assert.equal(rec.stderr.trim(), '', 'ffmpeg reported no error while receiving');
      const p = await probeFile(rec.file);
      fs.rmSync(rec.file, { force: true });
      const v = p.streams.find((s) => s.codec_type === 'video');
      const a = p.streams.find((s) => s.codec_type === 'audio');
      assert.equal(v?.codec_name, c.codec === 'h264' ? 'h264' : 'hevc');
      assert.equal(`${v?.width}x${v?.height}`, '320x240');
      // three seconds at 25 fps, give or take where the cut falls
      assert.ok(Number(v?.nb_read_frames) >= 50, `video frames read: ${v?.nb_read_frames}`);
      assert.equal(a?.codec_name, 'pcm_alaw');
      assert.equal(a?.sample_rate, '8000');
      assert.ok(Number(a?.nb_read_frames) > 0, 'audio frames');
      assert.equal(p.decodeErrors, '', 'every frame decodes: each reader starts at a keyframe with its parameter sets');
      const status = (await g.gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
      assert.equal(status.consumed, true, 'the RTSP player counted as a consumer');
      assert.ok(status.bytesOut > 10_000, `bytes out counted: ${status.bytesOut}`);
      await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  }

  it('a wrong token gets RTSP 401, and ffmpeg says so', async () => {
    const open = await g.open('13900000200');
    const r = await runProcess(
      requireTool('ffprobe', 'ffmpeg'),
      ['-v', 'error', '-rtsp_transport', 'tcp', '-i', open.url.replace(/token=[^&]*/, 'token=wrong')],
      20_000,
    );
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /401 Unauthorized/);
    const closed = await runProcess(
      requireTool('ffprobe', 'ffmpeg'),
      ['-v', 'error', '-rtsp_transport', 'tcp', '-i', open.url.replace(/reqId=[^&]*/, 'reqId=notARequest1')],
      20_000,
    );
    assert.match(closed.stderr, /401 Unauthorized/, 'an unknown reqId too');
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('dataTyp 1 (video only) describes only the video track', async () => {
    const open = await g.open('13900000300', { dataTyp: 1 });
    const pub = g.gw.publish(open.stream, h264Clip(), { loop: true });
    await g.gw.waitReady(open.reqId);
    const rec = await recordRtsp(open.url, 'tcp', 2);
    pub.stop();
    assert.equal(rec.code, 0, rec.stderr);
    const p = await probeFile(rec.file);
    assert.deepEqual(
      p.streams.map((s) => s.codec_name),
      ['h264'],
    );
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});

describe('rtsp-out: AAC from the audio stage', function () {
  this.timeout(90_000);
  let g: RtspGateway;
  before(async () => {
    // G.711 not carried as received here: the terminal's audio goes through audio-aac's stage
    g = await startRtspGateway({ audioCodecs: ['aac'] }, [{ name: 'audio-aac' }]);
  });
  after(() => g.stop());

  for (const [transport, rate] of [
    ['tcp', 8000],
    ['udp', 22050],
  ] as const) {
    it(`G.711A becomes AAC (mpeg4-generic) over ${transport.toUpperCase()}: ffprobe decodes H.264 and AAC at ${rate} Hz`, async () => {
      // 8 kHz: the stage's default; 22.05 kHz: the request's audioCfg
      const open = await g.open(rate === 8000 ? '13900000401' : '13900000402', rate === 8000 ? {} : { extra: { audioCfg: { sampleRate: rate, channels: 1 } } });
      const pub = g.gw.publish(open.stream, h264Clip(), { loop: true });
      await g.gw.waitReady(open.reqId);
      const rec = await recordRtsp(open.url, transport, 3);
      pub.stop();
      assert.equal(rec.code, 0, rec.stderr);
      const p = await probeFile(rec.file);
      const a = p.streams.find((s) => s.codec_type === 'audio');
      assert.equal(p.streams.find((s) => s.codec_type === 'video')?.codec_name, 'h264');
      assert.equal(a?.codec_name, 'aac');
      assert.equal(a?.sample_rate, String(rate));
      assert.ok(Number(a?.nb_read_frames) >= 10, `AAC frames: ${a?.nb_read_frames}`);
      assert.equal(p.decodeErrors, '');
      await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  }
});
