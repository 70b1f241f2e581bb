/**
 * Push out (POST /strm/relay) against servers we did not write: node-media-server started on its own (a child
 * process per run, so its globals and console logger stay out of the gateway's process) over RTMP and RTMPS, and
 * ffmpeg listening for one publish. ffmpeg publishes into the gateway; ffprobe decodes what the receivers got.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { definePlugin, type NoticePayload } from '../../../plugin-sdk';
import { DEMO_APP, startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { requireTool } from '../../../test/support/tools';
import { ffmpegPublish, HOST, KEY, recordAndProbe } from './helpers';
import { scratchDir } from '../../../test/support/paths';
import { runProcess } from '../../../test/support/run-process';
import { waitFor } from '../../../test/support/until';

type RelayNotice = NoticePayload & { relayState?: string; relayUrl?: string; relayId?: string; relayError?: string };
const OTHER = { appId: 'other', user: 'other', password: 'other-secret' };

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, HOST, r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, HOST);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** node-media-server 4.4.3 as its own process: RTMP, HTTP-FLV and (with a cert) RTMPS, no admin console */
class Nms {
  child: ChildProcess | undefined;
  constructor(
    readonly rtmp: number,
    readonly http: number,
    readonly dir: string,
    readonly tls?: { port: number; key: string; cert: string },
  ) {}

  async start(): Promise<void> {
    const config = {
      bind: HOST,
      rtmp: { port: this.rtmp },
      http: { port: this.http },
      webadmin: { enable: false },
      store: { path: path.join(this.dir, 'store') },
      ...(this.tls ? { rtmps: this.tls } : {}),
    };
    const script = `const N = require(${JSON.stringify(require.resolve('node-media-server'))}); new N(${JSON.stringify(config)}).run();`;
    this.child = spawn(process.execPath, ['-e', script], { cwd: this.dir, stdio: 'ignore' });
    await waitFor('node-media-server to listen', () => listening(this.rtmp), 15_000);
    if (this.tls) await waitFor('node-media-server RTMPS', () => listening(this.tls!.port), 15_000);
  }

  async kill(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await gone;
  }
}

