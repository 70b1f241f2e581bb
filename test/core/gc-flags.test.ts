/**
 * gateway.gcHeapGrowthPercent is set while the process runs (v8.setFlagsFromString), which V8 allows for this flag
 * today; a Node whose V8 froze its flags after start would ignore or refuse it. So: two child processes hold the same
 * live heap and churn the same objects that outlive a scavenge, one with the growth set to 20 %; the old generation
 * of that one must stay well below the other's (V8's own factor goes up to 4).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';

const FLAGS = path.join(repoRoot, 'dist', 'core', 'gc-flags.js');

const CHILD = `
const v8 = require('node:v8');
const growth = Number(process.argv[1]);
if (growth > 0) require(${JSON.stringify(FLAGS)}).setHeapGrowth(growth);
const live = [];
for (let i = 0; i < 300000; i++) live.push({ a: i, b: [i, i + 1] });
// objects that live for 100,000 allocations: promoted, then garbage in the old generation
const ring = new Array(100000);
let peak = 0;
for (let k = 0; k < 6000000; k++) {
  ring[k % ring.length] = { x: k, y: [k] };
  if (k % 10000 === 0) peak = Math.max(peak, v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_size);
}
process.stdout.write(String(peak));
`;

function oldSpacePeak(growth: number): number {
  const r = spawnSync(process.execPath, ['-e', CHILD, String(growth)], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout);
}

describe('gc-flags: the old generation growth set at run time', function () {
  this.timeout(120_000);

  it("takes effect: with 20 % the old space peaks well below V8's own choice", () => {
    const own = oldSpacePeak(0);
    const tight = oldSpacePeak(20);
    assert.ok(own > 0 && tight > 0, `${own} / ${tight}`);
    assert.ok(tight < own / 1.5, `old space peak ${(tight / 1e6).toFixed(1)} MB with 20 % against ${(own / 1e6).toFixed(1)} MB by default`);
  });

  it('refuses what is not a percentage', async () => {
    const { setHeapGrowth } = await import('../../core/gc-flags');
    assert.throws(() => setHeapGrowth(-1), /whole number >= 0/);
    assert.throws(() => setHeapGrowth(1.5), /whole number >= 0/);
  });
});

/** a literal whose every object survives: V8's pretenuring, when on, decides to allocate it in the old generation */
const SURVIVORS = `
if (process.argv[1] === 'off') require(${JSON.stringify(FLAGS)}).turnOffPretenuring();
function make(k) { return { k, a: k + 1, b: k + 2, c: null }; }
let keep = [];
for (let r = 0; r < 4; r++) {
  keep = [];
  for (let i = 0; i < 400000; i++) keep.push(make(i));
}
process.stdout.write(String(keep.length));
`;

function pretenuringTrace(mode: 'on' | 'off'): string {
  const r = spawnSync(process.execPath, ['--trace-pretenuring-statistics', '-e', SURVIVORS, mode], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

describe('gc-flags: allocation-site pretenuring turned off at run time', function () {
  this.timeout(120_000);

  it('takes effect: V8 tenures a literal whose objects all survive, and with it off decides nothing', () => {
    const on = pretenuringTrace('on');
    assert.match(on, /pretenuring: AllocationSite.*=> tenure/, 'V8 decides to tenure the literal (else this test shows nothing)');
    const off = pretenuringTrace('off');
    assert.ok(off.endsWith('400000'), off.slice(-200));
    assert.doesNotMatch(off, /pretenuring:/, 'off: no feedback taken, no decision');
  });
});
