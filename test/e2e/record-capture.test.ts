/**
 * Recording a real terminal's stream, end to end: a gateway with jt1078-ingest + flv-out + recorder, a request
 * opened with `record: true`, the simulator pushing a whole capture over TCP through the real ingest, the request
 * closed, then the catalog (GET /strm/record by reqId and by time range), the file download (whole, and by byte
 * ranges) with the owner's Basic credentials, and ffprobe as the independent decoder. Another application of the
 * same site sees nothing of it.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { definePlugin, type Notice } from '../../plugin-sdk';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import { runSimulator } from '../../plugins/jt1078-ingest/tools/simulator';
import type { Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { parseFlv } from '../support/flv-reader';
import { fixturePath, scratchDir } from '../support/paths';
import { requireTool } from '../support/tools';
import { utcText } from '../../plugins/recorder/test/harness';
import { rawRequest, type RawReply } from '../../plugins/recorder/test/helpers';
import {
  CAPTURES,
  capture,
  codedAudio,
  codedVideo,
  expectedFrom,
  ffprobe,
  firstNonMonotonic,
  framesFromFirstI,
  metric,
  waitFor,
  type CaptureInfo,
} from './helpers';

const APP_A = { appId: 'A', user: 'appa', password: 'pwa' };
const APP_B = { appId: 'B', user: 'appb', password: 'pwb' };
const AUTH_A = `${APP_A.user}:${APP_A.password}`;
const AUTH_B = `${APP_B.user}:${APP_B.password}`;

/** GET of an absolute URL (the StoredAv `url` as the gateway wrote it), with Basic credentials and extra headers. */
function get(url: string, auth: string | null, headers: Record<string, string> = {}): Promise<RawReply> {
  const u = new URL(url);
  return rawRequest(u.origin, 'GET', u.pathname + u.search, auth, headers);
}

/**
 * The media duration the capture holds for a recording that starts at its first I frame, from the capture's own
 * packet timestamps (not from the gateway's code): the time from the first I frame to the last complete video
 * frame, plus one frame interval (the median step between frames) for the last frame's own display time.
 */
function captureVideoSeconds(packets: Jt1078Packet[]): number {
  const frameTs: number[] = [];
  let started = false;
  for (const p of packets) {
    if (p.dataType > 2) continue;
    if (!started && p.dataType === 0) started = true;
    if (started && p.marker) frameTs.push(p.timestamp);
  }
  assert.ok(frameTs.length > 10, 'the capture holds video frames');
  const steps = frameTs
    .slice(1)
    .map((t, i) => t - frameTs[i])
    .sort((x, y) => x - y);
  const frameMs = steps[steps.length >> 1];
  return (frameTs[frameTs.length - 1] - frameTs[0] + frameMs) / 1000;
}

