/**
 * What an rtspSrc open answers when the camera cannot be played (decisions.md): -5 when nothing answers within the
 * open timeout, -3 when it connects and drops at once, -3 with the source's URL (no password) for wrong
 * credentials or an RTSP error; and Basic auth, H.265 + G.711 over UDP.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { requireTool } from '../../../test/support/tools';
import { stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { collectVideo, firstBytes, probeFile, probeUrl, publish } from './support/publisher';
import { closedPort, droppingServer, TestRtspServer } from './support/test-rtsp-server';
import { openRtsp, startGateway, statusOf, assertTracks } from './helpers';
import { scratchDir } from '../../../test/support/paths';

describe('rtsp-source: failures and other cameras', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  before(async () => {
    // a stand-in terminal ingest beside rtsp-source, so terminal opens exist too
    gw = await startGateway({ openTimeoutSec: 2, requestTimeoutSec: 1 }, [stubMediaPlugin({ fmts: [] })]);
  });
  after(async () => {
    await gw?.stop();
  });

  it('answers -5 for a port nobody listens on, after trying within the open timeout', async () => {
    const port = await closedPort();
    const r = await openRtsp(gw, '910000000001', { url: `rtsp://127.0.0.1:${port}/cam` });
    assert.equal(r.errCode, -5, r.message);
    assert.match(r.message, new RegExp(`rtsp://127\\.0\\.0\\.1:${port}/cam`));
    assert.match(r.message, /connection refused/);
    const st = await gw.api('GET', '/strm/status');
    assert.equal(st.json.count, 0, 'no request was left open');
  });

  it('answers -5 for a server that accepts and never answers', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const r = await openRtsp(gw, '910000000002', { url: `rtsp://127.0.0.1:${port}/cam` });
      assert.equal(r.errCode, -5, r.message);
      assert.match(r.message, /no answer to OPTIONS/);
    } finally {
      silent.close();
    }
  });

  it('answers -7 naming rtspSrc.url for a key a terminal request holds', async () => {
    const t = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '910000000009', chanId: 2, scheme: 'http', keepIntv: 600 });
    assert.equal(t.json.errCode, 0, t.json.message);
    const srv = await droppingServer();
    try {
      const r = await openRtsp(gw, '910000000009', { url: `rtsp://127.0.0.1:${srv.port}/cam` }, 2);
      assert.equal(r.errCode, -7, r.message);
      assert.match(r.message, /`rtspSrc\.url`.*fed by a terminal/);
    } finally {
      await srv.close();
      await gw.api('POST', '/strm/close', { reqIds: [t.json.data[0].reqId] });
    }
  });

  it('answers -3 for a source that connects and drops at once', async () => {
    const srv = await droppingServer();
    try {
      const r = await openRtsp(gw, '910000000003', { url: `rtsp://127.0.0.1:${srv.port}/cam` });
      assert.equal(r.errCode, -3, r.message);
      assert.match(r.message, /closed the connection before answering/);
    } finally {
      await srv.close();
    }
  });

  describe('with a camera', () => {
    let server: TestRtspServer;
    let cam: ReturnType<typeof publish>;
    before(async () => {
      server = new TestRtspServer({ auth: { scheme: 'basic', user: 'viewer', pwd: 'Right-Pass-7' } });
      await server.start();
      cam = publish('h265-pcma', server.publishUrl);
      await server.whenPublishing();
    });
    after(async () => {
      await cam?.stop();
      await server?.close();
    });

    it('answers -3 naming the source, not the password, for wrong credentials', async () => {
      const r = await openRtsp(gw, '910000000004', { url: `rtsp://viewer:Wrong-Pass-9@127.0.0.1:${server.port}/cam` });
      assert.equal(r.errCode, -3, r.message);
      assert.match(r.message, new RegExp(`rtsp://viewer@127\\.0\\.0\\.1:${server.port}/cam`));
      assert.match(r.message, /refused the credentials/);
      assert.doesNotMatch(r.message, /Wrong-Pass-9/);
      const r2 = await openRtsp(gw, '910000000004', { url: server.url(), user: 'viewer', pwd: 'Wrong-Pass-9' });
      assert.equal(r2.errCode, -3, r2.message);
      assert.doesNotMatch(r2.message, /Wrong-Pass-9/);
      const r3 = await openRtsp(gw, '910000000004', { url: server.url() });
      assert.equal(r3.errCode, -3, r3.message);
      assert.match(r3.message, /needs credentials/);
      assert.doesNotMatch(gw.logText(), /Wrong-Pass-9|Right-Pass-7/);
    });

    it('answers -3 with the status for a path the camera does not have', async () => {
      const r = await openRtsp(gw, '910000000005', { url: server.url('/nope'), user: 'viewer', pwd: 'Right-Pass-7' });
      assert.equal(r.errCode, -3, r.message);
      assert.match(r.message, /404 Not Found to DESCRIBE/);
    });

    it('plays H.265 + PCMA behind Basic auth: the units decode (ffprobe: hevc 320x240), FLV serves hvc1', async () => {
      const r = await openRtsp(gw, '910000000006', { url: server.url(), user: 'viewer', pwd: 'Right-Pass-7' });
      assert.equal(r.errCode, 0, r.message);
      const reqId = String(r.data![0].reqId);
      await gw.waitReady(reqId, 15_000);
      const st = await statusOf(gw, reqId);
      assertTracks(st, { kind: 'video', codec: 'h265', width: 320, height: 240 }, { kind: 'audio', codec: 'g711a', sampleRate: 8000 });
      // Debian's ffmpeg 5.1 cannot read Enhanced FLV (ARCHITECTURE.md): the units themselves go to ffprobe, and the
      // FLV is checked for its hvc1 sequence header
      const es = await collectVideo(gw, String(st.stream), 50);
      const p = await probeFile(es, 'hevc');
      assert.equal(p.codec, 'hevc');
      assert.equal(p.width, 320);
      assert.equal(p.height, 240);
      assert.ok(p.frames >= 50, `ffprobe decoded ${p.frames} frames`);
      assert.equal(p.errors, '', 'decoded without errors');
      const flv = await firstBytes(String(r.data![0].playUrl), 4096);
      assert.equal(flv.subarray(0, 3).toString(), 'FLV');
      assert.ok(flv.includes(Buffer.from('hvc1')), 'an Enhanced FLV hvc1 sequence header');
      await gw.api('POST', '/strm/close', { reqIds: [reqId] });
    });
  });
});

describe('rtsp-source: RTP over UDP', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  let server: TestRtspServer;
  let cam: ReturnType<typeof publish>;
  before(async () => {
    server = new TestRtspServer();
    await server.start();
    cam = publish('h264-pcmu', server.publishUrl);
    await server.whenPublishing();
    gw = await startGateway({ transport: 'udp' });
  });
  after(async () => {
    await gw?.stop();
    await cam?.stop();
    await server?.close();
  });

  it('plays H.264 + PCMU with RTP over UDP as FLV (ffprobe: h264 320x240)', async () => {
    const r = await openRtsp(gw, '920000000001', { url: server.url() });
    assert.equal(r.errCode, 0, r.message);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 15_000);
    const st = await statusOf(gw, reqId);
    const codecs = st.codecs as Array<Record<string, unknown>>;
    assert.deepEqual(
      codecs.find((x) => x.kind === 'audio'),
      { kind: 'audio', codec: 'g711u', sampleRate: 8000 },
    );
    const p = await probeUrl(String(r.data![0].playUrl));
    const v = p.streams.find((s) => s.codec_type === 'video');
    assert.ok(v, `ffprobe found no video: ${JSON.stringify(p)}`);
    assert.equal(v.codec_name, 'h264');
    assert.equal(v.width, 320);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
  });
});

describe('rtsp-source: rtsps:// (RTSP over TLS)', function () {
  this.timeout(90_000);
  let server: TestRtspServer;
  let cam: ReturnType<typeof publish>;
  before(async () => {
    const openssl = requireTool('openssl', 'openssl');
    const dir = scratchDir('rtsp-source-tls');
    const r = spawnSync(
      openssl,
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        path.join(dir, 'k.pem'),
        '-out',
        path.join(dir, 'c.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=camera.test',
      ],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    server = new TestRtspServer({
      tls: { key: fs.readFileSync(path.join(dir, 'k.pem'), 'utf8'), cert: fs.readFileSync(path.join(dir, 'c.pem'), 'utf8') },
      auth: { scheme: 'digest', user: 'u', pwd: 'tls-Pass-1' },
    });
    fs.rmSync(dir, { recursive: true, force: true });
    await server.start();
    cam = publish('h264-aac', server.publishUrl);
    await server.whenPublishing();
  });
  after(async () => {
    await cam?.stop();
    await server?.close();
  });

  it('pulls over TLS when the certificate check is off (self-signed camera)', async () => {
    const gw = await startGateway({ tlsVerify: false });
    try {
      const r = await openRtsp(gw, '930000000001', { url: `rtsps://127.0.0.1:${server.tlsPort}/cam`, user: 'u', pwd: 'tls-Pass-1' });
      assert.equal(r.errCode, 0, r.message);
      const reqId = String(r.data![0].reqId);
      await gw.waitReady(reqId, 15_000);
      const st = await statusOf(gw, reqId);
      const codecs = st.codecs as Array<Record<string, unknown>>;
      assert.deepEqual(
        codecs.find((x) => x.kind === 'video'),
        { kind: 'video', codec: 'h264', width: 320, height: 240 },
      );
      assert.doesNotMatch(gw.logText(), /tls-Pass-1/);
    } finally {
      await gw.stop();
    }
  });

  it('answers -3 naming the certificate problem when the check is on', async () => {
    const gw = await startGateway({ tlsVerify: true });
    try {
      const r = await openRtsp(gw, '930000000002', { url: `rtsps://127.0.0.1:${server.tlsPort}/cam`, user: 'u', pwd: 'tls-Pass-1' });
      assert.equal(r.errCode, -3, r.message);
      assert.match(r.message, /certificate/i);
      assert.doesNotMatch(r.message, /tls-Pass-1/);
    } finally {
      await gw.stop();
    }
  });
});
