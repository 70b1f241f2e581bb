import assert from 'node:assert/strict';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../testkit';
import presenceAllowlist from '../index';

describe('example plugin: presence-allowlist (through the test kit)', () => {
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'presence-allowlist', def: presenceAllowlist, config: { offline: ['13800138000'] } },
      ],
    });
  });
  after(() => gw.stop());

  it('refuses an open for an offline terminal with -27, whatever leading zeros the SIM has', async () => {
    const r = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '013800138000', chanId: 1 });
    assert.equal(r.json.errCode, -27);
  });

  it('lets other terminals through', async () => {
    const r = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '13900000000', chanId: 1 });
    assert.equal(r.json.errCode, 0);
  });

  it('serves its route and counts refusals in /metrics', async () => {
    const list = await gw.api('GET', '/presence/offline');
    assert.deepEqual(list.json.data, ['13800138000']);
    const metrics = await (await fetch(gw.baseUrl + '/metrics')).text();
    assert.match(metrics, /^gw_presence_allowlist_refusals_total 1$/m);
  });
});
