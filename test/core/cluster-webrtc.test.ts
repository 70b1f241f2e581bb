/**
 * WebRTC (WHEP) on a gateway with two workers (the real process): each worker binds its own muxed UDP port
 * (udpPort + its index); an offer POSTed on whichever worker the connection lands on reaches the stream's owner
 * (the path names the stream), whose answer names its own port, and media flows from it.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import { clientOffer, type Client } from '../../plugins/webrtc/test/client';
import { simsOfWorkers, startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';
import { TcpTerminal, capture, encodeLazily, loopedPackets, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';

/** a port p with p and p + 1 free for UDP on loopback now */
async function freeUdpPair(): Promise<number> {
  for (;;) {
    const a = dgram.createSocket('udp4');
    await new Promise<void>((r) => a.bind(0, '127.0.0.1', r));
    const p = a.address().port;
    const b = dgram.createSocket('udp4');
    const ok = await new Promise<boolean>((r) => {
      b.once('error', () => r(false));
      b.bind(p + 1, '127.0.0.1', () => r(true));
    });
    a.close();
    if (ok) b.close();
    if (ok && p < 65535) return p;
  }
}

describe('WebRTC on a gateway with two workers (real process)', function () {
  this.timeout(120_000);
  let gw: ClusterGateway;
  let base = 0;
  const terminals: TcpTerminal[] = [];
  const clients: Client[] = [];
  const sims = simsOfWorkers(13600136100, 1, 2);
  const opened = new Map<string, { reqId: string; url: string }>();

  before(async () => {
    base = await freeUdpPair();
    gw = await startClusterGateway('cluster-webrtc', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'webrtc', config: { udpPort: base, host: '127.0.0.1', publicHost: '127.0.0.1' } },
    ]);
    for (const sim of sims) {
      const r = await gw.api('POST', '/strm/open', { user: { token: 'tk' }, typ: 'live', simNo: sim, chanId: 1, fmt: 0, scheme: 'webrtc', dataTyp: 1 });
      assert.equal(r.json.errCode, 0, r.text);
      opened.set(sim, { reqId: r.json.data[0].reqId, url: r.json.data[0].playUrl });
      const t = await TcpTerminal.connect(r.json.data[0].port);
      terminals.push(t);
      void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 40), { sim, channel: 1 }), 16, 20).catch(() => undefined);
    }
    for (const o of opened.values()) {
      await waitFor('the stream ready', async () => (await gw.api('GET', `/strm/status?reqId=${o.reqId}`)).json.data[0]?.ready, 30_000, 100);
    }
  });

  after(() => {
    for (const c of clients) c.pc.close();
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
  });

  it("answers each worker's channel from that worker's port, whichever worker took the POST, and media flows", async () => {
    for (const [owner, sim] of sims.entries()) {
      const o = opened.get(sim)!;
      // several POSTs on new connections: the primary spreads them over both workers
      for (let i = 0; i < 3; i++) {
        const c = await clientOffer('h264');
        clients.push(c);
        const r = await fetch(o.url, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Connection: 'close' }, body: c.offer });
        const answer = await r.text();
        assert.equal(r.status, 201, answer);
        assert.match(answer, new RegExp(`a=candidate:1 1 UDP \\d+ 127\\.0\\.0\\.1 ${base + owner} typ host`), `worker ${owner}'s port`);
        c.pc.setRemoteDescription(answer, 'answer');
        await waitFor(`media from worker ${owner}`, () => c.packets() > 50, 15_000, 50);
      }
      const st = (await gw.api('GET', `/strm/status?reqId=${o.reqId}`)).json.data[0];
      assert.equal(st.players, 3);
    }
  });
});
