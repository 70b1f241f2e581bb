/**
 * RTMP both ways against real peers: ffmpeg publishes an encoder's stream, and FLV, HLS, RTSP and RTMP players of
 * that virtual channel play it (ffmpeg reads each URL, ffprobe counts and decodes the frames).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { openStream } from '../../../plugin-sdk/testkit';
import { requireTool } from '../../../test/support/tools';
import { ffmpegPublish, HOST, KEY, recordAndProbe, startRtmpGateway, type RtmpGateway } from './helpers';
import { runProcess } from '../../../test/support/run-process';
import { waitFor } from '../../../test/support/until';

describe('rtmp: an encoder publishes, every output plays', function () {
  this.timeout(120_000);
  let g: RtmpGateway;
  let encoder: ChildProcess | undefined;

  before(async () => {
    g = await startRtmpGateway();
    encoder = ffmpegPublish(`rtmp://${HOST}:${g.port}/push/enc01_1?key=${KEY}`);
    await waitFor('the publisher', () => g.rtmp.publisherStats().find((p) => p.stream === 'enc01_1_1' && p.units > 50), 15_000);
  });

  after(async () => {
    encoder?.kill('SIGKILL');
    await g?.stop();
  });

  it('publishes to the push URL and the open of that channel is ready at once, fed by the encoder', async () => {
    const o = await openStream(g.gw, { simNo: 'enc01', chanId: 1, fmt: 0, scheme: 'rtmp' });
    assert.match(o.playUrl, new RegExp(`^rtmp://${HOST}:${g.port}/live/enc01_1_1\\?reqId=${o.reqId}&token=test-token$`));
    const st = await g.gw.waitReady(o.reqId);
    assert.equal(st.ready, true);
    assert.equal(g.rtmp.publisherStats().find((p) => p.stream === 'enc01_1_1')?.feeding, true);
  });

  it('ffmpeg reads the RTMP play URL: H.264 320x240 and AAC, every frame decodes', async () => {
    const o = await openStream(g.gw, { simNo: 'enc01', chanId: 1, scheme: 'rtmp' });
    await g.gw.waitReady(o.reqId);
    const p = await recordAndProbe(o.playUrl, 4);
    const v = p.streams.find((s) => s.codec_type === 'video');
    const a = p.streams.find((s) => s.codec_type === 'audio');
    assert.equal(v?.codec_name, 'h264');
    assert.equal(v?.width, 320);
    assert.ok(Number(v?.nb_read_frames) >= 50, `video frames: ${v?.nb_read_frames}`);
    assert.equal(a?.codec_name, 'aac');
    assert.equal(p.decodeErrors, '');
  });

  for (const c of [
    { name: 'HTTP-FLV', fmt: 0, scheme: 'http' },
    { name: 'HLS', fmt: 1, scheme: 'http' },
    { name: 'RTSP', fmt: 4, scheme: 'rtsp' },
  ]) {
    it(`${c.name} players of the published channel play it`, async () => {
      const o = await openStream(g.gw, { simNo: 'enc01', chanId: 1, fmt: c.fmt, scheme: c.scheme });
      if (c.fmt === 1) await g.gw.waitReady(o.reqId, 20_000);
      const p = await recordAndProbe(o.playUrl, 3, c.fmt === 4 ? ['-rtsp_transport', 'tcp'] : []);
      const v = p.streams.find((s) => s.codec_type === 'video');
      assert.equal(v?.codec_name, 'h264');
      assert.equal(v?.width, 320);
      assert.ok(Number(v?.nb_read_frames) >= 25, `video frames: ${v?.nb_read_frames}`);
      assert.ok(
        p.streams.some((s) => s.codec_type === 'audio' && s.codec_name === 'aac'),
        JSON.stringify(p.streams),
      );
      assert.equal(p.decodeErrors, '');
    });
  }

  it('ffplay (headless) plays the RTMP play URL', async () => {
    const o = await openStream(g.gw, { simNo: 'enc01', chanId: 1, scheme: 'rtmp' });
    await g.gw.waitReady(o.reqId);
    const env = { ...process.env, SDL_VIDEODRIVER: 'dummy', SDL_AUDIODRIVER: 'dummy' };
    // ffplay is killed after 8 s (its -t ends playback, not always the process): what it showed by then is counted
    const r = await runProcess(
      requireTool('ffplay', 'ffmpeg'),
      ['-hide_banner', '-loglevel', 'info', '-an', '-autoexit', '-t', '3', '-vf', 'showinfo', o.playUrl],
      8_000,
      env,
    );
    const frames = (r.stderr.match(/\[Parsed_showinfo[^\]]*\] n:\s*\d+/g) ?? []).length;
    assert.ok(frames >= 40, `ffplay showed ${frames} frames; exit ${r.code}: ${r.stderr.slice(-800)}`);
  });

  it('refuses a play with a wrong token or an unknown request, and a publish with a wrong key', async () => {
    const o = await openStream(g.gw, { simNo: 'enc01', chanId: 1, scheme: 'rtmp' });
    const ffprobe = requireTool('ffprobe', 'ffmpeg');
    for (const url of [o.playUrl.replace('token=test-token', 'token=wrong'), o.playUrl.replace(/reqId=[^&]*/, 'reqId=notARequest1')]) {
      const r = await runProcess(ffprobe, ['-v', 'error', '-rw_timeout', '5000000', '-show_streams', '-of', 'json', url], 20_000);
      assert.notEqual(r.code, 0, `ffprobe read ${url}`);
      assert.doesNotMatch(r.stdout, /"codec_type": "video"/);
    }
    const bad = ffmpegPublish(`rtmp://${HOST}:${g.port}/push/enc02_1?key=wrong-key-123`, { seconds: 3 });
    const code = await new Promise<number | null>((resolve) => bad.on('close', resolve));
    assert.notEqual(code, 0);
    assert.equal(
      g.rtmp.publisherStats().some((p) => p.stream === 'enc02_1_1'),
      false,
    );
  });
});
