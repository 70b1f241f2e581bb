import assert from 'node:assert/strict';
import { FrameBuilder } from '../src/frame-builder';

describe('jt1078 frame builder: parts named once a read', () => {
  it('copies from any part on, one that shares the read before it included', () => {
    const b = new FrameBuilder();
    const read1 = Buffer.from('..ab..cd..');
    const read2 = Buffer.from('ef..gh');
    b.addPart(read1, 2, 4);
    b.addPart(read1, 6, 8); // the same read: named once
    b.addPart(read2, 0, 2);
    b.addPart(read2, 4, 6);
    for (const [from, want] of [
      [0, 'abcdefgh'],
      [1, 'cdefgh'],
      [3, 'gh'],
    ] as const) {
      const out = Buffer.alloc(want.length);
      assert.equal(b.copyParts(from, out, 0), want.length);
      assert.equal(out.toString(), want, `from part ${from}`);
    }
  });

  it('copies from views inside larger memory (a shared read buffer, a store) at their own offsets', () => {
    const mem = Buffer.from('xxxxAB..CDyyyyEFzz');
    const read1 = mem.subarray(4, 10); // 'AB..CD'
    const read2 = mem.subarray(14, 16); // 'EF'
    const b = new FrameBuilder();
    b.addPart(read1, 0, 2);
    b.addPart(read1, 4, 6);
    b.addPart(read2, 0, 2);
    b.addPart(read1, 2, 3); // back to the first read: named again
    const out = Buffer.alloc(9, 0x5f);
    assert.equal(b.copyParts(0, out, 2), 9);
    assert.equal(out.toString(), '__ABCDEF.');
    assert.equal(b.copyParts(4, out, 0), 0, 'nothing from past the last part');
  });
});
