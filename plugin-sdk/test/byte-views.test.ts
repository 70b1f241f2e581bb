import assert from 'node:assert/strict';
import { prng } from '../../test/support/prng';
import { copyBytes, lengthOf, memOf, offsetOf, setBytes } from '../byte-views';

describe("byte-views: a view's fields and copies through the typed-array functions read once", () => {
  it("reads a Buffer's memory, offset and length as its own properties do, for a pooled slice and a view of a view", () => {
    const pooled = Buffer.from('a pooled buffer');
    const inner = Buffer.allocUnsafeSlow(100).subarray(10, 60).subarray(5, 25);
    for (const v of [pooled, inner, new Uint8Array(7), Buffer.alloc(0)]) {
      assert.equal(memOf(v), v.buffer);
      assert.equal(offsetOf(v), v.byteOffset);
      assert.equal(lengthOf(v), v.length);
    }
  });

  it('copies what Buffer.copy copies for every range of a view that sits inside a larger memory, and nothing around it', () => {
    const rnd = prng(5);
    const mem = Buffer.allocUnsafeSlow(256);
    for (let i = 0; i < mem.length; i++) mem[i] = Math.floor(rnd() * 256);
    const src = mem.subarray(40, 120);
    for (let from = 0; from <= src.length; from += 7) {
      for (let to = from; to <= src.length; to += 11) {
        const a = Buffer.alloc(100, 0xcc);
        const b = Buffer.alloc(100, 0xcc);
        assert.equal(copyBytes(src, from, to, a, 9), to - from);
        src.copy(b, 9, from, to);
        assert.ok(a.equals(b), `[${from}, ${to})`);
      }
    }
    // the whole of src: copied from src itself, no view of its memory
    const whole = Buffer.alloc(100, 0xcc);
    assert.equal(copyBytes(src, 0, src.length, whole, 9), src.length);
    assert.ok(whole.subarray(9, 9 + src.length).equals(src) && whole[8] === 0xcc && whole[9 + src.length] === 0xcc, 'whole');
  });

  it('throws on a range outside the source, where a view of its memory would read the bytes beside it', () => {
    const mem = Buffer.alloc(64, 0x11);
    const src = mem.subarray(8, 16);
    const dst = Buffer.alloc(64);
    assert.throws(() => copyBytes(src, 0, 9, dst, 0), RangeError);
    assert.throws(() => copyBytes(src, -1, 4, dst, 0), RangeError);
    assert.throws(() => copyBytes(src, 5, 4, dst, 0), RangeError);
    assert.throws(() => copyBytes(src, 0, 8, dst, 60), RangeError, 'does not fit in dst');
    assert.ok(dst.equals(Buffer.alloc(64)), 'nothing written');
  });

  it('setBytes puts a view whole at an offset, as set does', () => {
    const dst = Buffer.alloc(6);
    setBytes(dst, Buffer.from([1, 2, 3]), 2);
    assert.deepEqual([...dst], [0, 0, 1, 2, 3, 0]);
    assert.throws(() => setBytes(dst, Buffer.from([1, 2, 3]), 4), RangeError);
  });
});