describe('rtmp: push out (POST /strm/relay) to RTMP servers we did not write', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let encoder: ChildProcess | undefined;
  let nms: Nms;
  let reqId: string;
  const notices: RelayNotice[] = [];
  const dir = scratchDir('rtmp-relay');
  const streamKey = 'relaykey1';
  const nmsUrl = () => `rtmp://${HOST}:${nms.rtmp}/live/${streamKey}?secret=s3cr3tQuery`;

  const relay = (body: unknown, auth?: string) => gw.api('POST', '/strm/relay', body, auth);
  const stopRelay = (body: unknown) => gw.api('POST', '/strm/relay/stop', body);
  async function relaysOf(id: string): Promise<Array<Record<string, any>>> {
    const r = await gw.api('GET', '/strm/status');
    const st = (r.json.data as Array<Record<string, any>>).find((x) => x.reqId === id);
    return st?.flags?.relays ?? [];
  }
  async function waitState(id: string, relayId: string, state: string, ms = 30_000): Promise<Record<string, any>> {
    try {
      return await waitFor(`relay ${relayId} ${state}`, async () => (await relaysOf(id)).find((x) => x.relayId === relayId && x.state === state), ms);
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify((await relaysOf(id)).find((x) => x.relayId === relayId))}`, { cause: err });
    }
  }

  before(async () => {
    const openssl = requireTool('openssl', 'openssl');
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    const made = await runProcess(
      openssl,
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      30_000,
    );
    assert.equal(made.code, 0, made.stderr);
    nms = new Nms(await freePort(), await freePort(), dir, { port: await freePort(), key, cert });
    await nms.start();
    const probe = definePlugin({
      name: 'notice-probe',
      setup(ctx) {
        ctx.notices.on((n) => {
          if ((n.payload.act as string) === 'relay') notices.push(n.payload);
        });
      },
    });
    gw = await startTestGateway({
      gateway: { applications: [DEMO_APP, OTHER] },
      plugins: [
        stubMediaPlugin({ fmts: [] }),
        { name: 'audio-aac' },
        {
          name: 'rtmp',
          config: {
            publishKeys: [{ appId: 'demo', key: KEY }],
            relayAllowLoopback: true,
            relayRetryMinMs: 200,
            relayRetryMaxMs: 1000,
            relayNoticeIntervalSec: 0,
            maxRelaysPerApp: 3,
            relayCaFiles: [cert],
          },
        },
        { name: probe.name, def: probe as never },
      ],
      captureLogs: true,
    });
    encoder = ffmpegPublish(`rtmp://${HOST}:${gw.ports['rtmp.port']}/push/enc01_1?key=${KEY}`);
    const o = await gw.openStream({ simNo: 'enc01', chanId: 1, scheme: 'rtmp', keepIntv: 600 });
    reqId = o.reqId;
    await gw.waitReady(reqId, 30_000);
  });

  after(async () => {
    encoder?.kill('SIGKILL');
    await nms?.kill();
    await gw?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('publishes to node-media-server: ffprobe decodes H.264 and AAC from its HTTP-FLV; status shows publishing, never the key', async () => {
    const r = await relay({ reqId, url: nmsUrl() });
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    const started = r.json.data[0];
    assert.equal(started.url, `rtmp://${HOST}:${nms.rtmp}/live/***`);
    const st = await waitState(reqId, started.relayId, 'publishing');
    assert.doesNotMatch(JSON.stringify(st), /relaykey1|s3cr3t/);
    const p = await recordAndProbe(`http://${HOST}:${nms.http}/live/${streamKey}.flv`, 4);
    const v = p.streams.find((s) => s.codec_type === 'video');
    assert.equal(v?.codec_name, 'h264');
    assert.equal(v?.width, 320);
    assert.ok(Number(v?.nb_read_frames) >= 50, `video frames: ${v?.nb_read_frames}`);
    assert.ok(
      p.streams.some((s) => s.codec_type === 'audio' && s.codec_name === 'aac'),
      JSON.stringify(p.streams),
    );
    assert.equal(p.decodeErrors, '');
    assert.ok((await relaysOf(reqId))[0].bytesOut > 100_000);
    await waitFor('a publishing notice', () => notices.find((n) => n.relayId === started.relayId && n.relayState === 'publishing'), 15_000);
  });

  it('a second identical call answers the existing relay', async () => {
    const [a, b] = [await relay({ reqId, url: nmsUrl() }), await relay({ reqId, url: nmsUrl() })];
    assert.equal(a.json.errCode, 0);
    assert.equal(a.json.data[0].relayId, b.json.data[0].relayId);
    assert.equal((await relaysOf(reqId)).length, 1);
  });

  it('retries while the server is away and publishes again when it is back', async () => {
    const [first] = await relaysOf(reqId);
    await nms.kill();
    const retrying = await waitState(reqId, first.relayId, 'retrying');
    assert.ok(typeof retrying.error === 'string' && retrying.error.length > 0, JSON.stringify(retrying));
    await waitFor('a retrying notice', () => notices.find((n) => n.relayId === first.relayId && n.relayState === 'retrying'), 15_000);
    await nms.start();
    await waitState(reqId, first.relayId, 'publishing');
    const p = await recordAndProbe(`http://${HOST}:${nms.http}/live/${streamKey}.flv`, 3);
    assert.equal(p.streams.find((s) => s.codec_type === 'video')?.codec_name, 'h264');
    assert.equal(p.decodeErrors, '');
    assert.ok(notices.filter((n) => n.relayId === first.relayId && n.relayState === 'publishing').length >= 2);
  });

  it('rtmps: publishes over TLS to node-media-server (its certificate trusted through relayCaFiles)', async () => {
    const r = await relay({ reqId, url: `rtmps://${HOST}:${nms.tls!.port}/live/tlskey1` });
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    await waitState(reqId, r.json.data[0].relayId, 'publishing');
    const p = await recordAndProbe(`http://${HOST}:${nms.http}/live/tlskey1.flv`, 3);
    assert.equal(p.streams.find((s) => s.codec_type === 'video')?.codec_name, 'h264');
    assert.equal(p.decodeErrors, '');
    const s = await stopRelay({ reqId, relayId: r.json.data[0].relayId });
    assert.deepEqual(
      s.json.data.map((x: { stopped: boolean }) => x.stopped),
      [true],
    );
    assert.equal((await relaysOf(reqId)).length, 1);
  });

  it('closing the request stops its relay: ffmpeg listening sees the stream end, and what it wrote decodes', async () => {
    const o = await gw.openStream({ simNo: 'enc01', chanId: 1, scheme: 'rtmp', keepIntv: 600 });
    const port = await freePort();
    const file = path.join(dir, 'listened.flv');
    const ffmpeg = spawn(
      requireTool('ffmpeg', 'ffmpeg'),
      ['-v', 'error', '-listen', '1', '-i', `rtmp://${HOST}:${port}/app/listenkey`, '-c', 'copy', '-f', 'flv', file],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    ffmpeg.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => ffmpeg.on('close', resolve));
    try {
      // (no probe of the port: ffmpeg -listen takes one connection; the relay retries until ffmpeg listens)
      const r = await relay({ reqId: o.reqId, url: `rtmp://${HOST}:${port}/app/listenkey` });
      assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
      await waitState(o.reqId, r.json.data[0].relayId, 'publishing');
      await waitFor('2 s of media at ffmpeg', async () => (await relaysOf(o.reqId))[0]?.bytesOut > 150_000, 15_000);
      await new Promise((res) => setTimeout(res, 2000));
      const closed = await gw.api('POST', '/strm/close', { reqIds: [o.reqId] });
      assert.equal(closed.json.data[0].closed, true);
      const code = await Promise.race([exited, new Promise((res) => setTimeout(() => res('still running'), 15_000))]);
      assert.equal(code, 0, `ffmpeg: ${code}: ${stderr}`);
      assert.ok(notices.some((n) => n.reqId === o.reqId && n.relayState === 'stopped'));
    } finally {
      ffmpeg.kill('SIGKILL');
    }
    const p = await runProcess(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-count_frames', '-show_streams', '-of', 'json', file], 30_000);
    const streams = JSON.parse(p.stdout).streams as Array<{ codec_type: string; codec_name: string; nb_read_frames?: string }>;
    assert.ok(Number(streams.find((s) => s.codec_type === 'video' && s.codec_name === 'h264')?.nb_read_frames) >= 25, p.stdout);
    assert.ok(
      streams.some((s) => s.codec_type === 'audio' && s.codec_name === 'aac'),
      p.stdout,
    );
  });

  it('caps relays per application (-3), and POST /strm/relay/stop stops one by url or all of a request', async () => {
    const dead = await freePort();
    const url = (i: number) => `rtmp://${HOST}:${dead}/live/cap${i}`;
    assert.equal((await relay({ reqId, url: url(1) })).json.errCode, 0);
    assert.equal((await relay({ reqId, url: url(2) })).json.errCode, 0);
    const over = await relay({ reqId, url: url(3) });
    assert.equal(over.json.errCode, -3);
    assert.match(over.json.message, /3 relays \(maxRelaysPerApp\)/);
    // nothing listens there: the relay says why and keeps trying
    const cap1 = (await relaysOf(reqId)).find((x) => x.url.endsWith(`:${dead}/live/***`));
    await waitState(reqId, cap1!.relayId, 'retrying');
    const one = await stopRelay({ reqId, url: url(1) });
    assert.equal(one.json.count, 1);
    assert.equal((await relay({ reqId, url: url(3) })).json.errCode, 0);
    const all = await stopRelay({ reqId });
    assert.equal(all.json.count, 3);
    assert.deepEqual(await relaysOf(reqId), []);
  });

  it("-7: a bad url names url; an unknown reqId and another application's answer alike; internal hosts are refused", async () => {
    for (const url of [
      undefined,
      42,
      'http://x/live/k',
      'rtmp://h/onlyapp',
      'rtmp:///live/k',
      'rtmp://u:p@h/live/k',
      `rtmp://h/live/${'k'.repeat(2100)}`,
      'rtmp://10.1.2.3/live/k',
    ]) {
      const r = await relay({ reqId, url });
      assert.equal(r.json.errCode, -7, `${url}: ${JSON.stringify(r.json)}`);
      assert.match(r.json.message, /^Invalid parameter `url`\./);
    }
    const other = await gw.openStream({ simNo: 'oth01', chanId: 1, scheme: 'rtmp', auth: `${OTHER.user}:${OTHER.password}` });
    const unknown = await relay({ reqId: 'noSuchRequest1', url: nmsUrl() });
    const foreign = await relay({ reqId: other.reqId, url: nmsUrl() });
    assert.equal(unknown.json.errCode, -7);
    assert.match(unknown.json.message, /^Invalid parameter `reqId`\./);
    assert.deepEqual(foreign.json, unknown.json);
    const stopForeign = await stopRelay({ reqId: other.reqId });
    assert.deepEqual(stopForeign.json.data, []);
    // its own application starts one on it
    const own = await relay({ reqId: other.reqId, url: `rtmp://${HOST}:1/live/k` }, `${OTHER.user}:${OTHER.password}`);
    assert.equal(own.json.errCode, 0, JSON.stringify(own.json));
  });

  it('never logs the stream key; one line per state change', () => {
    const text = gw.logText();
    assert.doesNotMatch(text, /relaykey1|s3cr3tQuery|tlskey1|listenkey/);
    assert.ok(
      gw.logs.some((l) => l.msg === 'relay publishing'),
      'a publishing line',
    );
    assert.ok(
      gw.logs.some((l) => l.msg === 'relay retrying' && typeof l.error === 'string'),
      'a retrying line',
    );
    assert.ok(
      gw.logs.some((l) => l.msg === 'relay stopped'),
      'a stopped line',
    );
  });
});
