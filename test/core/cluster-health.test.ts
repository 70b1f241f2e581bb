/**
 * With several workers, /healthz speaks for the whole gateway, not for the worker a health check landed on. A part
 * one worker reports degraded shows whichever worker answers (a monitor must not see it only when its check lands on
 * that worker), and a worker that is not running (restarting after a crash) makes the gateway degraded with a part
 * `workers` naming it until it is back.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';
import { startClusterGateway, workerPids, type ClusterGateway } from '../support/cluster-gateway';
import { waitFor } from '../e2e/helpers';

const PROBE = path.join(repoRoot, 'dist', 'test', 'core', 'fixtures', 'degraded-plugin.js');

describe('/healthz on a gateway with two workers (real process)', function () {
  this.timeout(60_000);
  let gw: ClusterGateway;

  before(async () => {
    gw = await startClusterGateway('cluster-health', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'degraded-probe', module: PROBE, config: { worker: 1 } } as { name: string; config: Record<string, unknown> },
    ]);
  });
  after(() => gw?.stop());

  it('a part degraded in one worker shows whichever worker answers', async () => {
    // new connections each time: the primary deals them to both workers in turn
    for (let i = 0; i < 6; i++) {
      const h = await gw.api('GET', '/healthz');
      assert.equal(h.status, 200);
      assert.equal(h.json.status, 'degraded', `answer ${i}: ${h.text}`);
      assert.equal(h.json.degraded['degraded-probe.disk'].reason, 'no space left on device (test)');
      assert.deepEqual(h.json.degraded['degraded-probe.disk'].workers, [1]);
      // and without credentials (metricsAccess open here, so counts come too): the status is the gateway's
      const bare = await gw.api('GET', '/healthz', undefined, '');
      assert.equal(bare.json.status, 'degraded');
    }
  });

  it('a worker that is not running makes the gateway degraded, naming it, until it is back', async () => {
    const before = workerPids(gw.child.pid!);
    process.kill(before.get(0)!, 'SIGKILL');
    // (a call dealt to the dying worker is reset: asked again)
    const seen = await waitFor(
      'worker 0 reported missing',
      async () => {
        const h = await gw.api('GET', '/healthz').catch(() => undefined);
        return h?.json?.degraded?.workers ? h.json : undefined;
      },
      20_000,
      20,
    );
    assert.deepEqual(seen.degraded.workers.workers, [0]);
    assert.match(seen.degraded.workers.reason, /worker 0 not running/);
    await waitFor(
      'worker 0 back',
      async () => {
        const h = await gw.api('GET', '/healthz').catch(() => undefined);
        return h?.json && !h.json.degraded?.workers && h.json.degraded?.['degraded-probe.disk'] ? h.json : undefined;
      },
      30_000,
      100,
    );
  });
});
