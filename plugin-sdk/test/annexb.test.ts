import { strict as assert } from 'node:assert';
import { NalRanges, splitAnnexB } from '../formats/annexb';
import { NAL_SCAN, scanH264 } from '../formats/h264';
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
});

// The walks as they were before the start codes were shared between a unit's two scans: the reference.
const SC3 = Buffer.from([0, 0, 1]);
function refNextNalStart(buf: Buffer, from: number): number {
  const i = buf.indexOf(SC3, from);
  return i < 0 || i + 3 >= buf.length ? -1 : i + 3;
}
function refScan(buf: Buffer, hevc: boolean): number {
  let flags = 0;
  let p = refNextNalStart(buf, 0);
  if (p < 0) return NAL_SCAN.NO_START_CODE | NAL_SCAN.NEEDS_NORMALISING;
  let first = true;
  while (p >= 0) {
    const sc = p - 3;
    const four = first ? sc === 1 && buf[0] === 0 : sc > 0 && buf[sc - 1] === 0;
    if (!four) flags |= NAL_SCAN.NEEDS_NORMALISING;
    first = false;
    if (hevc) {
      const t = (buf[p] >> 1) & 0x3f;
      if (t < 32) flags |= NAL_SCAN.VCL | (t >= 16 && t <= 21 ? NAL_SCAN.KEY : 0);
      else if (t === 32) flags |= NAL_SCAN.VPS;
      else if (t === 33) flags |= NAL_SCAN.SPS;
      else if (t === 34) flags |= NAL_SCAN.PPS;
    } else {
      const t = buf[p] & 0x1f;
      if (t === 5) flags |= NAL_SCAN.KEY | NAL_SCAN.VCL;
      else if (t >= 1 && t <= 4) flags |= NAL_SCAN.VCL;
      else if (t === 7) flags |= NAL_SCAN.SPS;
      else if (t === 8) flags |= NAL_SCAN.PPS;
    }
    p = refNextNalStart(buf, p + 1);
  }
  return flags;
}
function refRanges(buf: Buffer): number[] {
  const out: number[] = [];
  const n = buf.length;
  let start = -1;
  let i = buf.indexOf(SC3, 0);
  while (i >= 0) {
    if (start >= 0) {
      let end = i;
      while (end > start && buf[end - 1] === 0) end--;
      if (end > start) out.push(start, end);
    }
    start = i + 3;
    i = start + 2 < n ? buf.indexOf(SC3, start) : -1;
  }
  if (start >= 0 && start < n) out.push(start, n);
  else if (start < 0 && n > 0) out.push(0, n);
  return out;
}
function rangesOf(r: NalRanges): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.count; i++) out.push(r.start(i), r.end(i));
  return out;
}

describe('Annex-B start codes found once for a unit\'s kind scan and its muxer\'s NAL scan (startCodesOf)', () => {
  it('scanH264, scanH265 and NalRanges give what their own walks gave, on hostile buffers (zeros, ones, codes back to back, at the ends)', () => {
    let seed = 12345;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000;
    const pick = [0, 0, 0, 1, 1, 0x65, 0x41, 0x67, 0x68, 0x40, 0x42, 0x44, 0x26, 0x02, 0xff];
    const ranges = new NalRanges();
    for (let round = 0; round < 20000; round++) {
      const n = Math.floor(rand() * 24);
      const buf = Buffer.alloc(n);
      for (let i = 0; i < n; i++) buf[i] = pick[Math.floor(rand() * pick.length)];
      // a view into a larger buffer as well as a buffer of its own
      const view = Buffer.concat([Buffer.from([0, 0, 1]), buf, Buffer.from([0, 0])]).subarray(3, 3 + n);
      for (const x of [buf, view]) {
        const hevc = round % 2 === 1;
        const want = refScan(x, hevc);
        assert.equal(hevc ? scanH265(x) : scanH264(x), want, `${hevc ? 'h265' : 'h264'} flags of ${x.toString('hex')}`);
        // the muxer's scan right after (the codes left for it) and once more on its own
        assert.deepEqual(rangesOf((ranges.scan(x), ranges)), refRanges(x), `ranges after a kind scan of ${x.toString('hex')}`);
        assert.deepEqual(rangesOf((ranges.scan(x), ranges)), refRanges(x), `ranges of ${x.toString('hex')}`);
      }
    }
  });

  it('leaves the codes for the same buffer only: another view of the same bytes, or a buffer changed in between, is searched again', () => {
    const ranges = new NalRanges();
    const mem = Buffer.from([0, 0, 0, 1, 0x41, 1, 2, 3, 0, 0, 1, 0x41, 9]);
    assert.equal(scanH264(mem), NAL_SCAN.VCL | NAL_SCAN.NEEDS_NORMALISING);
    // a shorter view of the same memory: not the scanned buffer
    const head = mem.subarray(0, 8);
    assert.deepEqual(rangesOf((ranges.scan(head), ranges)), [4, 8]);
    // taken once: a change after the muxer's scan is seen by the next one
    scanH264(mem);
    assert.deepEqual(rangesOf((ranges.scan(mem), ranges)), [4, 8, 11, 13]);
    mem[9] = 7; // no second start code any more
    assert.deepEqual(rangesOf((ranges.scan(mem), ranges)), [4, 13]);
  });
});
