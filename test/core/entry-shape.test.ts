/**
 * Every unit the bus carries gets an Entry, made by code V8 has optimised with the literal inlined. If anything makes an
 * Entry whose number fields change the hidden class's representation (the GOP cache's, read back from a Float64Array
 * for a player that joins), V8 deprecates the class, yet that optimised code keeps making Entries of the old one, and
 * each is migrated in V8's runtime by the first load that meets it. So: in a child process (V8's natives syntax), the
 * bus's push is optimised first, then a player joins mid-GOP, then the push must still make Entries of the same
 * hidden class as the joiner's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';

const dist = (p: string): string => JSON.stringify(path.join(repoRoot, 'dist', p));

const CHILD = `
const { StreamFormats } = require(${dist('core/bus/formats.js')});
const { GopCache } = require(${dist('core/bus/gop-cache.js')});
const { unitAt } = require(${dist('plugin-sdk/media.js')});
const formats = new StreamFormats({ id: 's' }, {});
const payload = Buffer.from([0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00]);
const unit = unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: 3600, keyframe: true, payload });
function push(i) { return formats.entryOf(unit, i, i); }
%PrepareFunctionForOptimization(push);
for (let i = 0; i < 100; i++) push(i);
%OptimizeFunctionOnNextCall(push);
push(100);
const gop = new GopCache();
gop.add(push(101));
gop.add(push(102));
const joiner = gop.entryList();
const after = push(103);
process.stdout.write(JSON.stringify({
  optimised: (%GetOptimizationStatus(push) & 16) !== 0,
  sameClass: %HaveSameMap(after, joiner[0]),
  seq: joiner.map((e) => e.seq),
}));
`;

describe('bus entries: one hidden class, whoever makes them', function () {
  this.timeout(60_000);

  it('the optimised push still makes Entries of the joiner’s class after a player joined mid-GOP', () => {
    const r = spawnSync(process.execPath, ['--allow-natives-syntax', '-e', CHILD], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { optimised: boolean; sameClass: boolean; seq: number[] };
    assert.deepEqual(out.seq, [101, 102]);
    assert.equal(out.optimised, true, 'the push was not optimised: the test shows nothing');
    assert.equal(out.sameClass, true, 'the optimised push makes Entries of a deprecated hidden class');
  });
});
