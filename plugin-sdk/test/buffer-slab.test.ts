import assert from 'node:assert/strict';
import { BufferSlab } from '../buffer-slab';

describe('BufferSlab', () => {
  it('hands out disjoint, 8-byte aligned slices of one chunk until it is full', () => {
    const slab = new BufferSlab(1024);
    const a = slab.take(10);
    const b = slab.take(100);
    assert.equal(a.buffer, b.buffer, 'small takes share a chunk');
    assert.equal(a.length, 10);
    assert.equal(b.length, 100);
    assert.equal((b.byteOffset - a.byteOffset) % 8, 0);
    assert.ok(b.byteOffset >= a.byteOffset + a.length, 'slices do not overlap');
    a.fill(0xaa);
    b.fill(0xbb);
    assert.ok(
      a.every((x) => x === 0xaa),
      'writing b left a intact',
    );
  });

  it('starts a new chunk when a take does not fit, and keeps earlier slices valid', () => {
    const slab = new BufferSlab(1024);
    const first = slab.take(200);
    first.fill(1);
    const slices = [first];
    for (let i = 0; i < 5; i++) slices.push(slab.take(200));
    const chunks = new Set(slices.map((s) => s.buffer));
    assert.equal(chunks.size, 2, 'six 200-byte takes (208 with alignment) need two 1 KiB chunks');
    assert.ok(first.every((x) => x === 1));
  });

  it('gives a take over a quarter of the chunk its own allocation', () => {
    const slab = new BufferSlab(1024);
    const small = slab.take(16);
    const big = slab.take(257);
    assert.equal(big.length, 257);
    assert.notEqual(big.buffer, small.buffer);
    assert.equal(slab.take(16).buffer, small.buffer, 'a large take does not waste the current chunk');
  });

  it('release() drops the current chunk; the next take starts a fresh one', () => {
    const slab = new BufferSlab(1024);
    const before = slab.take(16);
    before.fill(7);
    slab.release();
    const after = slab.take(16);
    assert.notEqual(after.buffer, before.buffer);
    assert.ok(before.every((x) => x === 7));
  });
});
