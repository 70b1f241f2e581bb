import assert from 'node:assert/strict';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { metricsFor } from '../../core/metrics';

describe("hot metrics: the media path's counters and histograms", () => {
  it("a hot histogram exposes exactly what prom-client's own Histogram does for the same observations", async () => {
    const buckets = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5];
    const ours = new Registry();
    const hot = metricsFor(ours, 'p').hotHistogram('lat_seconds', 'help text', buckets);
    const theirs = new Registry();
    const ref = new Histogram({ name: 'gw_p_lat_seconds', help: 'help text', buckets, registers: [theirs] });
    // bounds themselves (le is inclusive), between, under the first and past the last
    const values = [0, 0.001, 0.0011, 0.005, 0.02, 0.1, 0.2, 0.5, 0.7, 12, 0.0049, 0.05];
    for (const v of values) {
      hot.observe(v);
      ref.observe(v);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
  });

  it("a hot counter's sums per label set reach the registry at each scrape, and keep counting after", async () => {
    const reg = new Registry();
    const c = metricsFor(reg, 'p').hotCounter('bytes_total', 'bytes', ['listener', 'transport']);
    const tcp = c.child({ listener: 'live2013', transport: 'tcp' });
    const udp = c.child({ listener: 'live2013', transport: 'udp' });
    tcp.add(100);
    tcp.add(23);
    udp.add(7);
    const ref = new Registry();
    const rc = new Counter({ name: 'gw_p_bytes_total', help: 'bytes', labelNames: ['listener', 'transport'], registers: [ref] });
    rc.inc({ listener: 'live2013', transport: 'tcp' }, 123);
    rc.inc({ listener: 'live2013', transport: 'udp' }, 7);
    assert.equal(await reg.metrics(), await ref.metrics());
    tcp.add(1);
    rc.inc({ listener: 'live2013', transport: 'tcp' }, 1);
    assert.equal(await reg.metrics(), await ref.metrics(), 'a second scrape adds only what came since');
  });

  it('a gauge table exposes what prom-client Gauges set with the same labels do, read once a scrape for all its columns', async () => {
    const rows = new Map<string, { layout: string; values: number[] }>([
      ['013800000001_1', { layout: 'v2016', values: [10, 0] }],
      // every character the text format escapes in a label value
      ['odd"name\\with\nbreaks', { layout: 'unknown', values: [2.5, 7] }],
    ]);
    let reads = 0;
    const ours = new Registry();
    metricsFor(ours, 'p').gaugeTable(
      [
        { name: 'stream_packets', help: 'packets' },
        { name: 'stream_lost', help: 'lost "ones"' },
      ],
      ['stream', 'layout'],
      (emit) => {
        reads++;
        for (const [stream, r] of rows) emit({ stream, layout: r.layout }, r.values);
      },
    );
    const theirs = (): Registry => {
      const reg = new Registry();
      const g = [
        new Gauge({ name: 'gw_p_stream_packets', help: 'packets', labelNames: ['stream', 'layout'], registers: [reg] }),
        new Gauge({ name: 'gw_p_stream_lost', help: 'lost "ones"', labelNames: ['stream', 'layout'], registers: [reg] }),
      ];
      for (const [stream, r] of rows) g.forEach((gauge, i) => gauge.set({ stream, layout: r.layout }, r.values[i]));
      return reg;
    };
    assert.equal(await ours.metrics(), await theirs().metrics());
    assert.equal(reads, 1, 'one pass over the rows for both columns');
    assert.deepEqual(await ours.getMetricsAsJSON(), await theirs().getMetricsAsJSON(), 'what cluster aggregation reads');
    rows.delete('013800000001_1');
    rows.get('odd"name\\with\nbreaks')!.values[1] = 8;
    await new Promise((r) => setImmediate(r));
    assert.equal(await ours.metrics(), await theirs().metrics(), 'the next scrape reads the rows again: a row gone is gone');
  });
});
