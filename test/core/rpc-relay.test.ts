/**
 * The primary's relay of calls between workers (core/cluster/rpc-relay.ts): a call to every worker finishes when
 * each has answered or died, once, whatever the order.
 */
import assert from 'node:assert/strict';
import { RpcRelay } from '../../core/cluster/rpc-relay';

describe('cluster: calls relayed between workers', () => {
  it("a call to all finishes with every worker's answer, in the order they came", () => {
    const r = new RpcRelay();
    const id = r.open(2, 41, 'metrics', true, [0, 1, 2]);
    assert.equal(r.answer(id, 1, { ok: true, value: 'b' }), undefined);
    assert.equal(r.answer(id, 0, { ok: true, value: 'a' }), undefined);
    const done = r.answer(id, 2, { ok: true, value: 'c' });
    assert.ok(done);
    assert.deepEqual({ from: done.from, fromId: done.fromId, method: done.method, all: done.all }, { from: 2, fromId: 41, method: 'metrics', all: true });
    assert.deepEqual(
      done.results.map((x) => x.value),
      ['b', 'a', 'c'],
    );
    assert.equal(r.size, 0, 'forgotten once finished');
    assert.equal(r.answer(id, 2, { ok: true, value: 'late' }), undefined);
  });

  it('a worker that answered and then died is not counted again: the call still waits for the others', () => {
    const r = new RpcRelay();
    const id = r.open(0, 7, 'metrics', true, [0, 1]);
    assert.equal(r.answer(id, 0, { ok: true, value: 'w0' }), undefined);
    // worker 0 dies before worker 1 answers: its answer is in already
    assert.deepEqual(r.died(0), []);
    assert.equal(r.size, 1);
    const done = r.answer(id, 1, { ok: true, value: 'w1' });
    assert.ok(done, "finished by worker 1's answer");
    assert.deepEqual(done.results, [
      { ok: true, value: 'w0' },
      { ok: true, value: 'w1' },
    ]);
  });

  it('a worker that dies owing answers fails just its part of each call waiting on it', () => {
    const r = new RpcRelay();
    const all = r.open(0, 1, 'status', true, [0, 1, 2]);
    const one = r.open(2, 5, 'open', false, [1]);
    const other = r.open(2, 6, 'open', false, [2]);
    r.answer(all, 0, { ok: true, value: [] });
    const done = r.died(1);
    assert.equal(done.length, 1, 'the call to worker 1 alone finished; the call to all still waits for worker 2');
    assert.equal(done[0].fromId, 5);
    assert.equal(r.get(one), undefined, 'and is forgotten');
    assert.deepEqual(done[0].results, [{ ok: false, error: { message: 'worker 1 died', errCode: -3 } }]);
    const finished = r.answer(all, 2, { ok: true, value: [] });
    assert.ok(finished);
    assert.deepEqual(
      finished.results.map((x) => x.ok),
      [true, false, true],
    );
    assert.equal(r.size, 1, 'the call to worker 2 still waits');
    assert.ok(r.get(other));
    assert.equal(r.answer(other, 1, { ok: true }), undefined, 'an answer from a worker the call did not go to is ignored');
    assert.ok(r.answer(other, 2, { ok: true }));
    assert.equal(r.size, 0);
  });
});
