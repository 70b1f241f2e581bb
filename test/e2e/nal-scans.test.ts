/**
 * How many times a video frame's bytes are searched for NAL units, with every output reading one stream: a real
 * capture pushed through jt1078-ingest, read by an HTTP-FLV player, an HLS (MPEG-TS) form, an RTSP player over TCP
 * and a recording. The ingest finds a frame's NAL units once, when it makes the unit, and every output reads that
 * index (AccessUnit.nals), so the count is one search per frame however many outputs read it. The counter
 * (NAL_SCANS) counts every search of a payload for start codes in the process. flv-out carries the audio codecs the
 * recorder keeps, so the player and the recording read one FLV form.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import { NAL_SCANS } from '../../plugin-sdk/formats/nal-index';
import { RawRtsp } from '../../plugins/rtsp-out/test/helpers';
import { CAPTURES, HttpFlvPlayer, TcpTerminal, capture, encodeCapture, ffprobe, metric, waitFor } from './helpers';
import { parseFlv } from '../support/flv-reader';
import { scratchDir } from '../support/paths';

describe('e2e: NAL units found once per video frame, with FLV, HLS, RTSP and a recording on one stream', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let scratch: string;

  before(async () => {
    scratch = scratchDir('e2e-nal-scans');
    gw = await startTestGateway({
      plugins: [
        { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, disconnectGraceMs: 30_000 } },
        // the audio codecs the recorder keeps: its recordings and the players share flv-out's FLV form
        { name: 'flv-out', config: { port: 0, audioCodecs: ['aac', 'g711a', 'g711u'] } },
        { name: 'hls-out' },
        { name: 'rtsp-out' },
        { name: 'recorder', config: { storeRoot: path.join(scratch, 'store'), timeZone: 'UTC' } },
      ],
      gateway: { dataDir: path.join(scratch, 'data') },
    });
  });
  after(async () => {
    await gw?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it("glaciall (H.264 CIF): one search per video frame, none in any output; the recording shares flv-out's form and decodes", async () => {
    const cap = CAPTURES[0];
    const packets = encodeCapture(capture(cap.file).packets);
    const flvOpen = await gw.openStream({ simNo: cap.sim, chanId: cap.channel, fmt: 0, extra: { record: true } });
    await gw.openStream({ simNo: cap.sim, chanId: cap.channel, fmt: 1, extra: { subFmt: 'mpegts' } });
    const rtspOpen = await gw.openStream({ simNo: cap.sim, chanId: cap.channel, fmt: 4 });
    const frames = (): Promise<number> => metric(gw, 'gw_jt1078_ingest_stream_video_frames');

    // the first fifth of the capture, so the stream is up and every output reads it
    const term = await TcpTerminal.connect(gw.ports['jt1078-ingest.livePort2013']);
    const head = Math.floor(packets.length / 5);
    await term.send(packets.slice(0, head), 16, 2);
    await gw.waitReady(flvOpen.reqId);
    const flv = await HttpFlvPlayer.connect(flvOpen.playUrl, { keep: false });
    const rtsp = await RawRtsp.connect(gw.ports['rtsp-out.port']);
    const d = await rtsp.request('DESCRIBE', rtspOpen.playUrl, { Accept: 'application/sdp' });
    assert.equal(d.status, 200);
    const controls = [...d.body.matchAll(/a=control:(rtsp:\/\/\S+)/g)].map((m) => m[1]);
    const s = await rtsp.request('SETUP', controls[0], { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    const session = s.headers.get('session')!.split(';')[0];
    assert.equal((await rtsp.request('PLAY', rtspOpen.playUrl, { Session: session })).status, 200);
    await waitFor('the FLV and RTSP players to get video', () => flv.videoFrames() > 0 && (rtsp.frames.get(0)?.length ?? 0) > 0);
    // the recording reads flv-out's format: one FLV encoder for the player and the file
    assert.deepEqual(gw.bus.get(flvOpen.streamName)!.stats().formats, { flv: 2, rtp: 1 });

    // the rest, counted
    const framesBefore = await frames();
    NAL_SCANS.count = 0;
    await term.send(packets.slice(head), 16, 2);
    await waitFor('the ingest to publish the last frame', async () => ((await frames()) > framesBefore && flv.videoFrames() > 0 ? frames() : 0));
    let published = 0;
    await waitFor(
      'the published frames to settle',
      async () => {
        const now = await frames();
        const settled = now === published;
        published = now;
        return settled && now > framesBefore;
      },
      10_000,
      200,
    );
    const scans = NAL_SCANS.count;
    const perFrame = scans / (published - framesBefore);
    console.log(`      NAL scans: ${scans} for ${published - framesBefore} video frames (${perFrame.toFixed(3)} a frame)`);
    rtsp.close();
    flv.close();
    await term.end();
    assert.equal(scans, published - framesBefore, "one search per video frame: the ingest's");

    // the file written from flv-out's form: tags from 0, and every frame decodes
    const ended = await metric(gw, 'gw_recorder_recordings_ended_total', { outcome: 'done' });
    await gw.api('POST', '/strm/close', { reqIds: [flvOpen.reqId] });
    await waitFor('the recording to end', async () => (await metric(gw, 'gw_recorder_recordings_ended_total', { outcome: 'done' })) > ended, 15_000, 50);
    const files = fs
      .readdirSync(path.join(scratch, 'store'), { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.flv'));
    assert.equal(files.length, 1);
    const bytes = fs.readFileSync(path.join(scratch, 'store', files[0]));
    const tags = parseFlv(bytes).tags;
    const video = tags.filter((t) => t.type === 9 && !t.sequenceHeader);
    assert.equal(video[0].timestamp, 0, "the file's time starts at 0");
    assert.equal(video[0].keyframe, true);
    const p = ffprobe(bytes, 'flv');
    assert.equal(`${p.codec} ${p.width}x${p.height}`, `h264 ${cap.width}x${cap.height}`);
    assert.equal(p.frames, video.length, 'ffprobe decodes every frame of the file');
    assert.equal(p.errors, '');
  });
});
