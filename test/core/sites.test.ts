import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { Kernel } from '../../core/kernel';
import { Receiver } from '../../plugins/callback-notifier/test/helpers';
import { repoRoot, scratchDir } from '../support/paths';

// The shipped site files, loaded by name through the site loader as `npm start` / GW_SITE would, on free loopback
// ports (rtsp-out's aside) and a scratch data directory through the environment overrides an operator would use.

const PROD_APP = { appId: 'fleet', user: 'fleet', password: 'a-long-password-from-the-environment' };
/** the operator's application: the production site shows /metrics to admin applications only */
const OPS_APP = { appId: 'ops', user: 'prometheus', password: 'another-long-password', admin: true };
const OPS = `${OPS_APP.user}:${OPS_APP.password}`;

function freePortEnv(dataDir: string): Record<string, string> {
  return {
    GW_HTTP_PORT: '0',
    GW_LISTEN_HOST: '127.0.0.1',
    GW_DATA_DIR: dataDir,
    GW_FLV_PORT: '0',
    GW_RTMP_PORT: '0',
    GW_WEBRTC_UDP_PORT: '0',
    GW_JT1078_INGEST_LIVE_PORT2013: '0',
    GW_JT1078_INGEST_LIVE_PORT2019: '0',
    GW_JT1078_INGEST_REPLAY_PORT2013: '0',
    GW_JT1078_INGEST_REPLAY_PORT2019: '0',
  };
}

interface Booted {
  kernel: Kernel;
  logs: Array<Record<string, unknown>>;
  api(path: string, body: unknown, auth: string): Promise<{ status: number; json: any }>;
  status(auth: string): Promise<number>;
  /** a metric's value from /metrics, read with `auth` (Basic "user:password") when given */
  metric(name: string, auth?: string): Promise<number>;
  get(path: string, auth?: string): Promise<{ status: number; text: string }>;
}

