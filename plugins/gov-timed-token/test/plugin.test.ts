import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ManualClock } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { scratchDir } from '../../../test/support/paths';

// End to end: the plugin as the kernel loads it (dist/plugins/gov-timed-token/index.js), over the real HTTP API, with
// its tokens in the site's real store (SQLite in the data directory).

const GOV = 'gov-user:gov-pw';
const PLAIN = 'plain-user:plain-pw';
const ADMIN = 'admin-user:admin-pw';
const APPLICATIONS = [
  { appId: 'gov', user: 'gov-user', password: 'gov-pw', gov: true },
  { appId: 'plain', user: 'plain-user', password: 'plain-pw' },
  { appId: 'admin', user: 'admin-user', password: 'admin-pw', admin: true },
];
const CONFIG_TOKEN = 'cfg-Token-0001';
const HOUR = 3600_000;

/** `yyyy-mm-ddTHH:mm:ssZ`, the admin body's format (no milliseconds). */
const isoAt = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

async function metric(gw: TestGateway, sample: string): Promise<number> {
  const res = await fetch(gw.baseUrl + '/metrics');
  const line = (await res.text()).split('\n').find((l) => l.startsWith(sample + ' '));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}

function bootGateway(clock: ManualClock, gateway: Record<string, unknown> = {}): Promise<TestGateway> {
  const stub = stubMediaPlugin();
  return startTestGateway({
    plugins: [
      { name: stub.name, def: stub.def },
      { name: 'gov-timed-token', config: { tokens: [{ token: CONFIG_TOKEN, expiredAt: isoAt(clock.now() + 6 * HOUR) }] } },
    ],
    gateway: { applications: APPLICATIONS, ...gateway },
    clock,
    captureLogs: true,
  });
}

/** Every file under `dir`, as one string per file. */
function filesUnder(dir: string): Array<{ file: string; bytes: Buffer }> {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const file = path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name);
      return { file, bytes: fs.readFileSync(file) };
    });
}

