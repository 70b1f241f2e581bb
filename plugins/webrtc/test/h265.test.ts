/**
 * H.265 over WebRTC: offered where the client takes it (libdatachannel as the client; Chromium 156 headless offers
 * none), refused with its reason where it does not. The stream is libx265's clip (rtsp-out's test helper).
 */
import assert from 'node:assert/strict';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { waitFor } from '../../../test/e2e/helpers';
import { h265Clip } from '../../rtsp-out/test/helpers';
import webrtc from '../index';
import { clientOffer, type Client } from './client';
import { freeUdpPort } from './whep-page';

describe('webrtc: H.265', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const clients: Client[] = [];

  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'webrtc', def: webrtc as never, config: { udpPort: await freeUdpPort(), host: '127.0.0.1', publicHost: '127.0.0.1' } },
      ],
    });
  });
  after(async () => {
    for (const c of clients) c.pc.close();
    await gw?.stop();
  });

  it('answers an offer with H.265 in H.265 and sends it; refuses one without, saying why', async () => {
    const o = await gw.openStream({ simNo: '13900000301', chanId: 1, scheme: 'webrtc', dataTyp: 1 });
    const pub = gw.publish(o.streamName, h265Clip(), { loop: true });
    try {
      await gw.waitReady(o.reqId);
      const h265 = await clientOffer('h265');
      const h264 = await clientOffer('h264');
      clients.push(h265, h264);
      const post = (sdp: string) => fetch(o.playUrl, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: sdp });
      const refused = await post(h264.offer);
      assert.equal(refused.status, 400);
      assert.match(await refused.text(), /the stream is H\.265 and the offer has no H\.265/);
      const r = await post(h265.offer);
      const answer = await r.text();
      assert.equal(r.status, 201, answer);
      assert.match(answer, /a=rtpmap:49 H265\/90000/);
      assert.doesNotMatch(answer, /H264/);
      h265.pc.setRemoteDescription(answer, 'answer');
      await waitFor('H.265 RTP at the client', () => h265.packets() > 50, 15_000, 50);
    } finally {
      pub.stop();
    }
  });
});
