import assert from 'node:assert/strict';
import * as v8 from 'node:v8';
import { AggregatorRegistry, Registry } from 'prom-client';
import { createRegistry, isCompactColumn, metricsFor } from '../../core/metrics';
import { aggregateText, scrapeJson, scrapeText } from '../../core/metrics-scrape';

const tick = () => new Promise<void>((r) => setImmediate(r));

/** a registry with one of every kind of metric the gateway registers, label values that need escaping included */
function fullRegistry(rows: Array<{ labels: Record<string, string>; values: number[] }>, onRead = () => undefined as void): Registry {
  const registry = new Registry();
  const m = metricsFor(registry, 'some-plugin');
  m.counter('plain_total', 'a counter without labels').inc(3);
  const c = m.counter('labelled_total', 'a counter\nwith "labels" and a \\ in its help', ['kind']);
  c.inc({ kind: 'a' }, 2);
  c.inc({ kind: 'quote " back \\ line\nfeed' }, 1.5);
  m.gauge('collected', 'a collected gauge', ['x'], (g) => g.set({ x: 'y' }, 7));
  m.histogram('seconds', 'a histogram', [0.1, 1], ['op']).observe({ op: 'open' }, 0.5);
  m.hotCounter('hot_total', 'a hot counter', ['t']).child({ t: 'v' }).add(9);
  const hh = m.hotHistogram('hot_seconds', 'a hot histogram', [0.001, 0.01]);
  hh.observe(0.005);
  m.gaugeTable(
    [
      { name: 'stream_a', help: 'column a' },
      { name: 'stream_b', help: 'column b\\with a backslash' },
    ],
    ['stream', 'layout'],
    (emit) => {
      onRead();
      for (const r of rows) emit(r.labels, r.values);
    },
  );
  return registry;
}

const someRows: Array<{ labels: Record<string, string>; values: number[] }> = [
  { labels: { stream: '013912345678/1', layout: '2016' }, values: [1, 2] },
  { labels: { stream: 'odd "name"\\x\ny', layout: '2019' }, values: [NaN, Infinity] },
  { labels: { stream: 'no-layout' }, values: [-Infinity, 0.25] },
];

