import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { definePlugin, type PluginContext, type PluginDefinition } from '../../../plugin-sdk';
import { videoUnit } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { scratchDir } from '../../../test/support/paths';
import { CallbackDispatcher } from '../src/delivery';
import { trustedCertificates } from '../src/trust-store';
import { makeTestPki, type TestPki } from './certificates';
import { memoryLogger, notice, Receiver, until } from './helpers';

// HTTPS callbacks against a real TLS receiver on loopback, its certificate issued by a private CA made with openssl.

const EXPECTED_AUTH = 'Basic ' + Buffer.from('us@er:p:ss').toString('base64');
const PASSWORD_FORMS = ['p:ss', 'p%3Ass', Buffer.from('us@er:p:ss').toString('base64')];

describe('callback-notifier: HTTPS callbacks', function () {
  this.timeout(30_000);
  let pki: TestPki;
  let dir: string;
  const receivers: Receiver[] = [];

  before(() => {
    dir = scratchDir('callback-tls');
    pki = makeTestPki(dir);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  async function httpsReceiver(cert: { key: Buffer; cert: Buffer }): Promise<Receiver> {
    const r = await new Receiver(() => 200, cert).start();
    receivers.push(r);
    return r;
  }

  describe('the dispatcher', () => {
    let log: ReturnType<typeof memoryLogger>;
    const dispatchers: CallbackDispatcher[] = [];
    beforeEach(() => {
      log = memoryLogger();
    });
    afterEach(async () => {
      await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
      for (const line of log.lines) {
        for (const secret of PASSWORD_FORMS) assert.ok(!line.includes(secret), `log line leaks credentials: ${line}`);
      }
    });
    function dispatcher(trustedCa: string[]): CallbackDispatcher {
      const d = new CallbackDispatcher({ logger: log.logger, backoffBaseMs: 5, backoffMaxMs: 20, retryForMs: 3000, trustedCa });
      dispatchers.push(d);
      return d;
    }

    it('delivers ready then closed over TLS to a server whose CA is trusted, with the Basic credentials', async () => {
      const r = await httpsReceiver(pki.server);
      const d = dispatcher(trustedCertificates([pki.caFile], {}));
      const cb = `https://us%40er:p%3Ass@127.0.0.1:${r.port}/base`;
      d.enqueue('req-1', cb, notice('req-1', 'ready'));
      d.enqueue('req-1', cb, notice('req-1', 'closed', { closeCause: 1, closeReason: 'clientReq' }));
      await r.waitForArrivals(2);
      assert.deepEqual(
        r.arrivals.map((a) => [a.path, a.body.act, a.encrypted, a.authorization]),
        [
          ['/base/strm_notif', 'ready', true, EXPECTED_AUTH],
          ['/base/strm_notif', 'closed', true, EXPECTED_AUTH],
        ],
      );
      await until(() => d.stats().delivered === 2, 5000, 'both deliveries counted');
    });

    it('refuses an untrusted certificate at the first attempt, without retrying, and says how to trust its CA', async () => {
      const r = await httpsReceiver(pki.server);
      // the system's store and Node's roots, but not the private CA
      const d = dispatcher(trustedCertificates([], {}));
      d.enqueue('req-2', `https://us%40er:p%3Ass@127.0.0.1:${r.port}/base`, notice('req-2', 'ready'));
      await until(() => d.stats().failed === 1, 5000, 'the notice given up');
      assert.equal(d.stats().retried, 0, 'a certificate refusal is not retried');
      assert.equal(r.arrivals.length, 0, 'nothing reached the handler: the handshake failed');
      const line = log.lines.find((l) => l.includes('callback notice given up'));
      assert.ok(line, 'the give-up is logged');
      assert.match(line, /TLS certificate refused \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)/);
      assert.match(line, /caFiles/);
      assert.match(line, /us%40er:\*\*\*@127\.0\.0\.1/, 'the cb is logged redacted');
    });

    it('refuses a trusted certificate issued for another name (localhost only, called as 127.0.0.1)', async () => {
      const r = await httpsReceiver(pki.localhostOnly);
      const d = dispatcher(trustedCertificates([pki.caFile], {}));
      d.enqueue('req-3', `https://127.0.0.1:${r.port}/base`, notice('req-3', 'ready'));
      await until(() => d.stats().failed === 1, 5000, 'the notice given up');
      assert.equal(d.stats().retried, 0);
      assert.equal(r.arrivals.length, 0);
      assert.ok(
        log.lines.some((l) => l.includes('ERR_TLS_CERT_ALTNAME_INVALID')),
        'the log names the name mismatch',
      );
    });
  });

  describe('trustedCertificates', () => {
    it('adds NODE_EXTRA_CA_CERTS and the configured files to the roots, and names a file that is missing or holds no certificate', () => {
      const base = trustedCertificates([], {});
      const withEnv = trustedCertificates([], { NODE_EXTRA_CA_CERTS: pki.caFile });
      const withFile = trustedCertificates([pki.caFile], {});
      const ca = fs.readFileSync(pki.caFile, 'utf8').trim();
      assert.equal(withEnv.length, base.length + 1);
      assert.equal(withEnv.at(-1), ca);
      assert.equal(withFile.at(-1), ca);
      assert.throws(() => trustedCertificates([path.join(dir, 'nope.pem')], {}), /nope\.pem \(ENOENT\)/);
      const key = path.join(dir, 'ca.key');
      assert.throws(() => trustedCertificates([key], {}), /ca\.key holds no PEM certificate/);
    });
  });

  describe('the plugin in a gateway', () => {
    let gw: TestGateway;
    let captured: PluginContext<object> | undefined;
    const probe: PluginDefinition<object> = definePlugin<object>({
      name: 'probe',
      setup(ctx) {
        captured = ctx;
      },
    });

    after(async () => {
      await gw?.stop();
    });

    it('with caFiles set, a request with an https cb gets ready and closed over TLS', async () => {
      const stub = stubMediaPlugin();
      gw = await startTestGateway({
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'probe', def: probe },
          { name: 'callback-notifier', config: { caFiles: [pki.caFile], allowLoopback: true } },
        ],
        captureLogs: true,
      });
      const r = await httpsReceiver(pki.server);
      const opened = await gw.api('POST', '/strm/open', {
        user: { token: 'tls-user' },
        typ: 'live',
        simNo: '013800138000',
        chanId: 1,
        keepIntv: 600,
        cb: `https://us%40er:p%3Ass@127.0.0.1:${r.port}/hooks`,
      });
      assert.equal(opened.json.errCode, 0, JSON.stringify(opened.json));
      const reqId = opened.json.data[0].reqId as string;
      const stream = captured!.sessions.findStream('13800138000', 1, 'live');
      assert.ok(stream);
      const pub = stream.media.attachPublisher();
      pub.setTrack({ kind: 'video', codec: 'h264', width: 352, height: 288 });
      pub.push(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: Buffer.from([0, 0, 0, 1, 0x65, 0x88]) }));
      const closed = await gw.api('POST', '/strm/close', { reqIds: [reqId] });
      assert.deepEqual(closed.json.data, [{ reqId, closed: true }]);
      await r.waitForArrivals(2);
      assert.deepEqual(
        r.arrivals.map((a) => [a.path, a.body.act, a.body.reqId, a.encrypted, a.authorization]),
        [
          ['/hooks/strm_notif', 'ready', reqId, true, EXPECTED_AUTH],
          ['/hooks/strm_notif', 'closed', reqId, true, EXPECTED_AUTH],
        ],
      );
      for (const secret of PASSWORD_FORMS) assert.ok(!gw.logText().includes(secret), 'the log leaks the callback password');
    });

    it('a caFiles entry that does not exist stops boot with the key and the file named', async () => {
      const missing = path.join(dir, 'missing-ca.pem');
      await assert.rejects(
        startTestGateway({ plugins: [{ name: 'callback-notifier', config: { caFiles: [missing] } }] }),
        (err: Error) => /callback-notifier/.test(err.message) && /caFiles/.test(err.message) && err.message.includes('missing-ca.pem (ENOENT)'),
      );
    });
  });
});
