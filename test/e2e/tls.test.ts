/**
 * TLS on the gateway's own ports when a site gives a certificate and key. The API, its record
 * URLs and flv-out's players then speak HTTPS/WSS only, and play URLs say so (the spec's default schemes are wss for
 * FLV and https for HLS). Checked with independent clients: Node's https/tls with the certificate as the only CA
 * (so the chain and the SAN are verified), the ws client, and ffprobe reading the https play URL.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import { scratchDir } from '../support/paths';
import { makeCert, httpsRequest as request, probeHttpsVideo, readWss } from '../support/tls-cert';
import { TcpTerminal, capture, encodeLazily, loopedPackets } from './helpers';

const DEMO = `Basic ${Buffer.from('demo:demo').toString('base64')}`;

describe("TLS on the gateway's ports", function () {
  this.timeout(60_000);
  let dir: string;
  let files: { cert: string; key: string };
  let ca: Buffer;
  let gw: TestGateway;
  let api: string;

  before(async () => {
    dir = scratchDir('tls');
    files = makeCert(dir);
    ca = fs.readFileSync(files.cert);
    gw = await startTestGateway({
      gateway: { tlsCertFile: files.cert, tlsKeyFile: files.key },
      plugins: [
        { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
        { name: 'flv-out', config: { port: 0 } },
      ],
    });
    api = `https://127.0.0.1:${gw.ports['gateway.httpPort']}`;
  });
  after(async () => {
    await gw?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the API answers over HTTPS with a certificate that verifies for the address; plain HTTP gets no API', async () => {
    const h = await request(`${api}/healthz`, ca);
    assert.equal(h.status, 200);
    assert.equal(JSON.parse(h.body.toString()).status, 'ok');
    assert.equal(h.headers['x-content-type-options'], 'nosniff');
    // a plain HTTP request on the TLS port is not served (the handshake fails; nothing is answered as the API)
    const plain = await new Promise<string>((resolve) => {
      const s = net.connect(gw.ports['gateway.httpPort'], '127.0.0.1', () => s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
      let got = '';
      s.on('data', (d) => {
        got += d.toString('latin1');
      });
      s.on('close', () => resolve(got));
      s.on('error', () => resolve(got));
    });
    assert.doesNotMatch(plain, /"status":"ok"/);
    // a client that does not trust the certificate is refused by its own TLS check
    await assert.rejects(request(`${api}/healthz`, Buffer.from(fs.readFileSync(makeCert(dir, '127.0.0.2').cert))), /self-signed|unable to verify|certificate/i);
  });

  it("play URLs say wss (the spec's default for fmt 0) and https; both play: ws with TLS, and ffprobe over https", async () => {
    const open = async (extra: Record<string, unknown>) => {
      const r = await request(`${api}/strm/open`, ca, {
        method: 'POST',
        auth: DEMO,
        body: { user: { token: 'tls-token' }, typ: 'live', simNo: '013800138000', chanId: 1, keepIntv: 600, ...extra },
      });
      const j = JSON.parse(r.body.toString());
      assert.equal(j.errCode, 0, JSON.stringify(j));
      return j.data[0] as { reqId: string; playUrl: string };
    };
    const byDefault = await open({});
    assert.match(byDefault.playUrl, new RegExp(`^wss://127\\.0\\.0\\.1:${gw.ports['flv-out.port']}/live/13800138000_1_1\\.flv\\?`));
    const overHttps = await open({ scheme: 'https' });
    assert.match(overHttps.playUrl, /^https:\/\//);
    // plain schemes are not served here: refused with the spec's invalid-parameter answer
    const plain = await request(`${api}/strm/open`, ca, {
      method: 'POST',
      auth: DEMO,
      body: { user: { token: 't' }, typ: 'live', simNo: '013800138000', chanId: 1, scheme: 'ws' },
    });
    const pj = JSON.parse(plain.body.toString());
    assert.equal(pj.errCode, -7);
    assert.match(pj.message, /https, wss/);

    const term = await TcpTerminal.connect(gw.ports['jt1078-ingest.livePort2013']);
    let pushing = true;
    const stream = encodeLazily(loopedPackets(capture('jt1078/glaciall-cif-h264-2013.bin'), 1000), { sim: '013800138000', channel: 1 });
    const push = term.send(
      (function* () {
        for (const b of stream) {
          if (!pushing) return;
          yield b;
        }
      })(),
      16,
      40,
    );
    try {
      // WSS: the ws client verifying the certificate
      const flv = await readWss(byDefault.playUrl, ca);
      assert.ok(flv.length >= 64 * 1024, `over wss: ${flv.length} bytes`);
      assert.equal(flv.subarray(0, 3).toString('latin1'), 'FLV');

      // HTTPS: ffprobe (ffmpeg's own TLS) reads the play URL and finds the video
      const { video: v, json } = await probeHttpsVideo(overHttps.playUrl);
      assert.ok(v, json);
      assert.ok(Number(v.width) > 0 && Number(v.height) > 0);
    } finally {
      pushing = false;
      await push.catch(() => undefined);
      await term.end();
    }
  });

  it("a missing file, half a pair, or a key that is not the certificate's stops boot naming the keys", async () => {
    const other = makeCert(dir, '127.0.0.3');
    const boot = (gateway: Record<string, unknown>) => startTestGateway({ gateway, plugins: [{ name: 'flv-out', config: { port: 0 } }] });
    await assert.rejects(boot({ tlsCertFile: files.cert }), /key tlsKeyFile: give both tlsCertFile and tlsKeyFile/);
    await assert.rejects(boot({ tlsCertFile: path.join(dir, 'nope.crt'), tlsKeyFile: files.key }), /key tlsCertFile: cannot read .*nope\.crt \(ENOENT\)/);
    await assert.rejects(
      boot({ tlsCertFile: files.cert, tlsKeyFile: other.key }),
      /keys tlsCertFile\/tlsKeyFile: .* are not a usable certificate and key \(.*(mismatch|key)/i,
    );
    await assert.rejects(boot({ tlsCertFile: files.key, tlsKeyFile: files.key }), /not a usable certificate and key/);
    // flv-out told to write plain URLs on a TLS port
    await assert.rejects(
      boot({ tlsCertFile: files.cert, tlsKeyFile: files.key })
        .then(async (g) => {
          await g.stop();
        })
        .then(() =>
          startTestGateway({
            gateway: { tlsCertFile: files.cert, tlsKeyFile: files.key },
            plugins: [{ name: 'flv-out', config: { port: 0, schemes: ['ws'] } }],
          }),
        ),
      /key schemes: this port serves TLS only/,
    );
  });
});
