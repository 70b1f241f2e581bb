/**
 * With several workers, a worker's death does not make the gateway's summed counters fall. Prometheus reads a fall
 * as a counter reset and counts the whole remaining sum as new (core/cluster/retired-counters.ts).
 */
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { metricsFor } from '../../core/metrics';
import { aggregateText, scrapeJson, type WorkerMetric } from '../../core/metrics-scrape';
import { RetiredCounters } from '../../core/cluster/retired-counters';
import { startClusterGateway, workerPids, workerRestarted, type ClusterGateway } from '../support/cluster-gateway';
import { metricSum, waitFor } from '../e2e/helpers';

/** one worker's metrics: a labelled counter, a histogram, a gauge and a gauge table, at the given counts */
async function workerMetrics(counted: number, observed: number[], live: number): Promise<WorkerMetric[]> {
  const registry = new Registry();
  const m = metricsFor(registry, 'core');
  m.counter('things_total', 'things', ['kind']).inc({ kind: 'a' }, counted);
  const h = m.histogram('op_seconds', 'ops', [0.1, 1]);
  for (const v of observed) h.observe(v);
  m.gauge('open', 'open things', [], (g) => g.set(live));
  m.gaugeTable([{ name: 'stream_bytes', help: 'bytes a stream' }], ['stream'], (emit) => emit({ stream: `s${live}` }, [live]));
  return scrapeJson(registry);
}

const line = (text: string, series: string): string | undefined => text.split('\n').find((l) => l.startsWith(`${series} `));

describe('retired counters: what dead workers counted stays in the cluster sum', () => {
  it("adds a dead worker's counters and histograms at its last scrape, never its gauges, and sums repeated deaths", async () => {
    const rc = new RetiredCounters();
    const w0 = await workerMetrics(5, [0.05], 2);
    rc.answered(1, await workerMetrics(99, [], 9)); // an older answer: only the last one counts
    rc.answered(1, await workerMetrics(7, [0.5, 2], 3));
    assert.deepEqual(rc.withRetired([w0]), [w0], 'nothing retired while every worker lives');
    rc.exited(1);
    // its replacement counts from 0
    let text = await aggregateText(rc.withRetired([w0, await workerMetrics(1, [0.05], 4)]) as WorkerMetric[][]);
    assert.equal(line(text, 'gw_core_things_total{kind="a"}'), 'gw_core_things_total{kind="a"} 13', '5 + 7 retired + 1');
    assert.equal(line(text, 'gw_core_op_seconds_count'), 'gw_core_op_seconds_count 4');
    assert.equal(line(text, 'gw_core_op_seconds_bucket{le="0.1"}'), 'gw_core_op_seconds_bucket{le="0.1"} 2');
    assert.equal(line(text, 'gw_core_op_seconds_bucket{le="1"}'), 'gw_core_op_seconds_bucket{le="1"} 3');
    assert.equal(line(text, 'gw_core_open'), 'gw_core_open 6', "the live workers' gauges only (2 + 4), not the dead one's 3");
    assert.equal(line(text, 'gw_core_stream_bytes{stream="s3"}'), undefined, "the dead worker's table rows are gone");
    // it dies again after counting 1: both deaths stay
    rc.answered(1, await workerMetrics(1, [0.05], 4));
    rc.exited(1);
    rc.exited(1); // an exit without a new answer adds nothing twice
    text = await aggregateText(rc.withRetired([w0, await workerMetrics(0, [], 1)]) as WorkerMetric[][]);
    assert.equal(line(text, 'gw_core_things_total{kind="a"}'), 'gw_core_things_total{kind="a"} 13', '5 + 7 + 1 retired + 0');
    assert.equal(line(text, 'gw_core_op_seconds_count'), 'gw_core_op_seconds_count 4');
    // a worker that died before any scrape leaves nothing
    rc.exited(0);
    text = await aggregateText(rc.withRetired([w0]) as WorkerMetric[][]);
    assert.equal(line(text, 'gw_core_things_total{kind="a"}'), 'gw_core_things_total{kind="a"} 13');
  });

  describe('on a gateway with two workers (real process)', function () {
    this.timeout(60_000);
    let gw: ClusterGateway;
    before(async () => {
      gw = await startClusterGateway('retired-counters', { workers: 2 }, [
        { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      ]);
    });
    after(() => gw?.stop());

    const scrape = async () => {
      const r = await gw.api('GET', '/metrics').catch(() => undefined);
      return r?.status === 200 ? r.text : undefined;
    };
    const badLogins = (text: string) => metricSum(text, 'gw_core_auth_failures_total', { reason: 'bad-password' });
    const wrong = `Basic ${Buffer.from('a:wrong').toString('base64')}`;

    it('a worker killed with SIGKILL: the summed counters do not fall, and count on', async () => {
      // new connections each time: the primary deals them to both workers in turn (under the login brake's 20)
      for (let i = 0; i < 6; i++) assert.equal((await gw.api('GET', '/strm/status', undefined, wrong)).status, 401);
      const before = await waitFor(
        '6 bad logins counted',
        async () => {
          const t = await scrape();
          return t !== undefined && badLogins(t) === 6 ? t : undefined;
        },
        5000,
        50,
      );
      const cpuBefore = metricSum(before, 'gw_process_cpu_seconds_total');
      const pids = workerPids(gw.child.pid!);
      process.kill(pids.get(1)!, 'SIGKILL');
      await workerRestarted(gw.child.pid!, 1, pids.get(1));
      // both workers answering again (a scrape while worker 1 boots has worker 0 and the retired part only)
      const after = await waitFor(
        'a scrape with both workers',
        async () => {
          const h = await gw.api('GET', '/healthz').catch(() => undefined);
          return h?.json && !h.json.degraded?.workers ? scrape() : undefined;
        },
        30_000,
        100,
      );
      assert.equal(badLogins(after), 6, "the killed worker's bad logins are still in the sum");
      assert.ok(metricSum(after, 'gw_process_cpu_seconds_total') >= cpuBefore, 'process CPU seconds never fall');
      for (let i = 0; i < 2; i++) assert.equal((await gw.api('GET', '/strm/status', undefined, wrong)).status, 401);
      await waitFor(
        '8 bad logins counted',
        async () => {
          const t = await scrape();
          return t !== undefined && badLogins(t) === 8 ? true : undefined;
        },
        5000,
        50,
      );
    });
  });
});
