import assert from 'node:assert/strict';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import { startRedis, type RedisServer } from '../support/redis';

const ADMIN = { appId: 'ops', user: 'ops', password: 'ops-pw', admin: true };
const isoIn = (ms: number) => new Date(Date.now() + ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('gateway store on Redis', function () {
  this.timeout(60_000);
  let redis: RedisServer | undefined;
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await redis?.stop();
    redis = undefined;
  });

  it('an unreachable Redis fails boot naming gateway store.url, not a plugin', async () => {
    const t0 = Date.now();
    await assert.rejects(
      startTestGateway({ plugins: [{ name: 'gov-timed-token' }], gateway: { store: { kind: 'redis', url: 'redis://u:pw-1@127.0.0.1:1/0' } } }),
      (err: Error) => {
        assert.match(err.message, /^test-site\.json: gateway: key store\.url: Redis at redis:\/\/u:\*\*\*@127\.0\.0\.1:1\/0 is not reachable \(ECONNREFUSED/);
        assert.ok(!err.message.includes('pw-1'));
        return true;
      },
    );
    assert.ok(Date.now() - t0 < 9000);
  });

  it('survives a Redis restart after boot: the gateway stays up and the store works again', async () => {
    redis = await startRedis();
    const port = redis.port;
    gw = await startTestGateway({
      plugins: [{ name: 'gov-timed-token' }],
      gateway: { applications: [ADMIN], store: { kind: 'redis', url: redis.url } },
    });
    const auth = `${ADMIN.user}:${ADMIN.password}`;
    const set = (token: string) => gw!.api('POST', '/strm/timed_token', { tokens: [{ token, expiredAt: isoIn(3600_000) }] }, auth);
    assert.equal((await set('before-restart')).json.errCode, 0);

    await redis.stop();
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await fetch(gw.baseUrl + '/healthz')).status, 200, 'Redis down: the gateway still answers');
    redis = await startRedis({ port });

    const deadline = Date.now() + 20_000;
    let last: unknown;
    for (;;) {
      const r = await set('after-restart');
      if (r.json.errCode === 0) break;
      last = r.json;
      if (Date.now() > deadline) assert.fail(`the store did not come back: ${JSON.stringify(last)}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.equal((await fetch(gw.baseUrl + '/healthz')).status, 200);
  });
});
