/**
 * WHEP play in headless Chromium: the browser's own RTCPeerConnection against the plugin, with the stream's real
 * H.264 (the test kit's clip) published in real time.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import type { Browser } from 'playwright-core';
import { startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { waitFor } from '../../../test/e2e/helpers';
import webrtc from '../index';
import { launchWebrtcBrowser, whepPlay, whepStats } from './whep-page';

/** a UDP port free now on loopback */
export async function freeUdpPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

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
      const st = (await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
      assert.equal(st.players, 1);
      assert.ok(st.bytesOut > 20_000, `bytesOut ${st.bytesOut}`);
      await page.close();
    } finally {
      pub.stop();
    }
  });
});
