import { strict as assert } from 'node:assert';
import { NalRanges, splitAnnexB, startCodeLog } from '../formats/annexb';
import { scanH264 } from '../formats/h264';
import { scanH265 } from '../formats/h265';

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
  it('NalRanges after scanH264/scanH265 of the same Buffer takes their start codes: the same ranges as its own scan', () => {
    // bytes drawn mostly from 0, 1 and a NAL header, so start codes of 3 and 4 bytes, empty NAL units, codes that
    // overlap, zeros before codes and at the end all come up; each case once through the log, once scanned anew
    let seed = 7;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const pick = [0, 0, 0, 0, 1, 1, 0x65, 0x41, 0x67, 0x26, 0x40, 9];
    const ranges = (r: NalRanges): number[] => {
      const out: number[] = [];
      for (let i = 0; i < r.count; i++) out.push(r.start(i), r.end(i));
      return out;
    };
    let logged = 0;
    let spoiled = 0;
    for (let k = 0; k < 20_000; k++) {
      const buf = Buffer.alloc(rnd(40));
      for (let i = 0; i < buf.length; i++) buf[i] = pick[rnd(pick.length)];
      (k % 2 === 0 ? scanH264 : scanH265)(buf);
      if (startCodeLog.buf === buf) logged++;
      else spoiled++;
      const fromLog = new NalRanges();
      fromLog.scan(buf);
      const own = new NalRanges();
      own.scan(Buffer.from(buf));
      assert.deepEqual(ranges(fromLog), ranges(own), `bytes ${buf.toString('hex')}`);
    }
    assert.ok(logged > 15_000 && spoiled > 100, `${logged} through the log, ${spoiled} scanned anew`);
    // another Buffer (a copy, or the same bytes changed into a new payload) is scanned for itself
    const frame = b(0, 0, 0, 1, 0x65, 1, 2);
    scanH264(frame);
    assert.equal(startCodeLog.buf, frame);
    const r = new NalRanges();
    assert.equal(r.scan(b(0, 0, 1, 0x41, 0, 0, 1, 0x41)), 2);
    // the same Buffer with its bytes changed in place after the kinds scan: scanned anew
    const changed = b(0, 0, 0, 1, 0x41, 1, 0, 0, 0, 1, 0x41, 2);
    scanH264(changed);
    changed[9] = 7;
    assert.equal(r.scan(changed), 1);
    assert.deepEqual([r.start(0), r.end(0)], [4, 12]);
  });
});
