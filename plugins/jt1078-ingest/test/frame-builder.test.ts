import assert from 'node:assert/strict';
import { FrameBuilder } from '../src/frame-builder';
import { PartCopier } from '../src/part-copier';

describe('jt1078 frame builder: parts named once a read', () => {
  it('copies from any part on, one that shares the read before it included', () => {
    const b = new FrameBuilder();
    const read1 = Buffer.from('..ab..cd..');
    const read2 = Buffer.from('ef..gh');
    b.addPart(read1, 2, 4);
    b.addPart(read1, 6, 8); // the same read: named once
    b.addPart(read2, 0, 2);
    b.addPart(read2, 4, 6);
    const copier = new PartCopier();
    for (const [from, want] of [
      [0, 'abcdefgh'],
      [1, 'cdefgh'],
      [3, 'gh'],
    ] as const) {
      const out = Buffer.alloc(want.length);
      assert.equal(b.copyParts(copier, from, out, 0), want.length);
      assert.equal(out.toString(), want, `from part ${from}`);
    }
  });
});
