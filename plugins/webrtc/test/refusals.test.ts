/**
 * What the WHEP endpoint does with bad input and with sessions that never connect: each refusal is a 4xx with its
 * reason (and a log line) before any peer connection is made, and a session whose ICE never completes is freed
 * within its timeout, its player gone. Offers come from libdatachannel acting as a client (a real WebRTC offer).
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import { startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { waitFor } from '../../../test/e2e/helpers';
import webrtc from '../index';
import { clientOffer, type Client } from './client';
import { freeUdpPort } from './whep-page';

async function post(url: string, body: string, type = 'application/sdp'): Promise<{ status: number; text: string; location: string | null; headers: Headers }> {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': type }, body });
  return { status: r.status, text: await r.text(), location: r.headers.get('location'), headers: r.headers };
}

describe('webrtc: refusals and sessions that go away', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  const clients: Client[] = [];
  const clip = testClip({ seconds: 2, audio: true });

  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        {
          name: 'webrtc',
          def: webrtc as never,
          config: { udpPort: await freeUdpPort(), host: '127.0.0.1', publicHost: '127.0.0.1', connectTimeoutMs: 1500, maxOfferBytes: 8192 },
        },
      ],
      captureLogs: true,
    });
  });
  after(async () => {
    for (const c of clients) c.pc.close();
    await gw?.stop();
  });

  const refusals = () => gw.logs.filter((l) => l.msg === 'WebRTC offer refused');
  const sessions = async (): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${gw.ports['gateway.httpPort']}/metrics`)).text();
    return Number(/^gw_webrtc_sessions (\d+)/m.exec(text)?.[1] ?? 'NaN');
  };

  it('refuses garbage, a non-WebRTC SDP, an offer without H.264, a wrong token, a wrong type and a huge body, each with its reason', async () => {
    const open = await gw.openStream({ simNo: '13900000201', chanId: 1, scheme: 'webrtc' });
    const good = await clientOffer('h264');
    const vp8 = await clientOffer('vp8');
    clients.push(good, vp8);
    const cases: Array<[string, Promise<{ status: number; text: string }>, number, RegExp]> = [
      ['garbage', post(open.playUrl, 'hello\x00\xff world'), 400, /bad offer: not an SDP offer/],
      [
        'SDP without ICE or DTLS',
        post(open.playUrl, 'v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=video 9 RTP/AVP 96\r\na=mid:0\r\na=rtpmap:96 H264/90000\r\n'),
        400,
        /no ICE credentials/,
      ],
      ['no H.264', post(open.playUrl, vp8.offer), 400, /no H\.264 with packetization-mode=1/],
      ['wrong token', post(open.playUrl.replace('token=test-token', 'token=nope'), good.offer), 401, /unauthorized/],
      ['unknown reqId', post(open.playUrl.replace(/reqId=[^&]+/, 'reqId=AAAAAAAAAAAAAAAAAAAAAA'), good.offer), 401, /unauthorized/],
      ['JSON', post(open.playUrl, '{"sdp":"x"}', 'application/json'), 415, /application\/sdp/],
      ['a huge body', post(open.playUrl, `${good.offer}a=x-pad:${'x'.repeat(9000)}\r\n`), 413, /over 8192 bytes/],
      ['not a play URL', post(open.playUrl.replace('/whep?', '/other?'), good.offer), 404, /not found/],
    ];
    for (const [what, p, status, reason] of cases) {
      const r = await p;
      assert.equal(r.status, status, `${what}: ${r.text}`);
      assert.match(r.text, reason, what);
    }
    assert.ok(refusals().length >= 6, 'each refusal logged');
    assert.equal(await sessions(), 0, 'no peer connection left behind');
    const st = (await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
    assert.equal(st.players, 0);
    // a preflight and a trickle PATCH
    const pre = await fetch(open.playUrl, { method: 'OPTIONS' });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.equal((await fetch(open.playUrl, { method: 'PATCH', body: 'a=candidate' })).status, 405);
  });

  it('a session whose ICE never completes is freed within its timeout, its player with it', async () => {
    const open = await gw.openStream({ simNo: '13900000202', chanId: 1, scheme: 'webrtc' });
    const c = await clientOffer('h264');
    clients.push(c);
    const r = await post(open.playUrl, c.offer);
    assert.equal(r.status, 201, r.text);
    assert.match(r.text, /a=candidate:1 1 UDP \d+ 127\.0\.0\.1 \d+ typ host/);
    assert.equal(await sessions(), 1);
    // the client never applies the answer: no ICE
    assert.equal((await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0].players, 1);
    const t = Date.now();
    await waitFor('the session freed', async () => (await sessions()) === 0, 5000, 100);
    const waited = Date.now() - t;
    assert.equal((await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0].players, 0);
    assert.ok(
      gw.logs.some((l) => l.msg === 'player stopped' && l.reqId === open.reqId),
      `the player's end logged (freed after ${waited} ms)`,
    );
  });

  it('DELETE of the session resource and the request closing both end the session', async () => {
    const open = await gw.openStream({ simNo: '13900000203', chanId: 1, scheme: 'webrtc' });
    const pub = gw.publish(open.streamName, clip, { loop: true });
    try {
      await gw.waitReady(open.reqId);
      const base = new URL(open.playUrl).origin;
      for (const end of ['DELETE', 'close'] as const) {
        const c = await clientOffer('h264');
        clients.push(c);
        const r = await post(open.playUrl, c.offer);
        assert.equal(r.status, 201, r.text);
        assert.match(r.location ?? '', /^\/webrtc\/13900000203_1_1\/whep\/[A-Za-z0-9_-]{22}$/);
        c.pc.setRemoteDescription(r.text, 'answer');
        await waitFor('media at the client', () => c.packets() > 50, 10_000, 50);
        if (end === 'DELETE') {
          assert.equal((await fetch(`${base}${r.location!}x`, { method: 'DELETE' })).status, 404, 'an unknown session');
          assert.equal((await fetch(`${base}${r.location!}`, { method: 'DELETE' })).status, 200);
        } else await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
        await waitFor(`the session gone after ${end}`, async () => (await sessions()) === 0, 5000, 50);
        const before = c.packets();
        await new Promise((res) => setTimeout(res, 300));
        assert.ok(c.packets() - before < 10, `no more media after ${end}: ${c.packets() - before} packets`);
      }
    } finally {
      pub.stop();
    }
  });

  it('a UDP port already taken fails boot, naming the key', async () => {
    const taken = dgram.createSocket('udp4');
    await new Promise<void>((r) => taken.bind(0, '127.0.0.1', r));
    try {
      const port = taken.address().port;
      const stub = stubMediaPlugin();
      await assert.rejects(
        startTestGateway({
          plugins: [
            { name: stub.name, def: stub.def },
            { name: 'webrtc', def: webrtc as never, config: { udpPort: port, host: '127.0.0.1', publicHost: '127.0.0.1' } },
          ],
        }),
        new RegExp(`config key udpPort: port ${port} on 127\\.0\\.0\\.1 is already in use \\(UDP\\)`),
      );
    } finally {
      taken.close();
    }
  });
});
