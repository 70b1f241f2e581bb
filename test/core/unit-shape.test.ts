import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

/**
 * Units live as long as their GOP, so every heap object in one is something the collector copies and marks at
 * hundreds of streams. Whole-number times must be stored inline, even after some source made a unit with a
 * fractional ms time (a 90 kHz RTP source) and after arithmetic the compiler typed as a double. Measured the way a
 * heap snapshot shows it, in a child process of its own (a snapshot of the test runner would be large and slow).
 */
const MEDIA = path.resolve(__dirname, '../../plugin-sdk/media.js');

const CHILD = `
const v8 = require('node:v8');
const m = require(${JSON.stringify(MEDIA)});
const payload = Buffer.alloc(4);
const keep = [];
// fractional ms first (3001 ticks at 90 kHz), then far past int32 ticks, as other sources may make
keep.push(m.unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: 3001, keyframe: false, payload }));
keep.push(m.unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: 2 ** 33, keyframe: false, payload }));
// then what the JT/T 1078 ingest makes: ms on a 90 kHz time base, enough of them for the optimizing compiler
function ingest(t) {
  return m.unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: t * (90000 / 1000), keyframe: false, payload, receivedAt: 5 });
}
for (let t = 0; t < 200000; t++) { const u = ingest(t); if (t % 100 === 0) keep.push(u); }
function audio(t) {
  return m.shiftUnit(m.audioUnit({ codec: 'g711a', dts: t * 20, timescale: 8000, duration: 160, payload }), 40);
}
for (let t = 0; t < 200000; t++) { const u = audio(t); if (t % 100 === 0) keep.push(u); }
let json = '';
const s = v8.getHeapSnapshot();
s.on('data', (c) => { json += c; });
s.on('end', () => {
  const d = JSON.parse(json);
  const meta = d.snapshot.meta, nf = meta.node_fields.length, ef = meta.edge_fields.length;
  const types = meta.node_types[0], etypes = meta.edge_types[0], strs = d.strings, nodes = d.nodes, edges = d.edges;
  const TI = meta.node_fields.indexOf('type'), EC = meta.node_fields.indexOf('edge_count');
  const ET = meta.edge_fields.indexOf('type'), EN = meta.edge_fields.indexOf('name_or_index'), TO = meta.edge_fields.indexOf('to_node');
  const timeFields = new Set(['dts', 'pts', 'timescale', 'dtsTicks', 'ptsTicks', 'duration']);
  let units = 0, boxed = 0;
  for (let i = 0, e = 0; i < nodes.length; i += nf) {
    const n = nodes[i + EC];
    let isUnit = false, hidden = 0, named = 0;
    for (let j = e; j < e + n; j++) {
      const k = j * ef, et = etypes[edges[k + ET]], to = edges[k + TO];
      if (et === 'property' && strs[edges[k + EN]] === 'payload') isUnit = true;
      if (types[nodes[to + TI]] !== 'number') continue;
      if (et === 'property' && timeFields.has(strs[edges[k + EN]])) named++;
      if (et === 'hidden') hidden++;
    }
    e += n;
    if (isUnit) { units++; boxed += named + hidden; }
  }
  process.stdout.write(JSON.stringify({ units, boxed }));
});
`;

describe('access units: times stored inline', function () {
  this.timeout(60_000);

  it('whole-number times hold no heap number, after fractional and huge ones were made', () => {
    const r = spawnSync(process.execPath, ['-e', CHILD], { encoding: 'utf8', maxBuffer: 1 << 20 });
    assert.equal(r.status, 0, r.stderr);
    const { units, boxed } = JSON.parse(r.stdout) as { units: number; boxed: number };
    assert.ok(units > 4000, `units seen ${units}`);
    // the fractional unit's dts and pts, the huge one's ticks, and the like: a handful, not one or more a unit
    assert.ok(boxed < 20, `${boxed} heap numbers in ${units} units`);
  });
});

/**
 * A unit's receivedAt is performance.now(): a boxed double nearly always, a whole number about once in a million.
 * Before UNIT_SHAPE_SEED was also made with 0, that one unit widened the field's kind and threw away the optimised code
 * of every function that made or read units, mid-service (a stall over every player of a 500-terminal gateway). Here
 * a function that makes units is optimised on fractional times and must stay so after a whole one.
 */
const WHOLE_AFTER_FRACTIONS = `
const m = require(${JSON.stringify(MEDIA)});
const payload = Buffer.alloc(4);
function ingest(t, r) {
  return m.unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: t * 90, keyframe: false, payload, receivedAt: r });
}
%PrepareFunctionForOptimization(ingest);
for (let t = 0; t < 2000; t++) ingest(t, t + 0.5);
%OptimizeFunctionOnNextCall(ingest);
ingest(2000, 2000.5);
const TURBOFANNED = 1 << 6;
const before = (%GetOptimizationStatus(ingest) & TURBOFANNED) !== 0;
ingest(2001, 2001);
const after = (%GetOptimizationStatus(ingest) & TURBOFANNED) !== 0;
process.stdout.write(JSON.stringify({ before, after }));
`;

describe('access units: a whole-number receivedAt', function () {
  this.timeout(60_000);

  it('keeps the code that makes units optimised', () => {
    const args = ['--allow-natives-syntax', '--no-concurrent-recompilation', '-e', WHOLE_AFTER_FRACTIONS];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    const { before, after } = JSON.parse(r.stdout) as { before: boolean; after: boolean };
    assert.ok(before, 'the unit maker was not optimised in the first place: the check proves nothing');
    assert.ok(after, 'a whole-number receivedAt deoptimised the code that makes units');
  });
});
