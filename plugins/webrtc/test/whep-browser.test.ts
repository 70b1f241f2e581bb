/**
 * WHEP play in headless Chromium: the browser's own RTCPeerConnection against the plugin, with the stream's real
 * H.264 (the test kit's clip) published in real time.
 */
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { waitFor } from '../../../test/e2e/helpers';
import webrtc from '../index';
import { freeUdpPort, hearPeak, launchWebrtcBrowser, whepPlay, whepStats } from './whep-page';

describe('webrtc: WHEP play in Chromium', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let browser: Browser;
  const clip = testClip({ seconds: 2, audio: true });

  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'webrtc', def: webrtc as never, config: { udpPort: await freeUdpPort(), host: '127.0.0.1', publicHost: '127.0.0.1' } },
      ],
      captureLogs: true,
    });
    browser = await launchWebrtcBrowser();
  });
  after(async () => {
    await browser?.close();
    await gw?.stop();
  });

  it('plays H.264 at its size: frames decoded, PCMA audio received; the player is counted', async () => {
    const open = await gw.openStream({ simNo: '13900000101', chanId: 1, scheme: 'webrtc' });
    assert.match(open.playUrl, /^http:\/\/127\.0\.0\.1:\d+\/webrtc\/13900000101_1_1\/whep\?reqId=.+&token=test-token$/);
    const pub = gw.publish(open.streamName, clip, { loop: true });
    try {
      await gw.waitReady(open.reqId);
      const { page, status, body } = await whepPlay(browser, open.playUrl);
      assert.equal(status, 201, body);
      const s = await waitFor(
        '100 frames decoded',
        async () => {
          const st = await whepStats(page);
          return st.framesDecoded >= 100 ? st : undefined;
        },
        20_000,
        250,
      );
      assert.equal(`${s.frameWidth}x${s.frameHeight}`, '320x240');
      assert.equal(s.videoCodec, 'video/H264');
      assert.equal(s.audioCodec, 'audio/PCMA');
      assert.ok(s.audioPackets > 50, `audio packets ${s.audioPackets}`);
      // libdatachannel's reporters send an SR a second per track: the browser syncs audio and video on them
      assert.ok(s.senderReports.video >= 1 && s.senderReports.audio >= 1, `sender reports ${JSON.stringify(s.senderReports)}`);
      const st = (await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
      assert.equal(st.players, 1);
      assert.ok(st.bytesOut > 20_000, `bytesOut ${st.bytesOut}`);
      const tone = await hearPeak(page, 1500);
      assert.ok(Math.abs(tone.peakHz - 1000) < 30, `the clip's 1 kHz tone heard at ${tone.peakHz.toFixed(0)} Hz (${tone.peakDb.toFixed(1)} dB)`);
      assert.ok(tone.rms > 0.01, `audible: rms ${tone.rms}`);
      await page.close();
    } finally {
      pub.stop();
    }
  });

  it('glass to glass: a player that joins before the terminal pushes sees each frame within p50 300 ms, p99 500 ms', async () => {
    const open = await gw.openStream({ simNo: '13900000102', chanId: 1, scheme: 'webrtc' });
    const { page, status, body } = await whepPlay(browser, open.playUrl);
    assert.equal(status, 201, body);
    await waitFor('the peer connected', async () => (await whepStats(page)).connection === 'connected', 10_000, 50);
    // the player waits for the stream: it gets it from its first frame, published now, then one every 40 ms
    const t0 = Date.now();
    const pub = gw.publish(open.streamName, clip, { loop: true });
    try {
      await new Promise((r) => setTimeout(r, 6000));
      const s = await whepStats(page);
      const p = s.presented;
      assert.ok(p.length >= 100, `frames presented: ${p.length}`);
      // frame k of the clip is published at t0 + 40 k ms and its RTP timestamp is the first one's + 3600 k
      const lateness = p.map(([rtp, shown]) => shown - (t0 + 40 * Math.round(((rtp - p[0][0]) >>> 0) / 3600))).sort((a, b) => a - b);
      // the first frame shown is the first published (before the second was, 40 ms later), or every figure is off
      assert.ok(lateness[0] >= 0 && p[0][1] - t0 < 40 + lateness[Math.floor(lateness.length / 2)], `first shown ${p[0][1] - t0} ms after t0`);
      const p50 = lateness[Math.floor(lateness.length * 0.5)];
      const p99 = lateness[Math.min(lateness.length - 1, Math.floor(lateness.length * 0.99))];
      console.log(
        `      glass to glass over ${p.length} frames: p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${lateness[lateness.length - 1].toFixed(0)} ms`,
      );
      assert.ok(p50 < 300 && p99 < 500, `p50 ${p50} ms, p99 ${p99} ms`);
      await page.close();
    } finally {
      pub.stop();
    }
  });
});
