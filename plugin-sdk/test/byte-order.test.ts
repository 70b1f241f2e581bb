import assert from 'node:assert/strict';
import { prng } from '../../test/support/prng';
import { readU16BE, readU32BE, readU32LE, writeI24BE, writeU24BE, writeU32BE, writeU32LE } from '../formats/byte-order';

describe("byte-order: reads and writes by index agree with Buffer's checked methods", () => {
  const edges = [0, 1, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];

  it('reads what Buffer reads at every offset, the sign bit included', () => {
    const rnd = prng(7);
    const buf = Buffer.alloc(64);
    for (let i = 0; i < buf.length; i++) buf[i] = Math.floor(rnd() * 256);
    for (let i = 0; i < 16; i++) buf.writeUInt32BE(edges[i % edges.length], 4 * i);
    for (let at = 0; at + 4 <= buf.length; at++) {
      assert.equal(readU16BE(buf, at), buf.readUInt16BE(at), `u16be at ${at}`);
      assert.equal(readU32BE(buf, at), buf.readUInt32BE(at), `u32be at ${at}`);
      assert.equal(readU32LE(buf, at), buf.readUInt32LE(at), `u32le at ${at}`);
    }
  });

  it('writes what Buffer writes, and only its four bytes', () => {
    const rnd = prng(11);
    const values = [...edges, ...Array.from({ length: 200 }, () => Math.floor(rnd() * 0x100000000))];
    for (const v of values) {
      for (const [ours, theirs] of [
        [writeU32BE, 'writeUInt32BE'],
        [writeU32LE, 'writeUInt32LE'],
      ] as const) {
        const a = Buffer.alloc(10, 0xaa);
        const b = Buffer.alloc(10, 0xaa);
        ours(a, v, 3);
        b[theirs](v, 3);
        assert.deepEqual(a, b, `${theirs}(${v})`);
      }
    }
  });

  it('writes 24-bit fields as writeUIntBE / writeIntBE write them, and only their three bytes; a signed value out of range throws as Buffer does', () => {
    const rnd = prng(13);
    const unsigned = [
      0,
      1,
      0x7f,
      0x80,
      0xff,
      0x100,
      0x7fffff,
      0x800000,
      0xfffffe,
      0xffffff,
      ...Array.from({ length: 100 }, () => Math.floor(rnd() * 0x1000000)),
    ];
    /** ours and Buffer's write each value at `at` in a buffer of 0xaa: the same 8 bytes after */
    const agree = (values: number[], at: number, ours: (b: Buffer, v: number) => void, theirs: (b: Buffer, v: number) => void, what: string) => {
      for (const v of values) {
        const a = Buffer.alloc(8, 0xaa);
        const b = Buffer.alloc(8, 0xaa);
        ours(a, v);
        theirs(b, v);
        assert.ok(a.equals(b), `${what} ${v} at ${at}`);
      }
    };
    agree(
      unsigned,
      2,
      (b, v) => writeU24BE(b, v, 2),
      (b, v) => b.writeUIntBE(v, 2, 3),
      'u24',
    );
    const signed = [
      0,
      1,
      -1,
      0x7fffff,
      -0x800000,
      0x12345,
      -0x12345,
      1.5,
      -1.5,
      0.25,
      NaN,
      ...Array.from({ length: 100 }, () => Math.floor(rnd() * 0x1000000) - 0x800000),
    ];
    agree(
      signed,
      4,
      (b, v) => writeI24BE(b, v, 4),
      (b, v) => b.writeIntBE(v, 4, 3),
      'i24',
    );
    for (const v of [0x800000, -0x800001, 0x7fffff + 0.5, Infinity]) {
      assert.throws(() => writeI24BE(Buffer.alloc(4), v, 0), RangeError, `i24 ${v}`);
      assert.throws(() => Buffer.alloc(4).writeIntBE(v, 0, 3), RangeError, `Buffer i24 ${v}`);
    }
  });
});
