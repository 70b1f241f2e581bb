import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestGateway } from '../../../plugin-sdk/testkit';
import { scratchDir } from '../../../test/support/paths';

describe('recorder config', () => {
  let dir = '';
  beforeEach(() => {
    dir = scratchDir('recorder-config');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const boot = (config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) =>
    startTestGateway({ plugins: [{ name: 'recorder', config }], gateway: { dataDir: path.join(dir, 'data') }, env, captureLogs: true });

  for (const [what, config, env, key] of [
    ['an unknown time zone', { timeZone: 'Mars/Olympus' }, {}, /config key timeZone: unknown time zone 'Mars\/Olympus'/],
    ['a store root that cannot be a folder', { storeRoot: path.join('blocker', 'records') }, {}, /config key storeRoot: cannot write to .*blocker/],
    ['a bad retention value from the environment', {}, { GW_RECORDER_MAX_TOTAL_BYTES: '-5' }, /key maxTotalBytes: .*from GW_RECORDER_MAX_TOTAL_BYTES/],
    ['a catalog URL of another kind', { postgresUrl: 'mysql://db/x' }, {}, /key postgresUrl: postgresUrl must be a postgres/],
    [
      'an unreachable PostgreSQL (without showing the URL)',
      { postgresUrl: 'postgres://user:s3cret@127.0.0.1:1/db' },
      {},
      /config key postgresUrl: cannot open the catalog/,
    ],
  ] as const) {
    it(`refuses to start with ${what}, naming the key`, async () => {
      fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
      fs.writeFileSync(path.join(dir, 'data', 'blocker'), 'a file, not a folder');
      await assert.rejects(boot(config, env), (err: Error) => {
        assert.match(err.message, /plugin recorder/);
        assert.match(err.message, key);
        assert.ok(!err.message.includes('s3cret'), 'no password in the message');
        return true;
      });
    });
  }

  it('takes keys from the environment (GW_RECORDER_<KEY>) and puts records under <dataDir>/records by default', async () => {
    const gw = await boot({}, { GW_RECORDER_MAX_TOTAL_BYTES: '1000000', GW_RECORDER_TIME_ZONE: 'Asia/Shanghai' });
    try {
      const ready = gw.logs.find((l) => l.msg === 'recorder ready') as { retention: unknown; storeRoot: string } | undefined;
      assert.deepEqual(ready?.retention, { maxTotalBytes: 1_000_000 });
      assert.equal(ready?.storeRoot, path.join(dir, 'data', 'records'));
      assert.ok(fs.statSync(path.join(dir, 'data', 'records')).isDirectory());
      assert.ok(fs.existsSync(path.join(dir, 'data', 'recorder', 'records.sqlite')), 'embedded catalog in the data directory');
    } finally {
      await gw.stop();
    }
  });
});
