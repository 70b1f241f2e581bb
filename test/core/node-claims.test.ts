import assert from 'node:assert/strict';
import { NodeClaims, PENDING_MS } from '../../core/cluster/node-claims';
import { shardOf } from '../../core/cluster/shard';

/** SIMs from `first` up that hash to worker 0, 1, … of `workers` in turn */
function simsHashingTo(workers: number, first = 13800138000): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < workers; i++) if (shardOf(String(first + i), workers) === out.length) out.push(String(first + i));
  return out;
}

describe("a node's claims: which worker owns each terminal", () => {
  const up = () => true;

  it('places a SIM nobody holds on the worker with the fewest terminals, ties to the worker its SIM hashes to', () => {
    const c = new NodeClaims(3);
    const [s0, s1, s2] = simsHashingTo(3);
    // a quiet node places as the hash does
    assert.equal(c.place(`${s1}_1`, up), 1);
    assert.equal(c.place(`${s2}_1`, up), 2);
    // worker 0 has none: it takes the next, whatever its hash
    assert.equal(c.place(`${String(Number(s0) + 1000)}_1`, up), 0);
    // every channel of a terminal goes where its SIM is
    assert.equal(c.place(`${s1}_7`, up), 1);
    assert.equal(c.ownerOf(`${s1}_200`), 1);
  });

  it("a SIM is held while one of its streams lives; the last closed, it is nobody's; a stream elsewhere moves it there", () => {
    const c = new NodeClaims(2);
    const [s0] = simsHashingTo(2);
    assert.equal(c.place(`${s0}_1`, up), 0);
    c.held(0, `${s0}_1`, 1);
    c.held(0, `${s0}_2`, 1);
    c.held(0, `${s0}_1`, -1);
    assert.equal(c.ownerOf(s0), 0);
    c.held(0, `${s0}_2`, -1);
    assert.equal(c.ownerOf(s0), undefined);
    // a worker that serves a stream of a SIM owns it (an rtsp pull, a stream opened without a place)
    c.held(1, `${s0}_3`, 1);
    assert.equal(c.ownerOf(`${s0}_9`), 1);
    assert.deepEqual(
      c
        .takeChanges()
        .filter(([sim]) => sim === s0)
        .pop(),
      [s0, 1],
    );
    // a close told by a worker that does not own it changes nothing
    c.held(0, `${s0}_3`, -1);
    assert.equal(c.ownerOf(s0), 1);
  });

  it("a place no stream takes up lapses after its time; a dead worker's SIMs go at once and are placed again elsewhere", () => {
    let now = 1000;
    const c = new NodeClaims(2, () => now);
    const [s0, s1] = simsHashingTo(2);
    assert.equal(c.place(s0, up), 0);
    now += PENDING_MS + 1;
    c.sweep();
    assert.equal(c.ownerOf(s0), undefined);
    assert.equal(c.loadOf(0), 0);
    assert.equal(c.place(s1, up), 1);
    c.held(1, `${s1}_1`, 1);
    c.workerGone(1);
    assert.equal(c.ownerOf(s1), undefined);
    // worker 1 restarting: only worker 0 takes places meanwhile
    assert.equal(
      c.place(s1, (w) => w === 0),
      0,
    );
    assert.deepEqual(c.snapshot(), [[s1, 0]]);
  });
});
