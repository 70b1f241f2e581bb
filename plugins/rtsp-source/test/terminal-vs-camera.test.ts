/**
 * A channel fed by an RTSP pull belongs to the camera: a terminal pushing JT/T 1078 with the same SIM and channel
 * (a misconfigured vehicle, or someone trying) must not take the stream over. Its packets count as unmatched.
 */
import assert from 'node:assert/strict';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { TcpTerminal, capture, encodeLazily, loopedPackets } from '../../../test/e2e/helpers';
import { publish } from './support/publisher';
import { TestRtspServer } from './support/test-rtsp-server';
import { openRtsp, startGateway, until } from './helpers';

describe("rtsp-source: a terminal pushing onto a camera's channel", function () {
  this.timeout(90_000);
  let server: TestRtspServer;
  let cam: ReturnType<typeof publish>;
  let gw: TestGateway;

  before(async () => {
    server = new TestRtspServer({});
    await server.start();
    cam = publish('h264-aac', server.publishUrl);
    await server.whenPublishing();
    gw = await startGateway({}, [{ name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } }]);
  });
  after(async () => {
    await gw?.stop();
    await cam?.stop();
    await server?.close();
  });

  it("the camera keeps the stream; the terminal's packets are counted as unmatched and published nowhere", async () => {
    const sim = '013800138000';
    const r = await openRtsp(gw, sim, { url: server.url() });
    assert.equal(r.errCode, 0, r.message);
    await gw.waitReady(String(r.data![0].reqId), 15_000);
    const stream = gw.bus.get('13800138000_1_1')!;
    const videoCodecs = new Set<string>();
    const sizes = new Set<string>();
    const sub = stream.subscribe({
      write: (u) => {
        if (u.kind === 'video') videoCodecs.add(u.codec);
      },
      tracks: (ts) => {
        for (const t of ts) if (t.kind === 'video') sizes.add(`${(t as { width?: number }).width}x${(t as { height?: number }).height}`);
      },
    });
    const term = await TcpTerminal.connect(gw.ports['jt1078-ingest.livePort2013']);
    // the glaciall capture is 352x288 H.264: were it published, the stream's video track would change size
    await term.send(encodeLazily(loopedPackets(capture('jt1078/glaciall-cif-h264-2013.bin'), 2), { sim, channel: 1 }), 32, 5);
    const metric = async () => {
      const text = String((await gw.api('GET', '/metrics', undefined, null)).json);
      return Number(/^gw_jt1078_ingest_unmatched_packets_total\{[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    await until("the terminal's packets counted as unmatched", async () => (await metric()) > 100);
    assert.deepEqual([...sizes], ['320x240'], "only the camera's track");
    assert.deepEqual([...videoCodecs], ['h264']);
    sub.close();
    await term.end();
    await gw.api('POST', '/strm/close', { reqIds: [r.data![0].reqId] });
  });
});

describe('rtsp-source: allowHosts', function () {
  this.timeout(60_000);

  it('refuses a source whose host is not listed (-7 naming rtspSrc.url) without connecting; a listed one plays', async () => {
    const server = new TestRtspServer({});
    await server.start();
    const cam = publish('h264-aac', server.publishUrl);
    await server.whenPublishing();
    const gw = await startGateway({ allowHosts: ['10.20.0.0/16', 'cam.example.com', '*.depot.example', '127.0.0.1'] });
    try {
      const connects = server.stats.plays;
      for (const url of [`rtsp://127.0.0.2:${server.port}/cam`, 'rtsp://192.168.1.10/cam', 'rtsp://evil.example.com/cam', 'rtsp://[::1]:554/cam']) {
        const r = await openRtsp(gw, '900000000050', { url });
        assert.equal(r.errCode, -7, `${url}: ${r.message}`);
        assert.match(r.message, /`rtspSrc\.url`.*allowHosts/);
      }
      assert.equal(server.stats.plays, connects, 'nothing was pulled');
      const ok = await openRtsp(gw, '900000000051', { url: server.url() });
      assert.equal(ok.errCode, 0, ok.message);
      await gw.waitReady(String(ok.data![0].reqId), 15_000);
      await gw.api('POST', '/strm/close', { reqIds: [ok.data![0].reqId] });
    } finally {
      await gw.stop();
      await cam.stop();
      await server.close();
    }
    await assert.rejects(startGateway({ allowHosts: ['10.0.0.0/99'] }), /allowHosts\[0\]/);
    await assert.rejects(startGateway({ allowHosts: ['http://x'] }), /allowHosts\[0\]: 'http:\/\/x' is not/);
  });
});