describe('metrics scrape in turns (core/metrics-scrape.ts)', () => {
  it('writes the same text as prom-client, byte for byte, for every kind of metric', async () => {
    const a = fullRegistry(someRows);
    const b = fullRegistry(someRows);
    const ours = await scrapeText(a);
    const theirs = await b.metrics();
    assert.equal(ours, theirs);
    // the escaping and special values went through the fast path, not around it
    assert.match(ours, /gw_some_plugin_stream_a\{stream="odd \\"name\\"\\\\x\\ny",layout="2019"\} Nan/);
    assert.match(ours, /gw_some_plugin_stream_b\{stream="no-layout"\} 0.25/);
    assert.match(ours, /# HELP gw_some_plugin_stream_b column b\\\\with a backslash/);
  });

  it("sends prom-client's JSON for every metric but gauge-table columns, which go as two arrays", async () => {
    const ours = await scrapeJson(fullRegistry(someRows));
    const theirs = await fullRegistry(someRows).getMetricsAsJSON();
    assert.equal(ours.length, theirs.length);
    for (let i = 0; i < ours.length; i++) {
      const o = ours[i];
      if (!o.name.includes('_stream_')) {
        assert.deepEqual(JSON.parse(JSON.stringify(o)), JSON.parse(JSON.stringify(theirs[i])));
        continue;
      }
      assert.ok(isCompactColumn(o), o.name);
      assert.deepEqual(o.rows, ['{stream="013912345678/1",layout="2016"}', '{stream="odd \\"name\\"\\\\x\\ny",layout="2019"}', '{stream="no-layout"}']);
      assert.deepEqual(
        [...o.values],
        theirs[i].values.map((v) => v.value),
      );
    }
    // through the IPC's serialisation (advanced: structured clone) as they are
    const cloned = v8.deserialize(v8.serialize(ours)) as typeof ours;
    const columns = cloned.filter(isCompactColumn);
    assert.equal(columns.length, 2);
    assert.ok(columns.every((m) => m.values instanceof Float64Array));
    // the table's label texts cross once for all its columns (one array, referenced again)
    assert.equal(columns[0].rows, columns[1].rows);
  });

  it('lets the event loop go between metrics once its slice is spent, and reads a table once for all its columns', async () => {
    let reads = 0;
    const rows = someRows.map((r) => ({ ...r, values: [...r.values] }));
    // a stream leaves in the turn after the table's first column read the rows, before its second column is made:
    // both columns still show it
    const registry = fullRegistry(rows, () => {
      if (++reads === 1) setImmediate(() => rows.pop());
    });
    let turns = 0;
    let counting = true;
    const countTurns = () => {
      if (counting) {
        turns++;
        setImmediate(countTurns);
      }
    };
    setImmediate(countTurns);
    const text = await scrapeText(registry, 0);
    counting = false;
    assert.ok(turns >= 5, `the scrape of ${registry.getMetricsAsArray().length} metrics with a 0 ms slice took ${turns} turns`);
    assert.equal(reads, 1, 'the rows were read once for both columns');
    assert.equal(rows.length, 2, 'the stream left during the scrape');
    assert.match(text, /gw_some_plugin_stream_a\{stream="no-layout"\}/);
    assert.match(text, /gw_some_plugin_stream_b\{stream="no-layout"\}/);
    // once the scrape is over, the hold is gone: the next one reads the rows as they are now
    await tick();
    const next = await scrapeText(registry, 0);
    assert.equal(reads, 2);
    assert.doesNotMatch(next, /no-layout/);
  });

  it('keeps the old single-turn reuse for prom-client callers, and a long slice makes it one turn', async () => {
    let reads = 0;
    const registry = fullRegistry(someRows, () => {
      reads++;
    });
    await registry.metrics();
    assert.equal(reads, 1, "prom-client's own scrape read the rows once for both columns");
    await tick();
    let otherTurn = false;
    setImmediate(() => {
      otherTurn = true;
    });
    await scrapeText(registry, 60_000);
    assert.equal(otherTurn, false, 'with a slice longer than the scrape, nothing else ran in between');
    assert.equal(reads, 2);
  });

  it('scrapes the process metrics of a real registry without error, every series present', async () => {
    const registry = createRegistry();
    metricsFor(registry, 'core').gaugeTable([{ name: 'rows', help: 'h' }], ['id'], (emit) => {
      for (let i = 0; i < 1000; i++) emit({ id: String(i) }, [i]);
    });
    const text = await scrapeText(registry, 0);
    assert.match(text, /^gw_process_process_cpu_user_seconds_total \d/m);
    assert.equal(text.match(/^gw_core_rows\{/gm)?.length, 1000);
    assert.ok(text.endsWith('\n') && !text.endsWith('\n\n'));
  });

  it("sums workers' metrics exactly as prom-client's AggregatorRegistry does, over several turns", async () => {
    // two workers: some series in both (summed), per-stream rows in one each, process metrics with their own
    // aggregators (start time 'omit', version 'first', ...)
    const a = fullRegistry(someRows);
    const b = fullRegistry([{ labels: { stream: '013900000002/3', layout: '2019' }, values: [5, 6] }, someRows[0]]);
    const pa = createRegistry();
    const pb = createRegistry();
    // the process metrics read once (they move between reads), the same JSON to both sides
    const processA = await scrapeJson(pa);
    const processB = await scrapeJson(pb);
    const parts = [
      [...(await scrapeJson(a)), ...processA],
      [...(await scrapeJson(b)), ...processB],
    ];
    // prom-client's own JSON of the same registries, for its own aggregation
    const theirParts = [
      [...(await a.getMetricsAsJSON()), ...processA],
      [...(await b.getMetricsAsJSON()), ...processB],
    ];
    // each side gets what the IPC would hand it (advanced serialisation: a structured clone)
    const copy = <T>(x: T): T => v8.deserialize(v8.serialize(x)) as T;
    let otherTurns = 0;
    let counting = true;
    const count = () => {
      if (counting) {
        otherTurns++;
        setImmediate(count);
      }
    };
    setImmediate(count);
    const ours = await aggregateText(copy(parts), 0);
    counting = false;
    const theirs = await AggregatorRegistry.aggregate(copy(theirParts)).metrics();
    assert.equal(ours, theirs);
    assert.match(ours, /gw_some_plugin_stream_a\{stream="013912345678\/1",layout="2016"\} 2\n/, 'a series in both workers is summed');
    assert.match(ours, /gw_some_plugin_plain_total 6\n/);
    assert.doesNotMatch(ours, /process_start_time_seconds/, "'omit' metrics are left out");
    assert.ok(otherTurns >= 5, `the aggregation let the loop go (${otherTurns} other turns)`);
    // a worker that sent a column as JSON (a mixed group) is summed with the compact ones all the same
    const mixed = copy(parts);
    const at = mixed[1].findIndex((m) => m.name === 'gw_some_plugin_stream_a');
    mixed[1][at] = copy(theirParts[1][at]);
    assert.equal(await aggregateText(mixed, 0), theirs);
  });

  it('refuses a metric with an aggregator prom-client does not know, naming it', async () => {
    const bad = [[{ name: 'gw_x', help: 'h', type: 'gauge', aggregator: 'median', values: [{ value: 1, labels: {} }] }]];
    await assert.rejects(aggregateText(bad as never), /gw_x: 'median' is not a defined aggregator/);
  });
});
