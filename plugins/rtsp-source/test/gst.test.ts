/**
 * rtsp-source against an RTSP server we did not write: GStreamer's (gst-rtsp-server), with its own packetisers
 * (rtph264pay, rtph265pay, rtpmp4gpay for AAC, rtppcmapay) and its own Digest authentication. It offers RTP over TCP
 * and UDP: the default transport (auto) must keep to TCP.
 */
import assert from 'node:assert/strict';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { startGstServer, type GstServer } from './support/gst-server';
import { collectVideo, decodeUrl, probeFile, probeUrl } from './support/publisher';
import { metricValue, openRtsp, startGateway, statusOf, assertTracks } from './helpers';

describe("rtsp-source: GStreamer's RTSP server as the camera", function () {
  this.timeout(120_000);
  let gw: TestGateway;
  const servers: GstServer[] = [];
  before(async () => {
    // the default transport: no config key
    gw = await startGateway({ openTimeoutSec: 15 });
  });
  after(async () => {
    await gw?.stop();
    for (const s of servers) await s.stop();
  });

  it("H.264 + AAC behind GStreamer's Digest auth plays as FLV over TCP with the default transport (ffprobe h264 320x240 + aac; ffmpeg decodes it cleanly)", async () => {
    const gst = await startGstServer({ video: 'h264', audio: 'aac', user: 'viewer', pwd: 'gst-Secret-1' });
    servers.push(gst);
    const bad = await openRtsp(gw, '940000000001', { url: `rtsp://127.0.0.1:${gst.port}/cam`, user: 'viewer', pwd: 'not-it' });
    assert.equal(bad.errCode, -3, bad.message);
    assert.match(bad.message, /refused the credentials/);
    const r = await openRtsp(gw, '940000000001', { url: `rtsp://viewer:gst-Secret-1@127.0.0.1:${gst.port}/cam` });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 20_000);
    const st = await statusOf(gw, reqId);
    assertTracks(st, { kind: 'video', codec: 'h264', width: 320, height: 240 }, { kind: 'audio', codec: 'aac', sampleRate: 16000 });
    const p = await probeUrl(String(r.data![0].playUrl));
    assert.equal(p.streams.find((s) => s.codec_type === 'video')?.codec_name, 'h264');
    assert.equal(p.streams.find((s) => s.codec_type === 'audio')?.codec_name, 'aac');
    const d = await decodeUrl(String(r.data![0].playUrl), 2);
    assert.equal(d.errors, '');
    assert.ok(d.frames.video >= 25, `decoded ${d.frames.video} video frames`);
    assert.doesNotMatch(gw.logText(), /gst-Secret-1|not-it/);
    // auto asked TCP first and GStreamer took it: the pull plays interleaved, nothing fell back
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'tcp' }), 1);
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'udp' }), 0);
    assert.equal(await metricValue(gw, 'transports_used_total', { transport: 'tcp', how: 'tried' }), 1);
    assert.equal(await metricValue(gw, 'transport_fallbacks_total'), 0);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });

  it('H.265 + PCMA: the units decode cleanly (ffprobe: hevc 320x240)', async () => {
    const gst = await startGstServer({ video: 'h265', audio: 'pcma' });
    servers.push(gst);
    const r = await openRtsp(gw, '940000000002', { url: `rtsp://127.0.0.1:${gst.port}/cam` });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 20_000);
    const st = await statusOf(gw, reqId);
    assertTracks(st, { kind: 'video', codec: 'h265', width: 320, height: 240 }, { kind: 'audio', codec: 'g711a', sampleRate: 8000 });
    const p = await probeFile(await collectVideo(gw, String(st.stream), 50), 'hevc');
    assert.deepEqual([p.codec, p.width, p.height, p.errors], ['hevc', 320, 240, '']);
    assert.ok(p.frames >= 50, `ffprobe decoded ${p.frames} frames`);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });
});
