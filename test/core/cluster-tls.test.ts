/**
 * Several workers with TLS (a site with tlsCertFile/tlsKeyFile): the primary cannot read a stream name in a TLS
 * handshake, so an HTTPS or WSS player lands on either worker and the one that took it passes the request to the
 * channel's owner. Each worker's channel plays over https (ffprobe, ffmpeg's own TLS) and wss (the ws client,
 * verifying the certificate), and the API answers over HTTPS for both workers' requests.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { AUTH_A, simsOfWorkers, startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';
import { scratchDir } from '../support/paths';
import { httpsRequest, makeCert, probeHttpsVideo, readWss } from '../support/tls-cert';
import { TcpTerminal, capture, encodeLazily, loopedPackets } from '../e2e/helpers';

describe('TLS on a gateway with two workers (real process)', function () {
  this.timeout(120_000);
  let gw: ClusterGateway;
  let dir: string;
  let ca: Buffer;
  const terminals: TcpTerminal[] = [];
  const sims = simsOfWorkers(13300133000, 1, 2);
  const opened: Array<{ reqId: string; wss: string; https: string }> = [];

  before(async () => {
    dir = scratchDir('cluster-tls-cert');
    const files = makeCert(dir);
    ca = fs.readFileSync(files.cert);
    gw = await startClusterGateway('cluster-tls', { workers: 2, tlsCertFile: files.cert, tlsKeyFile: files.key }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
    ]);
    const api = `https://127.0.0.1:${gw.ports['gateway.httpPort']}`;
    for (const sim of sims) {
      const open = async (extra: Record<string, unknown>) => {
        const r = await httpsRequest(`${api}/strm/open`, ca, {
          method: 'POST',
          auth: AUTH_A,
          body: { user: { token: 'tk' }, typ: 'live', simNo: sim, chanId: 1, keepIntv: 600, ...extra },
        });
        const j = JSON.parse(r.body.toString());
        assert.equal(j.errCode, 0, JSON.stringify(j));
        return j.data[0] as { reqId: string; playUrl: string; port: number };
      };
      const w = await open({});
      const h = await open({ scheme: 'https' });
      opened.push({ reqId: w.reqId, wss: w.playUrl, https: h.playUrl });
      const t = await TcpTerminal.connect(w.port);
      terminals.push(t);
      void t.send(encodeLazily(loopedPackets(capture('jt1078/glaciall-cif-h264-2013.bin'), 60), { sim, channel: 1 }), 16, 20).catch(() => undefined);
    }
  });

  after(() => {
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("each worker's channel plays over WSS and HTTPS, whichever worker takes the connection", async () => {
    for (const [i, o] of opened.entries()) {
      assert.match(o.wss, /^wss:\/\//);
      // several players, so both workers take some (the primary deals TLS connections in turn)
      for (let k = 0; k < 2; k++) {
        const flv = await readWss(o.wss, ca);
        assert.ok(flv.length >= 64 * 1024, `worker ${i}'s channel over wss: ${flv.length} bytes`);
        assert.equal(flv.subarray(0, 3).toString('latin1'), 'FLV');
      }
      const { video: v, json } = await probeHttpsVideo(o.https);
      assert.ok(v, json);
      assert.equal(`${v.width}x${v.height}`, '352x288');
    }
    const m = await httpsRequest(`https://127.0.0.1:${gw.ports['gateway.httpPort']}/metrics`, ca);
    assert.match(
      m.body.toString(),
      /^gw_core_forwarded_total\{kind="(request|upgrade)"\} [1-9]/m,
      'players that landed on the other worker were passed to the owner',
    );
  });

  it("the API over HTTPS sees both workers' requests", async () => {
    const st = await httpsRequest(`https://127.0.0.1:${gw.ports['gateway.httpPort']}/strm/status`, ca, { auth: AUTH_A });
    const ids = JSON.parse(st.body.toString()).data as Array<{ reqId: string; bytesIn: number }>;
    for (const o of opened)
      assert.ok(
        ids.some((r) => r.reqId === o.reqId && r.bytesIn > 0),
        JSON.stringify(ids),
      );
  });
});