describe('gov-timed-token plugin (gateway end to end)', function () {
  this.timeout(30_000);

  describe('on one gateway', () => {
    const clock = new ManualClock();
    let gw: TestGateway;
    let chan = 0;
    const seen = new Set<string>();

    before(async () => {
      gw = await bootGateway(clock);
    });
    after(() => gw?.stop());

    /** Opens (on a fresh channel, so no stream is still closing) and closes again at once; answers the open's envelope. */
    async function open(auth: string, timedToken?: string): Promise<{ errCode: number; message: string }> {
      chan = (chan % 255) + 1;
      const body: Record<string, unknown> = { user: { token: 'u' }, typ: 'live', simNo: '13800138000', chanId: chan };
      if (timedToken !== undefined) {
        body.timedToken = timedToken;
        seen.add(timedToken);
      }
      const r = await gw.api('POST', '/strm/open', body, auth);
      assert.equal(r.status, 200);
      if (r.json.errCode === 0) {
        const c = await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId] }, auth);
        assert.deepEqual(c.json.data, [{ reqId: r.json.data[0].reqId, closed: true }]);
      }
      return r.json;
    }

    async function setTokens(auth: string | null, body: unknown) {
      for (const t of (body as { tokens?: Array<{ token?: unknown }> })?.tokens ?? []) if (typeof t?.token === 'string' && t.token) seen.add(t.token);
      return gw.api('POST', '/strm/timed_token', body, auth);
    }

    async function setOk(...tokens: Array<{ token: string; expiredAt: string }>): Promise<void> {
      const r = await setTokens(ADMIN, { tokens });
      assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    }

    it('a gov application must send timedToken: missing -7 naming it, wrong -10, the configured one 0', async () => {
      const missingBefore = await metric(gw, 'gw_gov_timed_token_refused_total{reason="missing"}');
      const invalidBefore = await metric(gw, 'gw_gov_timed_token_refused_total{reason="invalid"}');

      const missing = await open(GOV);
      assert.equal(missing.errCode, -7);
      assert.match(missing.message, /`timedToken`/);
      const empty = await open(GOV, '');
      assert.equal(empty.errCode, -7, 'an empty timedToken is a missing one');
      assert.match(empty.message, /`timedToken`/);

      assert.equal((await open(GOV, 'wrong-token')).errCode, -10);
      assert.equal((await open(GOV, CONFIG_TOKEN.slice(0, -1))).errCode, -10, 'a prefix is not a match');
      assert.equal((await open(GOV, CONFIG_TOKEN.toUpperCase())).errCode, -10, 'tokens are case-sensitive');
      assert.equal((await open(GOV, CONFIG_TOKEN)).errCode, 0);

      assert.equal(await metric(gw, 'gw_gov_timed_token_refused_total{reason="missing"}'), missingBefore + 2);
      assert.equal(await metric(gw, 'gw_gov_timed_token_refused_total{reason="invalid"}'), invalidBefore + 3);
    });

    it('applications without the gov flag need no timedToken, and one they send is not checked', async () => {
      assert.equal((await open(PLAIN)).errCode, 0);
      assert.equal((await open(PLAIN, 'anything')).errCode, 0);
      assert.equal((await open(ADMIN)).errCode, 0, 'admin is not gov');
    });

    it('an admin replaces the tokens: the old one is refused at once, the new one accepted; the reply holds no secret', async () => {
      const updatesBefore = await metric(gw, 'gw_gov_timed_token_updates_total');
      const expiredAt = isoAt(clock.now() + 2 * HOUR);
      const r = await setTokens(ADMIN, { tokens: [{ token: 'new-Token-0002', expiredAt }] });
      assert.equal(r.status, 200);
      assert.equal(r.json.errCode, 0);
      assert.equal(r.json.count, 1);
      assert.equal(r.json.data[0].expiredAt, new Date(expiredAt).toISOString());
      assert.match(r.json.data[0].fingerprint, /^[0-9a-f]{8}$/);
      assert.ok(!JSON.stringify(r.json).includes('new-Token-0002'), 'the reply does not echo the token');
      assert.equal(await metric(gw, 'gw_gov_timed_token_updates_total'), updatesBefore + 1);

      assert.equal((await open(GOV, CONFIG_TOKEN)).errCode, -10);
      assert.equal((await open(GOV, 'new-Token-0002')).errCode, 0);
    });

    it('rotation: a "new,old" pair passes while either of them is valid, and only then', async () => {
      const later = isoAt(clock.now() + 2 * HOUR);
      await setOk({ token: 'rot-Old', expiredAt: later });
      // the application switched to sending the pair before the admin call
      assert.equal((await open(GOV, 'rot-New,rot-Old')).errCode, 0, 'old still valid');
      await setOk({ token: 'rot-New', expiredAt: later }, { token: 'rot-Old', expiredAt: later });
      assert.equal((await open(GOV, 'rot-New')).errCode, 0);
      assert.equal((await open(GOV, 'rot-Old')).errCode, 0);
      assert.equal((await open(GOV, ' rot-New , rot-Old ')).errCode, 0, 'blanks around the comma are trimmed');
      await setOk({ token: 'rot-New', expiredAt: later });
      assert.equal((await open(GOV, 'rot-New,rot-Old')).errCode, 0, 'new valid');
      assert.equal((await open(GOV, 'rot-Old')).errCode, -10);
      assert.equal((await open(GOV, 'rot-Old,bogus')).errCode, -10, 'neither valid');
      assert.equal((await open(GOV, 'bogus,rot-Old,rot-New')).errCode, -10, 'more than two tokens');
    });

    it('a token is refused from its expiredAt on (ManualClock)', async () => {
      await setOk({ token: 'short-Lived', expiredAt: isoAt(clock.now() + 10 * 60_000) });
      assert.equal((await open(GOV, 'short-Lived')).errCode, 0);
      clock.advance(10 * 60_000 - 1000);
      assert.equal((await open(GOV, 'short-Lived')).errCode, 0, 'one second before expiredAt');
      clock.advance(1000);
      assert.equal((await open(GOV, 'short-Lived')).errCode, -10, 'at expiredAt');
      assert.equal((await open(PLAIN)).errCode, 0, 'other applications are not affected');
    });

    it('only an admin application may set tokens: others get -11 and the tokens stay as they were', async () => {
      await setOk({ token: 'kept-Token', expiredAt: isoAt(clock.now() + HOUR) });
      const body = { tokens: [{ token: 'intruder-Token', expiredAt: isoAt(clock.now() + HOUR) }] };
      for (const auth of [GOV, PLAIN]) {
        const r = await setTokens(auth, body);
        assert.equal(r.json.errCode, -11, `${auth.split(':')[0]}: ${JSON.stringify(r.json)}`);
      }
      const noAuth = await setTokens(null, body);
      assert.equal(noAuth.status, 401);
      assert.equal(noAuth.json.errCode, -9);
      assert.equal((await open(GOV, 'intruder-Token')).errCode, -10);
      assert.equal((await open(GOV, 'kept-Token')).errCode, 0);
    });

    it('a bad body answers -7 naming the first bad field, and changes nothing', async () => {
      await setOk({ token: 'stable-Token', expiredAt: isoAt(clock.now() + HOUR) });
      const updatesBefore = await metric(gw, 'gw_gov_timed_token_updates_total');
      const good = { token: 'good-Token', expiredAt: isoAt(clock.now() + HOUR) };
      const cases: Array<[unknown, string]> = [
        [{}, 'tokens'],
        [{ tokens: 'good-Token' }, 'tokens'],
        [{ tokens: [] }, 'tokens'],
        [{ tokens: [good, { token: 'b', expiredAt: good.expiredAt }, { token: 'c', expiredAt: good.expiredAt }] }, 'tokens'],
        [{ tokens: ['good-Token'] }, 'tokens[0]'],
        [{ tokens: [{ expiredAt: good.expiredAt }] }, 'tokens[0].token'],
        [{ tokens: [{ token: 'has space', expiredAt: good.expiredAt }] }, 'tokens[0].token'],
        [{ tokens: [{ token: 'a,b', expiredAt: good.expiredAt }] }, 'tokens[0].token'],
        [{ tokens: [{ token: 'x' }] }, 'tokens[0].expiredAt'],
        [{ tokens: [good, { token: 'other-Token', expiredAt: '2026-02-30T00:00:00Z' }] }, 'tokens[1].expiredAt'],
        [{ tokens: [good, { token: 'other-Token', expiredAt: 'tomorrow' }] }, 'tokens[1].expiredAt'],
        [{ tokens: [good, good] }, 'tokens[1].token'],
      ];
      for (const [body, field] of cases) {
        const r = await setTokens(ADMIN, body);
        assert.equal(r.status, 200);
        assert.equal(r.json.errCode, -7, JSON.stringify(body));
        assert.ok(r.json.message.includes('`' + field + '`'), `${JSON.stringify(body)}: "${r.json.message}" should name ${field}`);
      }
      const notJson = await setTokens(ADMIN, '{"tokens": [');
      assert.equal(notJson.status, 400);
      assert.equal(notJson.json.errCode, -13);

      assert.equal(await metric(gw, 'gw_gov_timed_token_updates_total'), updatesBefore);
      assert.equal((await open(GOV, 'good-Token')).errCode, -10);
      assert.equal((await open(GOV, 'stable-Token')).errCode, 0);
    });

    it('never writes a timed token into the log', async () => {
      const text = gw.logText();
      // the plugin did log its refusals and updates, so a clean log is not an empty one
      assert.ok(text.includes('gov open refused'));
      assert.ok(text.includes('timed tokens replaced'));
      assert.ok(seen.size > 10);
      for (const token of seen) {
        if (token.length < 6) continue; // short test strings like 'x' occur in any log
        for (const part of token.split(',').map((s) => s.trim())) {
          if (part.length >= 6) assert.ok(!text.includes(part), `the log holds the timed token ${part}`);
        }
      }
    });
  });

  describe('data directory and config', () => {
    let dataDir: string;
    const gateways: TestGateway[] = [];

    beforeEach(() => {
      dataDir = scratchDir('gov-timed-token-e2e');
    });
    afterEach(async () => {
      for (const g of gateways.splice(0)) await g.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    async function openGov(gw: TestGateway, timedToken: string): Promise<number> {
      const r = await gw.api('POST', '/strm/open', { user: { token: 'u' }, typ: 'live', simNo: '13800138000', chanId: 1, timedToken }, GOV);
      if (r.json.errCode === 0) await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId] }, GOV);
      return r.json.errCode;
    }

    it('tokens an admin set survive a restart with the same config and data directory, stored only as digests', async () => {
      const clock = new ManualClock();
      const first = await bootGateway(clock, { dataDir });
      gateways.push(first);
      const set = await first.api('POST', '/strm/timed_token', { tokens: [{ token: 'persist-Token-9', expiredAt: isoAt(clock.now() + HOUR) }] }, ADMIN);
      assert.equal(set.json.errCode, 0);
      await first.stop();

      const files = filesUnder(dataDir);
      assert.ok(files.length > 0, 'the store wrote something into the data directory');
      for (const f of files) assert.ok(!f.bytes.includes('persist-Token-9'), `${f.file} holds the token in clear`);

      const second = await bootGateway(clock, { dataDir });
      gateways.push(second);
      assert.equal(await openGov(second, 'persist-Token-9'), 0);
      assert.equal(await openGov(second, CONFIG_TOKEN), -10, 'the unchanged config does not undo the admin call');
    });

    it('a fresh data directory starts from the config tokens', async () => {
      const clock = new ManualClock();
      const gw = await bootGateway(clock, { dataDir });
      gateways.push(gw);
      assert.equal(await openGov(gw, CONFIG_TOKEN), 0);
      assert.equal(await openGov(gw, 'persist-Token-9'), -10);
    });

    it('takes its tokens from GW_GOV_TIMED_TOKEN_TOKENS, and a bad one stops boot naming the field', async () => {
      const clock = new ManualClock();
      const stub = stubMediaPlugin();
      const boot = (tokens: unknown) =>
        startTestGateway({
          plugins: [{ name: stub.name, def: stub.def }, { name: 'gov-timed-token' }],
          gateway: { applications: APPLICATIONS, dataDir },
          env: { GW_GOV_TIMED_TOKEN_TOKENS: JSON.stringify(tokens) },
          clock,
        });
      await assert.rejects(boot([{ token: 'env-Token-1', expiredAt: '2026-13-01T00:00:00Z' }]), /gov-timed-token.*`tokens\[0\]\.expiredAt`/);
      const gw = await boot([{ token: 'env-Token-1', expiredAt: isoAt(clock.now() + HOUR) }]);
      gateways.push(gw);
      assert.equal(await openGov(gw, 'env-Token-1'), 0);
      assert.equal(await openGov(gw, CONFIG_TOKEN), -10);
    });
  });
});

