import assert from 'node:assert/strict';
import type { AccessUnit } from '../../../plugin-sdk';
import { Jt1078Parser } from '../src/parser';
import { Jt1078StreamAssembler } from '../src/stream-assembler';
import { CAPTURES, Collector, checksum, prng, readCapture } from './helpers';

function auKey(u: AccessUnit): string {
  return `${u.kind}/${u.codec}/${u.dts}/${u.keyframe}/${u.payload.length}/${checksum(u.payload)}`;
}

/**
 * The capture through parser and assembler the way a TCP link feeds them: each chunk in one scratch buffer that is
 * overwritten after every push (as the shared socket read buffer is), the assembler detached after each chunk.
 */
function assembleBorrowed(data: Buffer, chunkSizes: () => number, reusePacket = false): Collector {
  const out = new Collector();
  const asm = new Jt1078StreamAssembler(out);
  const parser = new Jt1078Parser((p) => asm.push(p), { reusePacket });
  const scratch = Buffer.alloc(70000);
  for (let at = 0; at < data.length;) {
    const n = Math.min(chunkSizes(), data.length - at);
    data.copy(scratch, 0, at, at + n);
    at += n;
    parser.push(scratch.subarray(0, n));
    asm.detach();
    scratch.fill(0xee);
  }
  parser.end();
  asm.flush();
  return out;
}

function assembleOwned(data: Buffer): Collector {
  const out = new Collector();
  const asm = new Jt1078StreamAssembler(out);
  const parser = new Jt1078Parser((p) => asm.push(p));
  parser.push(Buffer.from(data));
  parser.end();
  asm.flush();
  return out;
}

describe('jt1078 ingest on borrowed chunks (a read buffer reused after each push)', function () {
  this.timeout(60000);
  for (const c of CAPTURES) {
    it(`${c.file}: the same access units, byte for byte, whatever the chunk sizes`, () => {
      const data = readCapture(c.file);
      const want = assembleOwned(data).units.map(auKey);
      assert.equal(want.filter((k) => k.startsWith('video')).length, c.videoFrames);
      const rnd = prng(0x5eed + c.packets);
      for (const sizes of [() => 1 + Math.floor(rnd() * 40), () => 1 + Math.floor(rnd() * 2000), () => 1 + Math.floor(rnd() * 70000), () => 65536]) {
        // as a TCP link reads (one packet object reused, its body left in the read: the reassembler's parts name a
        // read's Buffer once and the packets after it as the same read), and with a packet and body view each
        for (const reuse of [true, false]) {
          const got = assembleBorrowed(data, sizes, reuse);
          // units the assembler handed on must not change when the buffer they came from is overwritten
          assert.deepEqual(got.units.map(auKey), want, `reusePacket ${reuse}`);
        }
      }
    });
  }

  it('a frame straddling many reads is copied as it goes and stays exact (grown store, reset on a drop)', () => {
    const data = readCapture(CAPTURES[1].file);
    const want = assembleOwned(data).units.map(auKey);
    // 7-byte reads: every subpackage straddles several, so every frame is detached dozens of times
    for (const reuse of [true, false]) assert.deepEqual(assembleBorrowed(data, () => 7, reuse).units.map(auKey), want, `reusePacket ${reuse}`);
  });
});
