/**
 * Several workers and the password-guessing brake (README, "Password guessing"): with two workers the primary
 * deals API connections to either, and the brake must count an address's failures wherever they land: authFailLimit
 * guesses, not authFailLimit per worker, then 429 from every worker, the right password included.
 */
import assert from 'node:assert/strict';
import { CallbackReceiver, startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';

const LIMIT = 6;
const WRONG = `Basic ${Buffer.from('a:wrong').toString('base64')}`;

describe('the login brake on a gateway with two workers (real process)', function () {
  this.timeout(60_000);
  let gw: ClusterGateway;
  const cb = new CallbackReceiver();

  before(async () => {
    await cb.start();
    gw = await startClusterGateway('cluster-login', { workers: 2, authFailLimit: LIMIT, authFailWindowSec: 60, authBlockSec: 60 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
    ]);
  });

  after(() => {
    gw?.stop();
    cb.stop();
  });

  it("counts an address's failed logins across workers and blocks it on every worker", async () => {
    const statuses: number[] = [];
    // a new connection each time: the primary deals them to the workers in turn
    for (let i = 0; i < 4 * LIMIT; i++) {
      statuses.push((await gw.api('GET', '/strm/status', undefined, WRONG)).status);
      // paced a little, as a message between workers is not instant (the brake is shared, not transactional)
      await new Promise((r) => setTimeout(r, 50));
    }
    const refusedWith401 = statuses.filter((s) => s === 401).length;
    assert.ok(refusedWith401 <= LIMIT + 1, `${refusedWith401} guesses were checked before the block (limit ${LIMIT}): ${statuses.join(' ')}`);
    assert.deepEqual(statuses.slice(-2 * LIMIT), Array(2 * LIMIT).fill(429), statuses.join(' '));
    // the right password is refused too while the block lasts, on both workers
    for (let i = 0; i < 4; i++) assert.equal((await gw.api('GET', '/strm/status')).status, 429);
    const m = (await gw.api('GET', '/healthz')).json;
    assert.equal(m.workers, 2);
  });
});
