/**
 * Transport `auto` (the default) against a camera whose behaviour the test switches: ffmpeg publishing into
 * test/support/test-rtsp-server.ts (the RTP is ffmpeg's), which can answer 461 to a SETUP asking for TCP (as VLC's
 * server and many cameras do) and can accept a UDP SETUP and never send its RTP (a firewall dropping UDP on the
 * way), and counts the SETUPs of each transport it sees. What the gateway chose is read from its metrics and logs.
 */
import assert from 'node:assert/strict';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { publish } from './support/publisher';
import { TestRtspServer } from './support/test-rtsp-server';
import { metricValue, openRtsp, startGateway, until } from './helpers';

describe('rtsp-source: transport auto, fallbacks and the per-host memory', function () {
  this.timeout(90_000);
  let server: TestRtspServer;
  let cam: ReturnType<typeof publish>;
  const gateways: TestGateway[] = [];

  before(async () => {
    server = new TestRtspServer();
    await server.start();
    cam = publish('h264-pcmu', server.publishUrl);
    await server.whenPublishing();
  });
  beforeEach(() => {
    server.refuseTcp = false;
    server.dropUdp = false;
  });
  after(async () => {
    for (const g of gateways) await g.stop();
    await cam?.stop();
    await server?.close();
  });

  /** a gateway with the default transport (no config key) */
  async function gateway(): Promise<TestGateway> {
    const gw = await startGateway({ openTimeoutSec: 15 });
    gateways.push(gw);
    return gw;
  }

  /** opens, waits until the request is ready and video units flow; returns the reqId */
  async function play(gw: TestGateway, simNo: string, rtspSrc: Record<string, unknown> = { url: server.url() }): Promise<string> {
    const r = await openRtsp(gw, simNo, rtspSrc);
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 20_000);
    const stream = gw.bus.get(`${simNo}_1_1`)!;
    const from = stream.stats().videoFrames;
    await until('video units on the bus', () => stream.stats().videoFrames > from + 10);
    return reqId;
  }

  async function closeAll(gw: TestGateway, ...reqIds: string[]): Promise<void> {
    await gw.api('POST', '/strm/close', { reqIds });
    await until('the pulls to stop', () => server.playingReaders === 0);
  }

  it('a camera that refuses TCP (461): the default pulls over UDP, and the next pull of the host goes straight to UDP', async () => {
    const gw = await gateway();
    server.refuseTcp = true;
    const tcp0 = server.stats.tcpSetups;
    const a = await play(gw, '960000000001');
    assert.ok(server.stats.tcpSetups > tcp0, 'TCP was asked first');
    assert.equal(await metricValue(gw, 'transport_fallbacks_total', { from: 'tcp', to: 'udp', reason: 'refused' }), 1);
    assert.equal(await metricValue(gw, 'transports_used_total', { transport: 'udp', how: 'tried' }), 1);
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'udp' }), 1);
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'tcp' }), 0);
    assert.match(gw.logText(), /TCP failed \(461 Unsupported Transport to SETUP\), falling back to UDP/);
    await closeAll(gw, a);

    const tcp1 = server.stats.tcpSetups;
    const udp1 = server.stats.udpSetups;
    const b = await play(gw, '960000000002');
    assert.equal(server.stats.tcpSetups, tcp1, "no second TCP attempt: the host's UDP was remembered");
    assert.ok(server.stats.udpSetups > udp1);
    assert.equal(await metricValue(gw, 'transports_used_total', { transport: 'udp', how: 'remembered' }), 1);
    assert.equal(await metricValue(gw, 'transport_fallbacks_total'), 1, 'no further fallback');
    await closeAll(gw, b);
  });

  it('UDP blocked on the way: a remembered UDP that brings no RTP falls back to TCP, which plays and is remembered', async () => {
    const gw = await gateway();
    // the camera refuses TCP at first: the host's UDP is learnt
    server.refuseTcp = true;
    await closeAll(gw, await play(gw, '960000000003'));
    // then it takes TCP, and a firewall drops its UDP
    server.refuseTcp = false;
    server.dropUdp = true;
    const tcp0 = server.stats.tcpSetups;
    const udp0 = server.stats.udpSetups;
    const a = await play(gw, '960000000004');
    assert.ok(server.stats.udpSetups > udp0, 'the remembered UDP was tried first');
    assert.ok(server.stats.tcpSetups > tcp0, 'then TCP');
    assert.equal(await metricValue(gw, 'transport_fallbacks_total', { from: 'udp', to: 'tcp', reason: 'no_rtp' }), 1);
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'tcp' }), 1);
    assert.match(gw.logText(), /UDP failed \(no RTP within 3 s of PLAY\), falling back to TCP/);
    await closeAll(gw, a);

    const udp1 = server.stats.udpSetups;
    await closeAll(gw, await play(gw, '960000000005'));
    assert.equal(server.stats.udpSetups, udp1, 'no UDP attempt: the forgotten UDP was replaced by TCP');
    assert.equal(await metricValue(gw, 'transports_used_total', { transport: 'tcp', how: 'remembered' }), 1);
  });

  it('TCP refused and UDP silent: the open answers -3 naming both attempts', async () => {
    const gw = await gateway();
    server.refuseTcp = true;
    server.dropUdp = true;
    const r = await openRtsp(gw, '960000000006', { url: server.url() });
    assert.equal(r.errCode, -3, r.message);
    assert.match(r.message, /could not be played: TCP refused \(461 Unsupported Transport to SETUP\), then UDP brought no RTP in 3 s\.$/);
    assert.equal(await metricValue(gw, 'connects_total', { result: 'transport' }), 1);
    assert.equal(await metricValue(gw, 'connects_total', { result: 'no_rtp' }), 1);
    assert.equal((await gw.api('GET', '/strm/status')).json.count, 0, 'no request was left open');
  });

  it('rtspSrc.transport: a bad value answers -7 naming it; a forced tcp answers -3 without trying UDP', async () => {
    const gw = await gateway();
    for (const transport of ['quic', 'TCP', 5, '']) {
      const r = await openRtsp(gw, '960000000007', { url: server.url(), transport });
      assert.equal(r.errCode, -7, `${JSON.stringify(transport)}: ${r.message}`);
      assert.match(r.message, /`rtspSrc\.transport`\. Use auto, tcp or udp\./);
    }
    server.refuseTcp = true;
    const udp0 = server.stats.udpSetups;
    const r = await openRtsp(gw, '960000000007', { url: server.url(), transport: 'tcp' });
    assert.equal(r.errCode, -3, r.message);
    assert.match(r.message, /TCP refused \(461 Unsupported Transport to SETUP\); the open forces tcp \(rtspSrc\.transport\): ask auto instead\./);
    assert.equal(server.stats.udpSetups, udp0, 'no UDP attempt');
    assert.equal(await metricValue(gw, 'transport_fallbacks_total'), 0);
  });

  it('opens of one source with different transports are separate pulls; a channel keeps the transport it is pulled with', async () => {
    const gw = await gateway();
    const plays = server.stats.plays;
    const a = await play(gw, '960000000008');
    const b = await play(gw, '960000000009', { url: server.url(), transport: 'udp' });
    assert.equal(server.stats.plays - plays, 2, 'two pulls of one URL');
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'tcp' }), 1);
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'udp' }), 1);
    assert.equal(await metricValue(gw, 'transports_used_total', { transport: 'udp', how: 'forced' }), 1);
    const c = await openRtsp(gw, '960000000008', { url: server.url(), transport: 'udp' }, 1, 'other');
    assert.equal(c.errCode, -7, c.message);
    assert.match(c.message, /`rtspSrc\.transport`\. The channel is pulled from this source with transport auto/);
    // an explicit auto is the site's default here: the same pull
    const d = await openRtsp(gw, '960000000008', { url: server.url(), transport: 'auto' }, 1, 'other');
    assert.equal(d.errCode, 0, d.message);
    assert.equal(server.stats.plays - plays, 2, 'no third pull');
    await closeAll(gw, a, b, String(d.data![0].reqId));
  });
});