async function bootSite(site: string, env: Record<string, string>): Promise<Booted> {
  const logs: Array<Record<string, unknown>> = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim()) {
          try {
            logs.push(JSON.parse(line));
          } catch {
            /* partial line */
          }
        }
      done();
    },
  });
  const kernel = new Kernel({ site, env, logDestination: dest });
  await kernel.start();
  const base = `http://127.0.0.1:${kernel.ports['gateway.httpPort']}`;
  return {
    kernel,
    logs,
    async api(path, body, auth) {
      const res = await fetch(base + path, {
        method: 'POST',
        headers: { authorization: 'Basic ' + Buffer.from(auth).toString('base64'), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: await res.json() };
    },
    async status(auth) {
      const res = await fetch(base + '/strm/status', { headers: { authorization: 'Basic ' + Buffer.from(auth).toString('base64') } });
      await res.body?.cancel();
      return res.status;
    },
    async get(path, auth) {
      const res = await fetch(base + path, { headers: auth ? { authorization: 'Basic ' + Buffer.from(auth).toString('base64') } : {} });
      return { status: res.status, text: await res.text() };
    },
    async metric(name, auth) {
      const res = await fetch(base + '/metrics', { headers: auth ? { authorization: 'Basic ' + Buffer.from(auth).toString('base64') } : {} });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status}: ${text}`);
      const line = text.split('\n').find((l) => l.startsWith(name + ' '));
      return line ? Number(line.slice(name.length + 1)) : 0;
    },
  };
}

async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('shipped sites: sites/production and sites/default', function () {
  this.timeout(30_000);
  let booted: Booted | undefined;
  let receiver: Receiver | undefined;
  let dir: string;
  beforeEach(async () => {
    dir = scratchDir('site');
    receiver = await new Receiver().start();
  });
  afterEach(async () => {
    // one at a time: rtsp-out's port stays the site's (7554), which two gateways cannot both bind
    await booted?.kernel.stop();
    booted = undefined;
    await receiver?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function openAndClose(b: Booted, auth: string): Promise<string> {
    const r = await b.api(
      '/strm/open',
      { user: { token: 't1' }, typ: 'live', simNo: '013800138000', chanId: 1, cb: `http://127.0.0.1:${receiver!.port}/hooks` },
      auth,
    );
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    const reqId: string = r.json.data[0].reqId;
    const c = await b.api('/strm/close', { reqIds: [reqId] }, auth);
    assert.deepEqual(c.json.data, [{ reqId, closed: true }]);
    return reqId;
  }

  it('production: boots with every plugin, no demo credentials, and gives up the notices of a loopback cb', async () => {
    const site = JSON.parse(fs.readFileSync(path.join(repoRoot, 'sites', 'production', 'site.json'), 'utf8'));
    const dflt = JSON.parse(fs.readFileSync(path.join(repoRoot, 'sites', 'default', 'site.json'), 'utf8'));
    assert.deepEqual(
      site.plugins.map((p: { name: string }) => p.name),
      dflt.plugins.map((p: { name: string }) => p.name),
      'the same plugins as the default site',
    );
    assert.deepEqual(site.gateway.applications, [], 'no credentials in the file');

    booted = await bootSite('production', { ...freePortEnv(dir), GW_APPLICATIONS: JSON.stringify([PROD_APP, OPS_APP]) });
    const b = booted;
    assert.equal(b.kernel.gateway.listenHost, '127.0.0.1', 'the environment overrode listenHost');
    assert.ok(!b.logs.some((l) => /demo credentials/.test(String(l.msg))), 'no demo-credentials warning');
    assert.equal(await b.status('demo:demo'), 401, 'demo:demo is not an application here');

    const failedBefore = await b.metric('gw_callback_notifier_failed_total', OPS);
    const reqId = await openAndClose(b, `${PROD_APP.user}:${PROD_APP.password}`);
    await until(() => b.logs.some((l) => l.reqId === reqId && l.msg === 'callback notice given up'), 10_000, 'the given-up log line');
    const line = b.logs.find((l) => l.reqId === reqId && l.msg === 'callback notice given up')!;
    assert.equal(line.act, 'closed');
    assert.match(String(line.reason), /127\.0\.0\.1 is a loopback address, refused by the callback host policy/);
    assert.equal(await b.metric('gw_callback_notifier_failed_total', OPS), failedBefore + 1);
    assert.equal(receiver!.arrivals.length, 0, 'nothing reached the loopback receiver');
  });

  it('production: /metrics answers only an admin application, /healthz shows counts only to it', async () => {
    booted = await bootSite('production', { ...freePortEnv(dir), GW_APPLICATIONS: JSON.stringify([PROD_APP, OPS_APP]) });
    const b = booted;
    const fleet = `${PROD_APP.user}:${PROD_APP.password}`;
    const r = await b.api('/strm/open', { user: { token: 't1' }, typ: 'live', simNo: '013800138000', chanId: 1 }, fleet);
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    const anon = await b.get('/metrics');
    assert.equal(anon.status, 401);
    assert.ok(!anon.text.includes('13800138000'), 'no SIM to anyone');
    assert.equal((await b.get('/metrics', fleet)).status, 403, "a tenant reads no other tenant's SIMs");
    const ops = await b.get('/metrics', OPS);
    assert.equal(ops.status, 200);
    assert.match(ops.text, /^gw_core_requests_open 1$/m);
    assert.deepEqual(JSON.parse((await b.get('/healthz')).text), { status: 'ok' });
    assert.deepEqual(JSON.parse((await b.get('/healthz', OPS)).text), { status: 'ok', requests: 1, streams: 1 });
    await b.api('/strm/close', { reqIds: [r.json.data[0].reqId] }, fleet);
  });

  it('production without GW_APPLICATIONS still boots, and answers every API call 401', async () => {
    booted = await bootSite('production', freePortEnv(dir));
    assert.ok(booted.logs.some((l) => /no applications configured/.test(String(l.msg))));
    assert.equal(await booted.status('demo:demo'), 401);
  });

  it('default: the same loopback cb gets its notice (allowLoopback is set in the site file)', async () => {
    booted = await bootSite('default', freePortEnv(dir));
    const b = booted;
    assert.ok(
      b.logs.some((l) => /demo credentials/.test(String(l.msg))),
      'the demo-credentials warning',
    );
    const reqId = await openAndClose(b, 'demo:demo');
    await receiver!.waitForArrivals(1);
    assert.deepEqual(
      receiver!.arrivals.map((a) => [a.path, a.body.act, a.body.reqId]),
      [['/hooks/strm_notif', 'closed', reqId]],
    );
    await until(async () => (await b.metric('gw_callback_notifier_delivered_total')) === 1, 5000, 'the delivered count');
    assert.equal(await b.metric('gw_callback_notifier_failed_total'), 0);
  });
});
