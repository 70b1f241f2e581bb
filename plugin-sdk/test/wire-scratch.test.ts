import assert from 'node:assert/strict';
import { WireScratch } from '../wire-scratch';

/** where a view sits: its memory and its offset in it */
const at = (b: Buffer): [ArrayBufferLike, number] => [b.buffer, b.byteOffset];

describe('plugin-sdk WireScratch: where units are laid out for one write', () => {
  it('lays each unit over the last while the kernel takes every write whole', () => {
    const s = new WireScratch();
    const a = s.take(5000);
    const b = s.take(7000);
    assert.deepEqual(at(b), at(a));
    assert.equal(b.length, 7000);
  });

  it('lays units after one a write kept, in the same slab, until it is full', () => {
    const s = new WireScratch();
    const a = s.take(5001);
    s.escape();
    const b = s.take(5000);
    assert.equal(b.buffer, a.buffer, 'one slab for both');
    assert.ok(b.byteOffset >= a.byteOffset + a.length, `${b.byteOffset} overlaps the kept unit`);
    assert.equal(b.byteOffset % 8, 0, 'aligned');
    // a unit laid out after b without an escape goes where b was: b's write was taken whole
    assert.deepEqual(at(s.take(100)), at(b));
    s.escape();
    const half = WireScratch.MAX / 2;
    const c = s.take(half);
    s.escape();
    const d = s.take(half);
    assert.notEqual(d.buffer, a.buffer, 'no room left: a new slab');
    assert.equal(d.byteOffset, 0);
    assert.equal(c.buffer, a.buffer);
  });

  it('shares the last unit with the next player of its kind only', () => {
    const s = new WireScratch();
    const key = {};
    const v = s.take(10);
    s.keep(key, 1, v);
    assert.equal(s.cached(key, 1), v);
    assert.equal(s.cached(key, 2), undefined);
    s.take(10);
    assert.equal(s.cached(key, 1), undefined, 'laid over by the next unit');
  });
});
