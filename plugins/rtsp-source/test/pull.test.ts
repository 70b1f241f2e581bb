/**
 * rtsp-source end to end: a camera (ffmpeg publishing into the test RTSP server, so the RTP is ffmpeg's) pulled
 * through POST /strm/open with rtspSrc, played as HTTP-FLV by ffprobe.
 */
import assert from 'node:assert/strict';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { decodeUrl, probeFile, probeUrl, publish } from './support/publisher';
import { TestRtspServer } from './support/test-rtsp-server';
import { openRtsp, startGateway, statusOf, until, assertTracks } from './helpers';

describe('rtsp-source: a camera through the REST API', function () {
  this.timeout(90_000);
  let server: TestRtspServer;
  let cam: ReturnType<typeof publish>;
  let gw: TestGateway;

  before(async () => {
    // the camera's clock is an hour behind: the streams' wall clock must follow its sender reports, not ours
    server = new TestRtspServer({ auth: { scheme: 'digest', user: 'admin', pwd: 's3cr3t-Pa55' }, ntpShiftSec: -3600 });
    await server.start();
    cam = publish('h264-aac', server.publishUrl);
    await server.whenPublishing();
    gw = await startGateway({ keepAliveSec: 1, stallTimeoutSec: 2 }, [{ name: 'recorder' }]);
  });
  after(async () => {
    await gw?.stop();
    await cam?.stop();
    await server?.close();
  });

  it('plays an H.264 + AAC camera behind Digest auth as FLV (ffprobe: h264 320x240, aac)', async () => {
    const r = await openRtsp(gw, '900000000001', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(r.errCode, 0, r.message);
    const res = r.data![0];
    await gw.waitReady(String(res.reqId), 15_000);
    const st = await statusOf(gw, String(res.reqId));
    assert.equal(st.stream, '900000000001_1_1');
    const p = await probeUrl(String(res.playUrl));
    const v = p.streams.find((s) => s.codec_type === 'video');
    const a = p.streams.find((s) => s.codec_type === 'audio');
    assert.ok(v, `ffprobe found no video: ${JSON.stringify(p)}`);
    assert.equal(v.codec_name, 'h264');
    assert.equal(v.width, 320);
    assert.equal(v.height, 240);
    assert.ok(a, `ffprobe found no audio: ${JSON.stringify(p)}`);
    assert.equal(a.codec_name, 'aac');
    // the track as the bus has it (FLV's tag header can only say 5.5/11/22/44 kHz; the AudioSpecificConfig says 16)
    assertTracks(st, { kind: 'video', codec: 'h264', width: 320, height: 240 }, { kind: 'audio', codec: 'aac', sampleRate: 16000 });
    assert.ok(server.stats.authFailures >= 1, 'the server challenged the first request');
    // two seconds of both tracks decode without a single error (a wrong AU split would not)
    const d = await decodeUrl(String(res.playUrl), 2);
    assert.equal(d.errors, '');
    assert.ok(d.frames.video >= 25, `decoded ${d.frames.video} video frames`);
    await gw.api('POST', '/strm/close', { reqIds: [res.reqId] });
  });

  it('shares one pull among opens of the same URL, and stops it with the last stream', async () => {
    const plays = server.stats.plays;
    await until('the previous pull to stop', () => server.playingReaders === 0);
    const src = { url: `rtsp://admin:s3cr3t-Pa55@127.0.0.1:${server.port}/cam` };
    const a = await openRtsp(gw, '900000000002', src);
    const b = await openRtsp(gw, '900000000002', src, 1, 'other');
    const c = await openRtsp(gw, '900000000003', src);
    for (const x of [a, b, c]) assert.equal(x.errCode, 0, x.message);
    assert.equal(a.data![0].ctrl, true);
    assert.equal(b.data![0].ctrl, false);
    await gw.waitReady(String(a.data![0].reqId), 15_000);
    await gw.waitReady(String(c.data![0].reqId), 15_000);
    assert.equal(server.stats.plays - plays, 1, 'one PLAY for three opens on two keys');
    assert.equal(server.playingReaders, 1);
    await gw.api('POST', '/strm/close', { reqIds: [a.data![0].reqId, b.data![0].reqId] });
    const cst = await statusOf(gw, String(c.data![0].reqId));
    assert.equal(cst.ready, true);
    assert.equal(server.playingReaders, 1, 'the pull goes on for the other stream');
    await gw.api('POST', '/strm/close', { reqIds: [c.data![0].reqId] });
    await until('TEARDOWN of the last pull', () => server.playingReaders === 0);
  });

  it('answers -7 naming rtspSrc.url when the key is fed by another URL', async () => {
    const a = await openRtsp(gw, '900000000004', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(a.errCode, 0, a.message);
    const b = await openRtsp(gw, '900000000004', { url: `${server.url()}?other=1`, user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(b.errCode, -7);
    assert.match(b.message, /rtspSrc\.url/);
    await gw.api('POST', '/strm/close', { reqIds: [a.data![0].reqId] });
  });

  it('reconnects after the camera drops its readers, and the stream goes on', async () => {
    const r = await openRtsp(gw, '900000000005', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 15_000);
    const stream = gw.bus.get('900000000005_1_1')!;
    const epoch = stream.epoch;
    const plays = server.stats.plays;
    server.dropReaders();
    await until('a new PLAY', () => server.stats.plays > plays);
    const before = stream.stats().videoFrames;
    await until('video after the reconnect', () => stream.stats().videoFrames > before + 10);
    assert.ok(stream.epoch > epoch, 'a new publisher continues the stream');
    const st = await statusOf(gw, reqId);
    assert.equal(st.ready, true, 'the request stayed open');
    // keepAliveSec 1: the camera lists GET_PARAMETER, so that is what keeps the session
    await until('a GET_PARAMETER keep-alive', () => server.stats.keepAlives > 0);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });

  it('starts again when the camera keeps the connection but sends no media (stallTimeoutSec)', async () => {
    const r = await openRtsp(gw, '900000000009', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 15_000);
    const plays = server.stats.plays;
    const keepAlives = server.stats.keepAlives;
    server.frozen = true;
    try {
      // keep-alives are answered meanwhile: they must not count as the camera being alive
      await until('a keep-alive while frozen', () => server.stats.keepAlives > keepAlives);
      await until('a new PLAY after the stall', () => server.stats.plays > plays);
    } finally {
      server.frozen = false;
    }
    const stream = gw.bus.get('900000000009_1_1')!;
    const before = stream.stats().videoFrames;
    await until('video after the stall', () => stream.stats().videoFrames > before + 10);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });

  it('counts and skips malformed RTSP and RTP from the camera without crashing', async () => {
    const r = await openRtsp(gw, '900000000006', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 15_000);
    for (let i = 0; i < 5; i++) server.sendGarbage();
    const stream = gw.bus.get('900000000006_1_1')!;
    const before = stream.stats().videoFrames;
    await until('video after the garbage', () => stream.stats().videoFrames > before + 10);
    const metrics = await (await fetch(`${gw.baseUrl}/metrics`)).text();
    const malformed = [...metrics.matchAll(/^gw_rtsp_source_malformed_total\{what="(\w+)"\} (\d+)/gm)].map((m) => `${m[1]}=${m[2]}`);
    assert.ok(
      malformed.some((x) => x.startsWith('rtsp=')),
      `rtsp junk counted: ${malformed}`,
    );
    assert.ok(
      malformed.some((x) => x.startsWith('interleaved=')),
      `unknown channel counted: ${malformed}`,
    );
    assert.ok(
      malformed.some((x) => x.startsWith('rtcp=')),
      `bad RTCP counted: ${malformed}`,
    );
    const bad = Number(/^gw_rtsp_source_rtp_bad_packets (\d+)/m.exec(metrics)?.[1] ?? 0);
    const payload = Number(/^gw_rtsp_source_payload_malformed (\d+)/m.exec(metrics)?.[1] ?? 0);
    assert.ok(bad + payload > 0, 'broken RTP counted');
    assert.match(gw.logText(), /bad input from the RTSP source skipped/);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });

  it("anchors the stream's wall clock to the camera's RTCP sender reports", async () => {
    const r = await openRtsp(gw, '900000000008', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 15_000);
    const stream = gw.bus.get('900000000008_1_1')!;
    let lastDts = 0;
    const sub = stream.subscribe({
      write: (u) => {
        lastDts = u.dts;
      },
    });
    try {
      // ffmpeg sends a sender report about every 5 s; the hour shows once one arrived
      await until(
        'the wall clock of the sender reports',
        () => {
          const wall = stream.wallClock(lastDts);
          return wall !== undefined && Math.abs(Date.now() - 3_600_000 - wall) < 60_000;
        },
        20_000,
      );
    } finally {
      sub.close();
    }
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });

  it('records a camera like a terminal (record: true): catalog mediaTyp av, the file decodes (ffprobe: h264 320x240)', async () => {
    const r = await openRtsp(gw, '900000000007', { url: server.url(), user: 'admin', pwd: 's3cr3t-Pa55' }, 1, 'tok', { record: true });
    assert.equal(r.errCode, 0, r.message);
    assert.equal(r.data![0].recording, true);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 15_000);
    const stream = gw.bus.get('900000000007_1_1')!;
    const from = stream.stats().videoFrames;
    await until('two seconds of video', () => stream.stats().videoFrames >= from + 50);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
    let av: Record<string, unknown> | undefined;
    await until('the record in the catalog with its size', async () => {
      const q = await gw.api('GET', `/strm/record?reqId=${encodeURIComponent(reqId)}`);
      av = q.json.data?.[0];
      return !!av && Number(av.sz) > 0 && av.mediaTyp === 'av';
    });
    const file = await fetch(String(av!.url), { headers: { Authorization: `Basic ${Buffer.from('demo:demo').toString('base64')}` } });
    assert.equal(file.status, 200);
    const p = await probeFile(Buffer.from(await file.arrayBuffer()), 'flv');
    assert.equal(p.codec, 'h264');
    assert.equal(p.width, 320);
    assert.ok(p.frames >= 40, `ffprobe decoded ${p.frames} frames of the record`);
    assert.equal(p.errors, '');
  });

  it('never logs the password', () => {
    assert.ok(gw.logText().length > 0);
    assert.doesNotMatch(gw.logText(), /s3cr3t-Pa55/);
  });
});
