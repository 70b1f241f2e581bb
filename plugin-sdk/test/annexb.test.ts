import { strict as assert } from 'node:assert';
import { joinAnnexB, NalRanges, splitAnnexB } from '../formats/annexb';
import { MAX_INDEXED_NALS, NAL_ARENA, NAL_FLAG, NAL_SCANS, NalArena, NalUnits } from '../formats/nal-index';
import { audioUnit, shiftUnit, unitAt, videoUnit } from '../media';
import { NAL_SCAN, scanH264 } from '../formats/h264';
import { scanH265 } from '../formats/h265';

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);

describe('Annex-B NAL units (splitAnnexB, NalRanges)', () => {
  it('finds NAL units after 3- and 4-byte start codes, trailing zeros trimmed, empty ones left out', () => {
    const buf = b(0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3, 0, 0, 1, 0, 0, 1, 0x65, 4, 5, 0);
    const nals = splitAnnexB(buf).map((n) => [...n]);
    // the 4-byte code's leading zero is trimmed from the NAL before it; an empty NAL between two codes is left out
    assert.deepEqual(
      nals,
      [
        [0x67, 1, 2],
        [0x68, 3],
        [0x65, 4, 5, 0],
      ],
      'the last NAL keeps its trailing zero (it ends the buffer)',
    );
  });

  it('keeps bytes before the first start code out, and takes a buffer without any as one NAL unit', () => {
    assert.deepEqual(
      splitAnnexB(b(9, 9, 0, 0, 1, 0x41, 7)).map((n) => [...n]),
      [[0x41, 7]],
    );
    assert.deepEqual(
      splitAnnexB(b(0x41, 7, 8)).map((n) => [...n]),
      [[0x41, 7, 8]],
    );
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

// The reference: the NAL units as a plain walk of the start codes finds them, and their kinds.
const SC3 = Buffer.from([0, 0, 1]);
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
function refFlags(buf: Buffer, hevc: boolean): number {
  const first = buf.indexOf(SC3, 0);
  if (first < 0) return NAL_SCAN.NO_START_CODE | NAL_SCAN.NEEDS_NORMALISING;
  let flags = first === 1 && buf[0] === 0 ? 0 : NAL_SCAN.NEEDS_NORMALISING;
  // every later start code must be a 4-byte one
  for (let i = buf.indexOf(SC3, first + 3); i >= 0 && first + 5 < buf.length; i = i + 5 < buf.length ? buf.indexOf(SC3, i + 3) : -1) {
    if (buf[i - 1] !== 0) flags |= NAL_SCAN.NEEDS_NORMALISING;
  }
  const r = refRanges(buf);
  for (let k = 0; k < r.length; k += 2) {
    const p = r[k];
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
  }
  return flags;
}
function rangesOf(r: { count: number; start(i: number): number; end(i: number): number }): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.count; i++) out.push(r.start(i), r.end(i));
  return out;
}

describe('NAL index: found once when a unit is made, read by every output (nal-index.ts)', () => {
  it("a unit's index, NalRanges and scanH264/scanH265 agree with a plain walk, on hostile buffers (zeros, ones, codes back to back, at the ends)", () => {
    let seed = 12345;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000;
    const pick = [0, 0, 0, 1, 1, 0x65, 0x41, 0x67, 0x68, 0x40, 0x42, 0x44, 0x26, 0x02, 0xff];
    const ranges = new NalRanges();
    const reader = new NalUnits();
    for (let round = 0; round < 20000; round++) {
      const n = Math.floor(rand() * 24);
      const buf = Buffer.alloc(n);
      for (let i = 0; i < n; i++) buf[i] = pick[Math.floor(rand() * pick.length)];
      // a view into a larger buffer as well as a buffer of its own
      const view = Buffer.concat([Buffer.from([0, 0, 1]), buf, Buffer.from([0, 0])]).subarray(3, 3 + n);
      for (const x of [buf, view]) {
        const hevc = round % 2 === 1;
        const want = refFlags(x, hevc);
        assert.equal(hevc ? scanH265(x) : scanH264(x), want, `${hevc ? 'h265' : 'h264'} flags of ${x.toString('hex')}`);
        assert.deepEqual(rangesOf((ranges.scan(x), ranges)), refRanges(x), `ranges of ${x.toString('hex')}`);
        const u = videoUnit({ codec: hevc ? 'h265' : 'h264', dts: 0, payload: x });
        reader.of(u);
        assert.deepEqual(rangesOf(reader), refRanges(x), `the unit's index of ${x.toString('hex')}`);
        assert.equal(reader.flags & ~NAL_FLAG.AUD, want, `the unit's flags of ${x.toString('hex')}`);
      }
    }
  });

  it('a unit is searched once, when it is made; shifted or cached units keep the index; reading it searches nothing', () => {
    const payload = joinAnnexB([b(0x67, 1, 2), b(0x68, 3), b(0x65, 4, 5, 6)]);
    const before = NAL_SCANS.count;
    const u = videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload });
    assert.equal(NAL_SCANS.count, before + 1, 'one search to make the unit');
    const moved = shiftUnit(u, 40);
    assert.equal(moved.nals, u.nals);
    assert.equal(moved.nalsAt, u.nalsAt);
    const reader = new NalUnits();
    for (const x of [u, moved, { ...u }]) assert.deepEqual((reader.of(x), rangesOf(reader)), [4, 7, 11, 13, 17, 21]);
    assert.equal(reader.flags, NAL_FLAG.SPS | NAL_FLAG.PPS | NAL_FLAG.KEY | NAL_FLAG.VCL);
    assert.equal(NAL_SCANS.count, before + 1, 'no search to read it');
    const audio = audioUnit({ codec: 'g711a', dts: 0, timescale: 8000, payload: b(1, 2, 3) });
    assert.equal(audio.nals, undefined);
    assert.equal(reader.of(audio), 0, 'audio has no NAL units');
  });

  it('an index handed over by the publisher is taken as it is; one that does not fit the payload is not trusted', () => {
    const payload = joinAnnexB([b(0x41, 9, 9)]);
    NAL_ARENA.begin();
    NAL_ARENA.add(4, 7, NAL_FLAG.VCL);
    const at = NAL_ARENA.finish(payload.length);
    const before = NAL_SCANS.count;
    const u = unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: 0, keyframe: false, payload, nals: NAL_ARENA.mem, nalsAt: at });
    assert.equal(NAL_SCANS.count, before, 'no search');
    assert.equal(u.nals, NAL_ARENA.mem);
    const other = joinAnnexB([b(0x41, 9, 9), b(0x41, 8)]);
    const v = unitAt({ kind: 'video', codec: 'h264', timescale: 90000, dtsTicks: 0, keyframe: false, payload: other, nals: NAL_ARENA.mem, nalsAt: at });
    assert.equal(NAL_SCANS.count, before + 1, "searched: the index was another payload's");
    const reader = new NalUnits();
    assert.deepEqual((reader.of(v), rangesOf(reader)), [4, 7, 11, 13]);
  });

  it('a unit made by hand (a literal, or a spread with another payload) is searched on its first read only, frozen or not', () => {
    const payload = joinAnnexB([b(0x65, 1), b(0x41, 2, 3)]);
    const made = videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload });
    const byHand = Object.freeze({ ...made, payload: joinAnnexB([b(0x41, 7)]) });
    const reader = new NalUnits();
    const before = NAL_SCANS.count;
    assert.deepEqual((reader.of(byHand), rangesOf(reader)), [4, 6]);
    assert.deepEqual((reader.of(byHand), rangesOf(reader)), [4, 6]);
    assert.equal(NAL_SCANS.count, before + 1);
  });

  it('an index too large for the ring moves the arena to a larger array; units of the old one keep their indexes', () => {
    const arena = new NalArena(1024);
    const first = arena.mem;
    const small = arena.index(joinAnnexB([b(0x41, 1)]), 'h264');
    const many = joinAnnexB(Array.from({ length: 700 }, (_x, i) => b(0x41, i & 0xff, 1)));
    const at = arena.index(many, 'h264');
    assert.notEqual(arena.mem, first, 'an array of its own: 700 units need more than the ring holds');
    const reader = new NalUnits();
    assert.equal(reader.ofIndex(arena.mem, at), 700);
    assert.deepEqual([reader.start(699), reader.end(699)], [699 * 7 + 4, 699 * 7 + 7]);
    assert.equal(reader.ofIndex(first, small), 1, 'the old array is written no more');
  });

  it("the ring goes round; a unit whose index was written over is searched again, never read from another payload's", () => {
    const arena = new NalArena(256);
    const payload = joinAnnexB([b(0x65, 1), b(0x41, 2, 3)]);
    const at = arena.index(payload, 'h264');
    const unit = { ...videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload }), nals: arena.mem, nalsAt: at };
    const reader = new NalUnits();
    assert.deepEqual((reader.of(unit), rangesOf(reader)), [4, 6, 10, 13], 'its own index while intact');
    // payloads of the same length and other NAL units, until the ring has gone round past the unit's index
    const other = joinAnnexB([b(0x41, 9, 9, 9, 9, 9, 9, 9, 9)]);
    assert.equal(other.length, payload.length);
    for (let i = 0; i < 100; i++) arena.index(other, 'h264');
    const before = NAL_SCANS.count;
    assert.deepEqual((reader.of(unit), rangesOf(reader)), [4, 6, 10, 13], 'found again: the same NAL units');
    assert.equal(NAL_SCANS.count, before + 1, 'one search');
  });

  it("a unit's nalsAt stays a small integer however many laps the ring goes (past 2^31 it deoptimised every stage)", () => {
    const arena = new NalArena(64);
    const payload = joinAnnexB([b(0x65, 1), b(0x41, 2, 3)]);
    const reader = new NalUnits();
    let laps = 0;
    let lastPos = -1;
    // 64 ints hold 6 indexes of 10: each seventh goes round; 2,000 laps is ~100 times what 2^31 allowed before
    for (let i = 0; laps < 2000; i++) {
      const at = arena.index(payload, 'h264');
      assert.ok(at >= 0 && at < 2 ** 30 && (at | 0) === at, `nalsAt ${at} after ${laps} laps`);
      // where in the ring: nalsAt's low 21 bits
      const pos = at % 2 ** 21;
      if (pos < lastPos) laps++;
      lastPos = pos;
      const unit = { ...videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload }), nals: arena.mem, nalsAt: at };
      assert.equal(reader.of(unit), 2);
    }
    for (let i = 0; i < 2000; i++) arena.reset();
    const at = arena.index(payload, 'h264');
    assert.ok(at < 2 ** 30 && (at | 0) === at, `nalsAt ${at} after 2,000 resets`);
  });

  it('an index holds MAX_INDEXED_NALS at most: the rest of a payload of start codes is its last NAL unit', () => {
    const nals = MAX_INDEXED_NALS + 10;
    const payload = Buffer.alloc(4 * nals);
    for (let i = 0; i < nals; i++) payload.writeUInt32BE(0x00000141, 4 * i);
    const arena = new NalArena(1024);
    const at = arena.index(payload, 'h264');
    const reader = new NalUnits();
    assert.equal(reader.ofIndex(arena.mem, at), MAX_INDEXED_NALS);
    assert.deepEqual([reader.start(0), reader.end(0)], [3, 4]);
    assert.equal(reader.end(MAX_INDEXED_NALS - 1), payload.length, 'the rest of the payload, not lost');
    assert.ok(arena.mem.length <= 2 ** 21, `the arena's array stays within the positions nalsAt can name: ${arena.mem.length}`);
    assert.ok(at < 2 ** 30 && (at | 0) === at);
  });
});