describe('gov-timed-token with a store that cannot be opened (a full or broken data disk)', function () {
  this.timeout(30_000);

  it('boots, checks with the config tokens, refuses admin changes with -3, and loads the stored set once the store is back', async () => {
    const clock = new ManualClock();
    const dataDir = scratchDir('gov-broken-store');
    // the store's file cannot be opened: a directory sits where the database would be
    fs.mkdirSync(path.join(dataDir, 'state.sqlite'));
    const gw = await bootGateway(clock, { dataDir });
    try {
      const open = (timedToken?: string) =>
        gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '13800000099', chanId: 1, ...(timedToken ? { timedToken } : {}) }, GOV);
      const ok = await open(CONFIG_TOKEN);
      assert.equal(ok.json.errCode, 0, 'gov opens go on with the config tokens');
      assert.equal((await open('wrong')).json.errCode, -10);
      const set = await gw.api('POST', '/strm/timed_token', { tokens: [{ token: 'new-Token-0002', expiredAt: isoAt(clock.now() + HOUR) }] }, ADMIN);
      assert.deepEqual([set.json.errCode, set.json.message], [-3, 'The timed token store is not available; the tokens in use are unchanged.']);
      assert.ok(gw.logs.some((l) => l.msg === 'timed token store unavailable: checking with the config tokens until it is back'));

      fs.rmdirSync(path.join(dataDir, 'state.sqlite'));
      clock.advance(10_000);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(gw.logs.some((l) => l.msg === 'timed token store back: tokens loaded'));
      const set2 = await gw.api('POST', '/strm/timed_token', { tokens: [{ token: 'new-Token-0002', expiredAt: isoAt(clock.now() + HOUR) }] }, ADMIN);
      assert.equal(set2.json.errCode, 0, 'the store takes changes again');
      assert.equal((await open('new-Token-0002')).json.errCode, 0);
      await gw.api('POST', '/strm/close', { reqIds: [ok.json.data[0].reqId] }, GOV);
    } finally {
      await gw.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
