import assert from 'node:assert/strict';
import * as http from 'node:http';
import { ManualClock } from '../../plugin-sdk/clock';
import { definePlugin } from '../../plugin-sdk/plugin';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../plugin-sdk/testkit';
import { kernelOf } from '../support/kernel-of';

// Each attack replayed on loopback against a real HTTP listener.

const basic = (auth: string) => 'Basic ' + Buffer.from(auth).toString('base64');
const openBody = (over: Record<string, unknown> = {}) => ({ user: { token: 't1' }, typ: 'live', simNo: '013800138000', chanId: 1, ...over });

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

/**
 * One request over node:http, so a test can pick its source address (127.0.0.2 is another client on loopback) and
 * reuse one keep-alive connection the way a guessing script does.
 */
function request(
  base: string,
  o: { method?: string; path: string; auth?: string; body?: string; contentType?: string; from?: string; agent?: http.Agent },
): Promise<Reply> {
  const url = new URL(o.path, base);
  const headers: Record<string, string> = {};
  if (o.auth) headers.authorization = basic(o.auth);
  if (o.contentType) headers['content-type'] = o.contentType;
  if (o.body !== undefined) headers['content-length'] = String(Buffer.byteLength(o.body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: o.method ?? (o.body !== undefined ? 'POST' : 'GET'),
        headers,
        localAddress: o.from,
        agent: o.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

/** counts the credential checks the gateway makes, whatever route or listener asks */
function countChecks(gw: TestGateway): { readonly n: number } {
  const apps = kernelOf(gw).apps;
  const orig = apps.authenticate.bind(apps);
  const counter = { n: 0 };
  apps.authenticate = (h) => {
    counter.n++;
    return orig(h);
  };
  return counter;
}

describe('hardening', function () {
  this.timeout(30_000);

  describe('strings the API cannot encode, length limits', () => {
    let gw: TestGateway;
    before(async () => {
      const stub = stubMediaPlugin({ fmts: [0] });
      gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }], captureLogs: true });
    });
    after(() => gw.stop());

    // JSON text, so the escapes reach the server as written
    const lone: Array<[string, string, string]> = [
      [
        'a lone high surrogate in user.token (it used to answer 500 / -2 from encodeURIComponent)',
        '{"user":{"token":"ab\\ud800"},"typ":"live","simNo":"013800138000","chanId":1}',
        'user.token',
      ],
      ['a lone low surrogate in user.token', '{"user":{"token":"\\udc00ab"},"typ":"live","simNo":"013800138000","chanId":1}', 'user.token'],
      ['a reversed pair in user.token', '{"user":{"token":"\\udc00\\ud800"},"typ":"live","simNo":"013800138000","chanId":1}', 'user.token'],
      ['user.userId', '{"user":{"token":"t","userId":"u\\ud800"},"typ":"live","simNo":"013800138000","chanId":1}', 'user.userId'],
      ['cb', '{"user":{"token":"t"},"typ":"live","simNo":"013800138000","chanId":1,"cb":"http://127.0.0.1:9/\\ud800"}', 'cb'],
      ['cb credentials', '{"user":{"token":"t"},"typ":"live","simNo":"013800138000","chanId":1,"cb":"http://u:p\\udfff@127.0.0.1:9/"}', 'cb'],
      ['timedToken', '{"user":{"token":"t"},"typ":"live","simNo":"013800138000","chanId":1,"timedToken":"\\ud800"}', 'timedToken'],
      ['simNo', '{"user":{"token":"t"},"typ":"live","simNo":"0138\\ud800","chanId":1}', 'simNo'],
      ['reqId', '{"reqId":"abcdefgh\\ud800","user":{"token":"t"},"typ":"live","simNo":"013800138000","chanId":1}', 'reqId'],
      ['a field open ignores', '{"user":{"token":"t"},"typ":"live","simNo":"013800138000","chanId":1,"note":"\\ud800"}', 'note'],
    ];
    for (const [title, body, field] of lone) {
      it(`open: ${title} -> -7 naming ${field}`, async () => {
        const r = await gw.api('POST', '/strm/open', body);
        assert.equal(r.status, 200, JSON.stringify(r.json));
        assert.equal(r.json.errCode, -7, JSON.stringify(r.json));
        assert.ok(r.json.message.startsWith(`Invalid parameter \`${field}\`.`), r.json.message);
      });
    }

    it('keep and close: a lone surrogate in reqIds -> -7 naming the element', async () => {
      for (const route of ['/strm/keep', '/strm/close']) {
        const r = await gw.api('POST', route, '{"reqIds":["abcdefgh1","x\\udbff"]}');
        assert.equal(r.status, 200);
        assert.equal(r.json.errCode, -7, JSON.stringify(r.json));
        assert.match(r.json.message, /^Invalid parameter `reqIds\[1\]`\./);
      }
    });

    it('status: percent-encoded surrogate bytes in the query are no error (they decode to U+FFFD)', async () => {
      const r = await gw.api('GET', '/strm/status?reqId=%ED%A0%80abc');
      assert.equal(r.status, 200);
      assert.deepEqual([r.json.errCode, r.json.count], [0, 0]);
    });

    it('user.token: 5,000 characters refused; the limit (1024) and a real surrogate pair accepted', async () => {
      const long = await gw.api('POST', '/strm/open', openBody({ user: { token: 'x'.repeat(5000) } }));
      assert.equal(long.json.errCode, -7);
      assert.match(long.json.message, /^Invalid parameter `user\.token`\. Use at most 1024 characters/);
      assert.equal((await gw.api('POST', '/strm/open', openBody({ user: { token: 'x'.repeat(1025) } }))).json.errCode, -7);
      const ok = await gw.api('POST', '/strm/open', openBody({ user: { token: 'x'.repeat(1022) + '\u{1F600}' }, chanId: 2 }));
      assert.equal(ok.json.errCode, 0, JSON.stringify(ok.json).slice(0, 300));
      assert.match(ok.json.data[0].playUrl, /token=x+%F0%9F%98%80$/);
      await gw.api('POST', '/strm/close', { reqIds: [ok.json.data[0].reqId] });
    });

    it('user.userId: over 256 characters refused', async () => {
      const r = await gw.api('POST', '/strm/open', openBody({ user: { token: 't', userId: 'u'.repeat(257) } }));
      assert.equal(r.json.errCode, -7);
      assert.match(r.json.message, /^Invalid parameter `user\.userId`\./);
    });

    it('none of it reached a handler as an unexpected error', () => {
      assert.equal(gw.logs.filter((l) => l.msg === 'request failed with an unexpected error').length, 0);
    });
  });

  describe('/metrics and /healthz exposure', () => {
    const TENANT = { appId: 'tenant', user: 'tenant', password: 'pw-tenant' };
    const OPS = { appId: 'ops', user: 'ops', password: 'pw-ops', admin: true };
    let gw: TestGateway | undefined;
    afterEach(async () => {
      await gw?.stop();
      gw = undefined;
    });

    async function boot(gateway: Record<string, unknown>): Promise<TestGateway> {
      const stub = stubMediaPlugin();
      gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }], gateway: { applications: [TENANT, OPS], ...gateway } });
      return gw;
    }

    it("metricsAccess 'admin': metrics need an admin application; healthz counts only for it", async () => {
      const g = await boot({ metricsAccess: 'admin' });
      const open = await g.api('POST', '/strm/open', openBody(), 'tenant:pw-tenant');
      assert.equal(open.json.errCode, 0);

      const anon = await request(g.baseUrl, { path: '/metrics' });
      assert.equal(anon.status, 401);
      assert.match(String(anon.headers['www-authenticate']), /^Basic /);
      assert.equal(anon.json.errCode, -9);
      assert.ok(!anon.text.includes('013800138000') && !anon.text.includes('gw_'), 'nothing of the metrics');
      const tenant = await request(g.baseUrl, { path: '/metrics', auth: 'tenant:pw-tenant' });
      assert.deepEqual([tenant.status, tenant.json.errCode], [403, -11]);
      const wrong = await request(g.baseUrl, { path: '/metrics', auth: 'ops:guess' });
      assert.equal(wrong.status, 401);
      const ops = await request(g.baseUrl, { path: '/metrics', auth: 'ops:pw-ops' });
      assert.equal(ops.status, 200);
      assert.match(ops.text, /^gw_core_requests_open 1$/m);

      const h = await request(g.baseUrl, { path: '/healthz' });
      assert.equal(h.status, 200);
      assert.deepEqual(h.json, { status: 'ok' }, 'no counts without credentials');
      assert.deepEqual((await request(g.baseUrl, { path: '/healthz', auth: 'tenant:pw-tenant' })).json, { status: 'ok' });
      assert.deepEqual((await request(g.baseUrl, { path: '/healthz', auth: 'ops:pw-ops' })).json, { status: 'ok', requests: 1, streams: 1 });
    });

    it("metricsAccess 'admin' lets an address in metricsAllow in without credentials", async () => {
      const g = await boot({ metricsAccess: 'admin', metricsAllow: ['127.0.0.2/32', '::1'] });
      assert.equal((await request(g.baseUrl, { path: '/metrics' })).status, 401);
      const allowed = await request(g.baseUrl, { path: '/metrics', from: '127.0.0.2' });
      assert.equal(allowed.status, 200);
      assert.match(allowed.text, /^gw_core_requests_open 0$/m);
      assert.deepEqual((await request(g.baseUrl, { path: '/healthz', from: '127.0.0.2' })).json, { status: 'ok', requests: 0, streams: 0 });
    });

    it("metricsAccess 'allow-list': only the listed addresses, credentials or not", async () => {
      const g = await boot({ metricsAccess: 'allow-list', metricsAllow: ['127.0.0.0/31'] });
      assert.equal((await request(g.baseUrl, { path: '/metrics', from: '127.0.0.1' })).status, 200);
      const other = await request(g.baseUrl, { path: '/metrics', from: '127.0.0.2', auth: 'ops:pw-ops' });
      assert.deepEqual([other.status, other.json.errCode], [403, -11]);
      assert.deepEqual((await request(g.baseUrl, { path: '/healthz', from: '127.0.0.2' })).json, { status: 'ok' });
    });

    it("the default stays 'open' (the test kit and sites/default rely on it)", async () => {
      const g = await boot({});
      assert.equal(kernelOf(g).gateway.metricsAccess, 'open');
      assert.equal((await request(g.baseUrl, { path: '/metrics' })).status, 200);
      assert.deepEqual(Object.keys((await request(g.baseUrl, { path: '/healthz' })).json), ['status', 'requests', 'streams']);
    });

    it('a bad metricsAllow entry stops boot naming it', async () => {
      await assert.rejects(
        boot({ metricsAccess: 'admin', metricsAllow: ['10.0.0.0/8', 'intranet'] }),
        /gateway: key metricsAllow\[1\]: 'intranet' is not an IP address or CIDR/,
      );
      await assert.rejects(boot({ metricsAllow: ['10.0.0.0/33'] }), /key metricsAllow\[0\]: prefix \/33 is longer than 32/);
    });
  });

  describe('brake on password guessing', () => {
    it('with the default settings: 300 guesses on one connection get at most 20 checks and a few log lines', async () => {
      const stub = stubMediaPlugin();
      const gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }], captureLogs: true });
      try {
        const checks = countChecks(gw);
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const statuses: number[] = [];
        for (let i = 0; i < 300; i++) statuses.push((await request(gw.baseUrl, { path: '/strm/status', auth: `demo:guess-${i}`, agent })).status);
        agent.destroy();
        assert.ok(checks.n <= 20, `the server made ${checks.n} credential checks for 300 attempts`);
        assert.equal(statuses.filter((x) => x === 429).length, 280);
        const lines = gw.logs.filter((l) => l.level === 40 && /authentication failed|too many failed logins/.test(String(l.msg)));
        assert.ok(lines.length <= 3, `${lines.length} warning lines for 300 attempts`);
        assert.equal((await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:demo', from: '127.0.0.2' })).status, 200, 'another address logs in');
      } finally {
        await gw.stop();
      }
    });

    it('a login flood from one address is throttled; another address still logs in; the address recovers after the block', async () => {
      const stub = stubMediaPlugin();
      const gw = await startTestGateway({
        plugins: [{ name: stub.name, def: stub.def }],
        captureLogs: true,
        gateway: { authFailLimit: 5, authFailWindowSec: 60, authBlockSec: 1 },
      });
      try {
        const checks = countChecks(gw);
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const ATTEMPTS = 400;
        const statuses: number[] = [];
        let retryAfter: string | undefined;
        const t0 = Date.now();
        for (let i = 0; i < ATTEMPTS; i++) {
          const r = await request(gw.baseUrl, { path: '/strm/status', auth: `demo:guess-${i}`, from: '127.0.0.1', agent });
          statuses.push(r.status);
          if (r.status === 429) retryAfter ??= String(r.headers['retry-after']);
        }
        agent.destroy();
        assert.ok(Date.now() - t0 < 20_000, 'the flood ran in bounded time');
        assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401]);
        // one block lasts 1 s: a slow machine may see it end once during the flood, and five more guesses then
        const guesses = statuses.filter((s) => s === 401).length;
        assert.ok(guesses <= 15, `${guesses} of ${ATTEMPTS} guesses were checked`);
        assert.ok(statuses.filter((s) => s === 429).length >= ATTEMPTS - 15);
        assert.ok(checks.n <= 15, `the server made ${checks.n} credential checks for ${ATTEMPTS} attempts`);
        assert.ok(retryAfter !== undefined && Number(retryAfter) >= 1, `Retry-After: ${retryAfter}`);
        const lines = gw.logs.filter((l) => l.msg === 'authentication failed' || l.msg === 'too many failed logins: address blocked');
        assert.ok(lines.length <= 6, `${lines.length} warning lines for ${ATTEMPTS} attempts`);
        assert.ok(!gw.logText().includes('guess-'), 'no password in the log');

        // while blocked, even the right password is not checked from there...
        const before = checks.n;
        const blocked = await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:demo', from: '127.0.0.1' });
        assert.equal(blocked.status, 429);
        assert.equal(blocked.json.errCode, -9);
        assert.equal(checks.n, before, 'no credential check for a blocked address');
        // ...but another address logs in
        const other = await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:demo', from: '127.0.0.2' });
        assert.deepEqual([other.status, other.json.errCode], [200, 0]);

        await new Promise((r) => setTimeout(r, 1100));
        const again = await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:demo', from: '127.0.0.1' });
        assert.deepEqual([again.status, again.json.errCode], [200, 0], 'the address works again after the block');
        const m = await request(gw.baseUrl, { path: '/metrics' });
        assert.match(m.text, /^gw_core_auth_throttled_total \d+$/m);
        assert.match(m.text, /^gw_core_auth_failures_total\{reason="bad-password"\} \d+$/m);
      } finally {
        await gw.stop();
      }
    });

    it('the warning line is rate-limited per address with a suppressed count, brake on or off', async () => {
      const clock = new ManualClock(Date.now());
      const stub = stubMediaPlugin();
      const gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }], captureLogs: true, clock, gateway: { authFailLimit: 0 } });
      try {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        for (let i = 0; i < 200; i++) {
          const r = await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:nope', agent });
          assert.equal(r.status, 401, 'authFailLimit 0: no block');
        }
        // from another address: its own first line
        await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:nope', from: '127.0.0.2' });
        const lines = () => gw.logs.filter((l) => l.msg === 'authentication failed');
        assert.deepEqual(
          lines().map((l) => l.remote),
          ['127.0.0.1', '127.0.0.2'],
        );
        clock.advance(10_000);
        await request(gw.baseUrl, { path: '/strm/status', auth: 'demo:nope', agent });
        agent.destroy();
        assert.equal(lines().length, 3);
        assert.equal(lines()[2].suppressed, 199, 'the next line counts what was left out');
      } finally {
        await gw.stop();
      }
    });

    it('a credential check for /metrics goes through the same brake', async () => {
      const stub = stubMediaPlugin();
      const gw = await startTestGateway({
        plugins: [{ name: stub.name, def: stub.def }],
        gateway: { metricsAccess: 'admin', authFailLimit: 3, authBlockSec: 60, applications: [{ appId: 'ops', user: 'ops', password: 'pw-ops', admin: true }] },
      });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 10; i++) statuses.push((await request(gw.baseUrl, { path: '/metrics', auth: `ops:g${i}` })).status);
        assert.deepEqual(statuses, [401, 401, 401, 429, 429, 429, 429, 429, 429, 429]);
        assert.equal((await request(gw.baseUrl, { path: '/strm/status', auth: 'ops:pw-ops' })).status, 429, 'the block covers the API too');
        assert.deepEqual((await request(gw.baseUrl, { path: '/healthz', auth: 'ops:pw-ops' })).json, { status: 'ok' }, 'healthz answers, without counts');
      } finally {
        await gw.stop();
      }
    });
  });

  describe('per-application cap on open requests (defaults)', () => {
    it('with the default settings: 1,100 opens hold 1,000 requests', async () => {
      const stub = stubMediaPlugin();
      const g = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }] });
      try {
        const codes: number[] = [];
        for (let batch = 0; batch < 22; batch++) {
          const rs = await Promise.all(
            Array.from({ length: 50 }, (_, i) => g.api('POST', '/strm/open', openBody({ chanId: 1 + ((batch * 50 + i) % 255), keepIntv: 600 }))),
          );
          codes.push(...rs.map((r) => r.json.errCode as number));
        }
        assert.equal(kernelOf(g).sessions.requestCount, 1000, `${kernelOf(g).sessions.requestCount} requests held after 1,100 opens`);
        assert.deepEqual([codes.filter((c) => c === 0).length, codes.filter((c) => c === -3).length], [1000, 100]);
      } finally {
        await g.stop();
      }
    });
  });

  describe('per-application cap on open requests', () => {
    let gw: TestGateway;
    const A = 'appa:pwa';
    const B = 'appb:pwb';
    before(async () => {
      const stub = stubMediaPlugin();
      // a guard that awaits, as gov-timed-token's may: concurrent opens must not all slip past the cap meanwhile
      const slowGuard = definePlugin({
        name: 'slow-guard',
        setup(ctx) {
          ctx.sessions.addOpenGuard(() => new Promise<void>((r) => setTimeout(r, 5)));
        },
      });
      gw = await startTestGateway({
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'slow-guard', def: slowGuard },
        ],
        captureLogs: true,
        gateway: {
          maxRequestsPerApp: 20,
          applications: [
            { appId: 'A', user: 'appa', password: 'pwa' },
            { appId: 'B', user: 'appb', password: 'pwb', maxRequests: 3 },
          ],
        },
      });
    });
    after(() => gw.stop());

    it('an open flood holds at the cap with a clear -3; other applications are unaffected; a close makes room', async () => {
      const results: Array<{ errCode: number; message: string; data?: Array<{ reqId: string }> }> = [];
      const t0 = Date.now();
      for (let batch = 0; batch < 10; batch++) {
        const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => gw.api('POST', '/strm/open', openBody({ chanId: 1 + ((batch * 50 + i) % 200) }), A)));
        results.push(...rs.map((r) => r.json));
      }
      assert.ok(Date.now() - t0 < 20_000);
      const ok = results.filter((r) => r.errCode === 0);
      const refused = results.filter((r) => r.errCode !== 0);
      assert.equal(ok.length, 20, 'exactly the cap got through');
      assert.equal(refused.length, 480);
      for (const r of refused) {
        assert.equal(r.errCode, -3);
        assert.equal(r.message, 'Too many open requests: this application holds its maximum of 20; close some first.');
      }
      assert.equal(kernelOf(gw).sessions.requestCount, 20);
      assert.equal(kernelOf(gw).sessions.requestCountOf('A'), 20);
      assert.equal(gw.logs.filter((l) => l.msg === 'open refused: the application holds its maximum of open requests').length, 1, 'one warning for the flood');

      // B has its own count and its own limit (maxRequests 3)
      const b = [];
      for (let i = 0; i < 4; i++) b.push((await gw.api('POST', '/strm/open', openBody({ chanId: 250 - i }), B)).json);
      assert.deepEqual(
        b.map((r) => r.errCode),
        [0, 0, 0, -3],
      );
      assert.match(b[3].message, /maximum of 3;/);

      const first = ok[0].data![0].reqId;
      assert.deepEqual((await gw.api('POST', '/strm/close', { reqIds: [first] }, A)).json.data, [{ reqId: first, closed: true }]);
      assert.equal((await gw.api('POST', '/strm/open', openBody({ chanId: 201 }), A)).json.errCode, 0, 'room after a close');
      assert.equal((await gw.api('POST', '/strm/open', openBody({ chanId: 202 }), A)).json.errCode, -3);

      const all = (await gw.api('GET', '/strm/status', undefined, A)).json.data.map((r: { reqId: string }) => r.reqId);
      await gw.api('POST', '/strm/close', { reqIds: all }, A);
      await gw.api('POST', '/strm/close', { reqIds: b.slice(0, 3).map((r) => r.data[0].reqId) }, B);
      assert.equal(kernelOf(gw).sessions.requestCountOf('A'), 0);
      assert.equal(kernelOf(gw).sessions.requestCountOf('B'), 0);
    });

    it('conflicting maxRequests for one appId stops boot', async () => {
      await assert.rejects(
        startTestGateway({
          plugins: [],
          gateway: {
            applications: [
              { appId: 'X', user: 'x1', password: 'p', maxRequests: 5 },
              { appId: 'X', user: 'x2', password: 'p', maxRequests: 6 },
            ],
          },
        }),
        /key applications\[1\]\.maxRequests: application 'X' is given 5 by another entry/,
      );
    });
  });

  describe('JSON content type, foreign reqIds, security headers', () => {
    let gw: TestGateway;
    const A = 'appa:pwa';
    const B = 'appb:pwb';
    before(async () => {
      const stub = stubMediaPlugin();
      gw = await startTestGateway({
        plugins: [{ name: stub.name, def: stub.def }],
        gateway: {
          applications: [
            { appId: 'A', user: 'appa', password: 'pwa' },
            { appId: 'B', user: 'appb', password: 'pwb' },
          ],
        },
      });
    });
    after(() => gw.stop());

    it('a JSON body as text/plain (a cross-origin form POST) opens nothing: 415, errCode -13', async () => {
      const body = JSON.stringify(openBody());
      for (const contentType of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined]) {
        const r = await request(gw.baseUrl, { path: '/strm/open', auth: A, body, contentType });
        assert.equal(r.status, 415, `${contentType}: ${r.text}`);
        assert.deepEqual([r.json.errCode, r.json.message], [-13, 'Content-Type must be application/json.']);
      }
      const keep = await request(gw.baseUrl, { path: '/strm/keep', auth: A, body: '{"reqIds":["abcdefgh"]}', contentType: 'text/plain' });
      assert.equal(keep.status, 415);
      assert.equal((await gw.api('GET', '/strm/status', undefined, A)).json.count, 0, 'nothing was opened');
      // credentials are judged first
      assert.equal((await request(gw.baseUrl, { path: '/strm/open', body, contentType: 'text/plain' })).status, 401);
    });

    it('application/json with parameters and +json types are JSON', async () => {
      for (const [contentType, chanId] of [
        ['application/json; charset=utf-8', 11],
        ['Application/JSON', 12],
        ['application/vnd.strm+json', 13],
      ] as const) {
        const r = await request(gw.baseUrl, { path: '/strm/open', auth: A, body: JSON.stringify(openBody({ chanId })), contentType });
        assert.equal(r.json.errCode, 0, `${contentType}: ${r.text}`);
        await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId] }, A);
      }
    });

    it("another application's reqId answers like any invalid reqId; the owner still hears it is in use", async () => {
      const a = await gw.api('POST', '/strm/open', openBody({ reqId: 'shared-req-0001' }), A);
      assert.equal(a.json.errCode, 0);
      const b = await gw.api('POST', '/strm/open', openBody({ reqId: 'shared-req-0001', chanId: 2 }), B);
      assert.deepEqual([b.json.errCode, b.json.message], [-7, 'Invalid parameter `reqId`.']);
      assert.ok(!/use/i.test(b.json.message));
      const again = await gw.api('POST', '/strm/open', openBody({ reqId: 'shared-req-0001', chanId: 3 }), A);
      assert.deepEqual([again.json.errCode, again.json.message], [-7, 'Invalid parameter `reqId`. It is in use.']);
      await gw.api('POST', '/strm/close', { reqIds: ['shared-req-0001'] }, A);
    });

    it('X-Content-Type-Options: nosniff on every API reply', async () => {
      const replies = [
        await request(gw.baseUrl, { path: '/strm/status', auth: A }),
        await request(gw.baseUrl, { path: '/strm/status' }),
        await request(gw.baseUrl, { path: '/no/such/route' }),
        await request(gw.baseUrl, { path: '/healthz' }),
        await request(gw.baseUrl, { path: '/metrics' }),
        await request(gw.baseUrl, { path: '/strm/open', auth: A, body: '{}', contentType: 'text/plain' }),
        await request(gw.baseUrl, { path: '/strm/open', auth: A, body: '{', contentType: 'application/json' }),
      ];
      for (const r of replies) assert.equal(r.headers['x-content-type-options'], 'nosniff', `HTTP ${r.status}: ${r.text.slice(0, 80)}`);
    });
  });
});
