import { strict as assert } from 'node:assert';
import { NalRanges, splitAnnexB } from '../formats/annexb';

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);

describe('Annex-B NAL units (splitAnnexB, NalRanges)', () => {
  it('finds NAL units after 3- and 4-byte start codes, trailing zeros trimmed, empty ones left out', () => {
    const buf = b(0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3, 0, 0, 1, 0, 0, 1, 0x65, 4, 5, 0);
    const nals = splitAnnexB(buf).map((n) => [...n]);
    // the 4-byte code's leading zero is trimmed from the NAL before it; an empty NAL between two codes is left out
    assert.deepEqual(nals, [[0x67, 1, 2], [0x68, 3], [0x65, 4, 5, 0]], 'the last NAL keeps its trailing zero (it ends the buffer)');
  });

  it('keeps bytes before the first start code out, and takes a buffer without any as one NAL unit', () => {
    assert.deepEqual(splitAnnexB(b(9, 9, 0, 0, 1, 0x41, 7)).map((n) => [...n]), [[0x41, 7]]);
    assert.deepEqual(splitAnnexB(b(0x41, 7, 8)).map((n) => [...n]), [[0x41, 7, 8]]);
    assert.deepEqual(splitAnnexB(b()), []);
    assert.deepEqual(splitAnnexB(b(0, 0, 1)), [], 'a start code that ends the buffer starts nothing');
  });

  it('NalRanges: the same units as splitAnnexB, as offsets into the buffer, for any number of them; reused per scan', () => {
    const parts: Buffer[] = [];
    for (let i = 0; i < 40; i++) parts.push(i % 3 === 0 ? b(0, 0, 1) : b(0, 0, 0, 1), Buffer.alloc(1 + (i % 5), 0x41 + i));
    const buf = Buffer.concat(parts);
    const r = new NalRanges();
    assert.equal(r.scan(buf), 40);
    const views = splitAnnexB(buf);
    for (let i = 0; i < r.count; i++) assert.ok(buf.subarray(r.start(i), r.end(i)).equals(views[i]), `unit ${i}`);
    assert.equal(r.scan(b(0, 0, 1, 0x65, 1)), 1, 'a second scan starts over');
    assert.deepEqual([r.start(0), r.end(0)], [3, 5]);
  });
});
