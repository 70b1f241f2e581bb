/**
 * The token check once per connection (play-verdicts.ts), on a real gateway over real keep-alive connections: a
 * connection's later fetches of the same play skip the digests (counted), a wrong token or another request on it
 * is checked in full, and a request closed mid-connection is refused at once.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { resolveUri, startHlsGateway, waitPlaylist } from './helpers';

/** GET over `agent`; the local port says which connection carried it */
function getOn(agent: http.Agent, url: string): Promise<{ status: number; localPort: number }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      const localPort = res.socket.localPort ?? -1;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, localPort }));
    });
    req.on('error', reject);
  });
}

async function keptCount(gw: TestGateway): Promise<number> {
  const text = await (await fetch(gw.baseUrl + '/metrics')).text();
  const m = /^gw_hls_out_fetches_verdict_kept_total (\d+)/m.exec(text);
  assert.ok(m, 'the counter is exposed');
  return Number(m[1]);
}

const withToken = (url: string, token: string): string => {
  const u = new URL(url);
  u.searchParams.set('token', token);
  return u.toString();
};

describe('hls-out: the token check once per connection', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startHlsGateway();
  });
  after(() => gw.stop());

  it("a connection's later fetches of its play keep its verdict; anything else is checked in full", async () => {
    const open = await gw.openStream({ simNo: '13900000041', chanId: 1, fmt: 1 });
    const other = await gw.openStream({ simNo: '13900000041', chanId: 1, fmt: 1, token: 'other-token' });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2 }), { loop: true });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 1);
      const seg = resolveUri(open.playUrl, p.segments[0].uri);
      const before = await keptCount(gw);
      const first = await getOn(agent, open.playUrl);
      assert.equal(first.status, 200);
      for (let i = 0; i < 5; i++) {
        const r = await getOn(agent, i % 2 ? seg : open.playUrl);
        assert.equal(r.status, 200);
        assert.equal(r.localPort, first.localPort, 'one keep-alive connection');
      }
      assert.equal((await keptCount(gw)) - before, 5, 'the five fetches after the first kept its verdict');

      // a wrong token on the same connection: refused, and the verdict is gone
      assert.equal((await getOn(agent, withToken(open.playUrl, 'wrong'))).status, 401);
      const afterWrong = await keptCount(gw);
      assert.equal((await getOn(agent, open.playUrl)).status, 200, 'the right token is checked again, and passes');
      assert.equal(await keptCount(gw), afterWrong, 'in full: not from a verdict');

      // another request's play on the same connection: checked in full
      assert.equal((await getOn(agent, other.playUrl)).status, 200);
      assert.equal(await keptCount(gw), afterWrong);

      // a closed request is refused at once on a connection that proved it a moment before
      assert.equal((await getOn(agent, open.playUrl)).status, 200);
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
      const closed = await getOn(agent, open.playUrl);
      assert.equal(closed.status, 401);
      assert.equal(closed.localPort, first.localPort, 'on the same connection');
      assert.equal((await getOn(agent, seg)).status, 401);
    } finally {
      agent.destroy();
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [other.reqId] });
    }
  });
});