describe('e2e: recording a pushed capture (jt1078-ingest + flv-out + recorder), query and download', function () {
  this.timeout(60_000);
  let scratch: string;
  let dataDir: string;
  let storeRoot: string;
  let gw: TestGateway;
  let live2013 = 0;
  const notices: Notice[] = [];

  before(async () => {
    requireTool('ffprobe', 'ffmpeg');
    scratch = scratchDir('e2e-record-capture');
    dataDir = path.join(scratch, 'data');
    // an absolute store root inside the test's data directory (not the default, to see the key is honoured)
    storeRoot = path.join(dataDir, 'store');
    const probe = definePlugin({
      name: 'e2e-record-probe',
      setup(ctx) {
        ctx.notices.on((n) => notices.push(n));
      },
    });
    gw = await startTestGateway({
      plugins: [
        // a long grace: the terminal leaves after its capture and the request stays open until the test closes it
        {
          name: 'jt1078-ingest',
          config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, disconnectGraceMs: 30_000, unknownGraceMs: 5000 },
        },
        { name: 'flv-out', config: { port: 0 } },
        { name: 'recorder', config: { storeRoot, timeZone: 'UTC', sizeUpdateSec: 1 } },
        { name: 'e2e-record-probe', def: probe },
      ],
      gateway: { dataDir, applications: [APP_A, APP_B] },
    });
    live2013 = gw.ports['jt1078-ingest.livePort2013'];
  });
  after(async () => {
    await gw?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  /** Opens a recorded live request as A, replays the capture through the ingest, closes; returns A's StoredAv. */
  async function recordCapture(cap: CaptureInfo, speed: number): Promise<{ reqId: string; av: Record<string, any>; openedAt: number }> {
    const openedAt = Date.now();
    const r = await gw.api(
      'POST',
      '/strm/open',
      { user: { token: 'tok-rec' }, typ: 'live', simNo: cap.sim, chanId: cap.channel, keepIntv: 600, record: true },
      AUTH_A,
    );
    assert.equal(r.status, 200);
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    const open = r.json.data[0];
    assert.equal(open.recording, true, 'the open result says recording');
    const reqId = open.reqId as string;
    // before the terminal pushes there is no file, so there is no record either (not one whose url answers 404)
    const early = await gw.api('GET', `/strm/record?reqId=${encodeURIComponent(reqId)}`, undefined, AUTH_A);
    assert.deepEqual([early.json.errCode, early.json.data], [0, []], 'nothing listed before media comes');

    const doneBefore = await metric(gw, 'gw_recorder_recordings_ended_total', { outcome: 'done' });
    // the simulator keeps the capture's timestamps at any speed (speed only paces the sending)
    const sent = await runSimulator({ file: fixturePath(cap.file), port: live2013, speed });
    assert.equal(sent.packets, capture(cap.file).packets.length, 'the simulator sent every packet of the capture');
    // the terminal is gone but within its grace: the request is still open, and the test closes it
    const c = await gw.api('POST', '/strm/close', { reqIds: [reqId] }, AUTH_A);
    assert.equal(c.json.errCode, 0, JSON.stringify(c.json));
    await waitFor('the recording to end', async () => (await metric(gw, 'gw_recorder_recordings_ended_total', { outcome: 'done' })) > doneBefore, 15_000, 50);

    const q = await gw.api('GET', `/strm/record?reqId=${encodeURIComponent(reqId)}`, undefined, AUTH_A);
    assert.equal(q.status, 200);
    assert.equal(q.json.errCode, 0, JSON.stringify(q.json));
    assert.equal(q.json.data.length, 1, `one record for ${reqId}: ${JSON.stringify(q.json.data)}`);
    return { reqId, av: q.json.data[0], openedAt };
  }

  /** The record's file on disk under the store root, checked against its StoredAv. */
  function storedFile(av: Record<string, any>): string {
    const file = path.join(storeRoot, ...String(av.path).split('/'));
    assert.ok(fs.existsSync(file), `the record's file ${file} exists under the store root`);
    return file;
  }

  let xun: { reqId: string; av: Record<string, any>; openedAt: number; whole: Buffer };

  it("xunilcyl (H.264 704x576, video only) pushed at 10x: one record, StoredAv right, file decodes for the capture's duration", async () => {
    const cap = CAPTURES.find((c) => c.file.includes('xunilcyl'))!;
    const packets = capture(cap.file).packets;
    const want = expectedFrom(packets);
    assert.equal(want.video, framesFromFirstI(packets), 'reference frame count');
    const rec = await recordCapture(cap, 10);
    const { reqId, av } = rec;
    const normSim = cap.sim.replace(/^0+/, '');

    // StoredAv fields
    assert.equal(av.reqId, reqId);
    assert.equal(av.appId, 'A');
    assert.equal(av.simNo, normSim);
    assert.equal(av.chan, cap.channel);
    assert.equal(av.live, true);
    assert.equal(av.ext, 'flv');
    assert.equal(av.mediaTyp, 'v', 'video only was pushed: mediaTyp v');
    assert.match(av.path, new RegExp(`^\\d{4}/\\d{2}/${normSim}/${reqId}\\.flv$`));
    assert.match(av.reqTm, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
    assert.ok(Math.abs(Date.parse(av.reqTm) - rec.openedAt) < 5000, `reqTm ${av.reqTm} is the time of the open`);
    assert.equal(av.url, `${gw.baseUrl}/strm/record/file/${av.path}`);
    const file = storedFile(av);
    const size = fs.statSync(file).size;
    assert.equal(av.sz, size, 'sz is the file size');

    // the closed notice points at the same file
    const closed = await waitFor('the closed notice', () => notices.find((n) => n.payload.reqId === reqId && n.payload.act === 'closed'));
    assert.equal(closed.payload.playedAvDumpUrl, av.url, 'the closed notice carries the record url');

    // by time range (the request time lies inside it), and the same StoredAv comes back
    const from = utcText(new Date(rec.openedAt - 60_000));
    const to = utcText(new Date(Date.now() + 60_000));
    const byRange = await gw.api('GET', `/strm/record?startTm=${encodeURIComponent(from)}&endTm=${encodeURIComponent(to)}&__limit=100`, undefined, AUTH_A);
    assert.equal(byRange.json.errCode, 0, JSON.stringify(byRange.json));
    const listed = (byRange.json.data as Array<Record<string, any>>).filter((x) => x.reqId === reqId);
    assert.deepEqual(listed, [av], 'the time-range query lists the record once, with the same fields');
    // a range that ends before the request does not list it
    const before = await gw.api(
      'GET',
      `/strm/record?startTm=${encodeURIComponent(utcText(new Date(rec.openedAt - 7_200_000)))}&endTm=${encodeURIComponent(utcText(new Date(rec.openedAt - 3_600_000)))}`,
      undefined,
      AUTH_A,
    );
    assert.equal(before.json.errCode, 0);
    assert.ok(!(before.json.data as Array<{ reqId: string }>).some((x) => x.reqId === reqId), 'not listed for a range before it');

    // the download, with A's Basic credentials
    const dl = await get(av.url, AUTH_A);
    assert.equal(dl.status, 200);
    assert.equal(dl.headers['content-type'], 'video/x-flv');
    assert.equal(dl.headers['accept-ranges'], 'bytes');
    assert.equal(Number(dl.headers['content-length']), size);
    assert.equal(dl.body.length, av.sz, 'the download is sz bytes');
    assert.ok(dl.body.equals(fs.readFileSync(file)), 'the download is the stored file');

    // what the recording holds: every frame from the first keyframe, timeline from 0 following the capture's
    const flv = parseFlv(dl.body);
    assert.equal(flv.trailing, 0);
    const video = codedVideo(flv.tags);
    assert.equal(video.length, want.video, 'every frame published from the first keyframe is recorded');
    assert.equal(video[0].keyframe, true, 'the file starts at a keyframe');
    assert.equal(video[0].timestamp, 0, "the file's timeline starts at 0");
    assert.equal(firstNonMonotonic(video, true), -1, 'video timestamps strictly increase');
    assert.deepEqual(
      video.map((t) => t.timestamp),
      want.videoDts.map((d) => d - want.videoDts[0]),
      'each frame keeps its place on the timeline',
    );
    assert.equal(codedAudio(flv.tags).length, 0, 'no audio was pushed, none recorded');

    const p = ffprobe(dl.body, 'flv');
    assert.deepEqual([p.codec, p.width, p.height], ['h264', cap.width, cap.height], 'codec and resolution');
    assert.equal(p.frames, want.video, 'ffprobe decodes every recorded frame');
    assert.equal(p.errors, '', 'without a decoder complaint');
    assert.equal(p.audio, undefined, 'no audio stream');
    const expectSec = captureVideoSeconds(packets);
    assert.ok(Math.abs(p.duration - expectSec) <= expectSec * 0.05, `duration ${p.duration} s within 5 % of the capture's ${expectSec.toFixed(3)} s`);
    xun = { ...rec, whole: dl.body };
  });

  it('byte ranges of the record answer 206 with Content-Range and exactly that slice of the file', async () => {
    assert.ok(xun, 'the recording test ran first');
    const { av, whole } = xun;
    const size = whole.length;
    assert.ok(size > 100_000, `a sizeable file (${size} bytes)`);
    const mid = Math.floor(size / 2) - 1000;
    for (const [first, last] of [
      [0, 1023],
      [mid, mid + 4095],
      [size - 1, size - 1],
    ] as const) {
      const r = await get(av.url, AUTH_A, { range: `bytes=${first}-${last}` });
      assert.equal(r.status, 206, `bytes=${first}-${last}`);
      assert.equal(r.headers['content-range'], `bytes ${first}-${last}/${size}`);
      assert.equal(Number(r.headers['content-length']), last - first + 1);
      assert.ok(r.body.equals(whole.subarray(first, last + 1)), `bytes ${first}-${last} equal that slice of the full download`);
    }
    // an open-ended range from the middle: the rest of the file
    const rest = await get(av.url, AUTH_A, { range: `bytes=${mid}-` });
    assert.equal(rest.status, 206);
    assert.equal(rest.headers['content-range'], `bytes ${mid}-${size - 1}/${size}`);
    assert.ok(rest.body.equals(whole.subarray(mid)));
    // past the end
    const beyond = await get(av.url, AUTH_A, { range: `bytes=${size}-` });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${size}`);
    // without credentials
    assert.equal((await get(av.url, null)).status, 401);
  });

  it('another application of the site gets data: [] for the reqId and 404 for the url', async () => {
    assert.ok(xun, 'the recording test ran first');
    const { reqId, av } = xun;
    const q = await gw.api('GET', `/strm/record?reqId=${encodeURIComponent(reqId)}`, undefined, AUTH_B);
    assert.equal(q.status, 200);
    assert.equal(q.json.errCode, 0, JSON.stringify(q.json));
    assert.deepEqual(q.json.data, [], "B sees no record of A's request");
    const range = await gw.api('GET', `/strm/record?startTm=${encodeURIComponent(utcText(new Date(xun.openedAt - 60_000)))}&__limit=2000`, undefined, AUTH_B);
    assert.equal(range.json.errCode, 0);
    assert.ok(!(range.json.data as Array<{ reqId: string }>).some((x) => x.reqId === reqId), 'nor by time range');
    const dl = await get(av.url, AUTH_B);
    assert.equal(dl.status, 404, "B cannot download A's file");
    assert.equal(JSON.parse(dl.body.toString()).errCode, -8);
    const ranged = await get(av.url, AUTH_B, { range: 'bytes=0-1023' });
    assert.equal(ranged.status, 404, 'nor a range of it');
    // and A still can
    assert.equal((await get(av.url, AUTH_A, { range: 'bytes=0-15' })).status, 206);
  });

  it('gojt808 (H.264 720x576 + G.711A) pushed unpaced: mediaTyp av, the file keeps the G.711A track', async () => {
    const cap = CAPTURES.find((c) => c.audio)!;
    const packets = capture(cap.file).packets;
    const want = expectedFrom(packets);
    const { av } = await recordCapture(cap, 0);
    assert.equal(av.mediaTyp, 'av', 'audio and video were pushed: mediaTyp av');
    const file = storedFile(av);
    assert.equal(av.sz, fs.statSync(file).size, 'sz is the file size');
    const dl = await get(av.url, AUTH_A);
    assert.equal(dl.status, 200);
    assert.equal(dl.body.length, av.sz);
    const flv = parseFlv(dl.body);
    assert.equal(codedVideo(flv.tags).length, want.video, 'every video frame from the first keyframe');
    const audio = codedAudio(flv.tags);
    assert.equal(audio.length, want.audioAfterVideo, 'every audio frame after the first keyframe is recorded');
    assert.ok(
      audio.every((t) => t.codec === 'g711a'),
      'as G.711A',
    );
    const p = ffprobe(dl.body, 'flv');
    assert.deepEqual([p.codec, p.width, p.height], ['h264', cap.width, cap.height]);
    assert.equal(p.frames, want.video);
    assert.deepEqual(p.audio, { codec: 'pcm_alaw', sampleRate: 8000 });
    assert.equal(p.errors, '');
    const expectSec = captureVideoSeconds(packets);
    assert.ok(Math.abs(p.duration - expectSec) <= expectSec * 0.05, `duration ${p.duration} s within 5 % of the capture's ${expectSec.toFixed(3)} s`);
  });
});
