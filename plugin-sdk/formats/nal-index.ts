/**
 * A video unit's NAL index: where the NAL units of its Annex-B payload are, found once when the unit is made
 * (`videoUnit`/`unitAt` in media.ts, or handed to them by a publisher that already knows) and read by every output
 * (FLV, HLS, RTSP, the recorder) instead of each searching the payload again.
 *
 * Layout: an index is a run of int32: [lap stamp, count, flags, payload length, start0, end0, start1, end1, ...],
 * NAL units [start, end) without their start codes, empty ones left out, the trailing zeros of a NAL unit followed
 * by another trimmed (a 4-byte start code's leading zero). A unit holds the array and where its index starts
 * (AccessUnit.nals, .nalsAt): two fields, no object of its own, so a unit costs no allocation more than before.
 *
 * Where: one ring per process (2 MiB), written round and round, never allocated again. Indexes in arrays of their
 * own (4 KiB chunks, freed with their last unit) were measured at 500 terminals: 82 chunks a second, and since the
 * units of the GOP caches keep them past two young collections, V8 tenured them (0 of 2,765 freed in 40 s, 11 MB of
 * external memory more, collected only by a full collection). A ring has nothing to collect. The price is that an
 * index can be overwritten while a unit still points at it (a unit older than a lap: ~6 s at 500 terminals, a
 * slow reader's queue, a long GOP); `nalsAt` therefore carries the lap it was written in (`lap * SPAN + position`),
 * the index's first int holds the lap as a negative stamp (no other int of an index is negative), and a reader that
 * finds another stamp there searches the payload again (NalUnits.of), as for a unit made without an index. The ring
 * is written in order, so an index whose first int is intact is intact.
 *
 * Why laps count round (LAPS) and positions stay under SPAN: `nalsAt` must stay a small integer (under 2^30). Past
 * 2^31 it was a heap number in every unit made from then on, and the first one deoptimised the code of every stage
 * that reads a frame's or unit's `nalsAt` (--log-deopt at 500 terminals: 32 laps, 177 s into the load). A unit is
 * therefore told from one made LAPS laps later only by its payload's length (~51 min at 500 terminals; a bus reader
 * that holds a unit 30 s is dropped, and a GOP cache keeps its stream's last GOP alone).
 */
import type { AccessUnit, CodecId } from '../media';
import { Buffer } from 'node:buffer';

/**
 * Searches of a payload for its NAL units, in the whole process: one increment per search (a frame's bytes read for
 * start codes), always on since it costs nothing measurable. Tests and benches read it, and may reset it.
 */
export const NAL_SCANS = { count: 0 };

/** What an index's flags word holds (the values of NAL_SCAN in h264.ts, plus AUD). */
export const NAL_FLAG = {
  /** an IDR (H.264) or IRAP (H.265) slice is present */
  KEY: 1,
  SPS: 2,
  PPS: 4,
  VPS: 8,
  /** a slice (any VCL NAL) is present */
  VCL: 16,
  /** some NAL unit follows a 3-byte start code, or bytes come before the first start code */
  NEEDS_NORMALISING: 32,
  /** no start code at all: the whole payload is taken as one NAL unit (and no kind is read from it) */
  NO_START_CODE: 64,
  /** an access unit delimiter is present */
  AUD: 128,
} as const;

const LAP = 0;
const COUNT = 1;
const FLAGS = 2;
const LENGTH = 3;
/** int32 before an index's ranges */
export const NAL_INDEX_HEAD = 4;
/** the process ring's int32: 2 MiB */
const RING = 1 << 19;
/** `nalsAt` is lap * SPAN + position: positions stay under it (an array of 8 MiB at most) */
const SPAN = 2 ** 21;
/** laps counted round: lap * SPAN + position stays under 2^30 */
const LAPS = 2 ** 30 / SPAN;
/**
 * The NAL units one index holds at most (half of an array of SPAN): a frame with more (2 MiB of nothing but start
 * codes, which no encoder makes) gets the rest of its payload as one last NAL unit.
 */
export const MAX_INDEXED_NALS = (SPAN / 2 - NAL_INDEX_HEAD) / 2;

/** The stamp an index of lap `lap` starts with: negative, and distinct for LAPS laps. */
const stampOf = (lap: number): number => -lap - 1;

/** Where in `mem` the index that `at` names starts, or -1 when it is gone (written over by a later lap) or not one of a payload of `length` bytes. */
function placeOf(mem: Int32Array, at: number, length: number): number {
  const pos = at % SPAN;
  if (pos < 0 || pos + NAL_INDEX_HEAD > mem.length) return -1;
  return mem[pos + LAP] === stampOf((at - pos) / SPAN) && mem[pos + LENGTH] === length ? pos : -1;
}
const SC3 = Buffer.from([0, 0, 1]);

/** The kind flags of one NAL unit (its first byte `b`) for a codec. */
export function nalKindFlags(codec: CodecId, b: number): number {
  if (codec === 'h264') {
    const t = b & 0x1f;
    if (t === 5) return NAL_FLAG.KEY | NAL_FLAG.VCL;
    if (t >= 1 && t <= 4) return NAL_FLAG.VCL;
    if (t === 7) return NAL_FLAG.SPS;
    if (t === 8) return NAL_FLAG.PPS;
    if (t === 9) return NAL_FLAG.AUD;
    return 0;
  }
  if (codec === 'h265') {
    const t = (b >> 1) & 0x3f;
    // IRAP pictures (BLA, IDR, CRA: 16..21) are where a decoder can start
    if (t < 32) return t >= 16 && t <= 21 ? NAL_FLAG.KEY | NAL_FLAG.VCL : NAL_FLAG.VCL;
    if (t === 32) return NAL_FLAG.VPS;
    if (t === 33) return NAL_FLAG.SPS;
    if (t === 34) return NAL_FLAG.PPS;
    if (t === 35) return NAL_FLAG.AUD;
  }
  return 0;
}

/**
 * Where indexes are written: a ring (see the module's comment). `begin`, `add` for each NAL unit and `finish` make one
 * index (what a publisher that lays out a payload itself does: no search); `index` finds a payload's NAL units and
 * writes them. Read `mem` right after `finish`/`index` returns: an index larger than the ring moves it to a larger array.
 */
export class NalArena {
  mem: Int32Array;
  private used = 0;
  private at = 0;
  private pos = 0;
  private flags = 0;
  private lap = 0;

  /** `ints`: the ring's size (the process's is 2 MiB; a scratch arena that `reset`s needs little) */
  constructor(ints = RING) {
    this.mem = new Int32Array(ints);
  }

  /** Starts an index; `add` its NAL units, then `finish`. */
  begin(): void {
    if (this.used + NAL_INDEX_HEAD + 4 > this.mem.length) this.wrap(0, NAL_INDEX_HEAD + 4);
    this.at = this.used;
    this.pos = this.at + NAL_INDEX_HEAD;
    this.flags = 0;
    // not an index until finish stamps it: a reader of what was here before finds no stamp
    this.mem[this.at + LAP] = 0;
  }

  /** One NAL unit [start, end) of the payload and its kind flags (nalKindFlags), or any other flags. */
  add(start: number, end: number, flags: number): void {
    if (this.pos - this.at >= NAL_INDEX_HEAD + 2 * MAX_INDEXED_NALS) {
      this.mem[this.pos - 1] = end;
      this.flags |= flags;
      return;
    }
    if (this.pos + 2 > this.mem.length) this.wrap(this.pos - this.at, 2);
    this.mem[this.pos] = start;
    this.mem[this.pos + 1] = end;
    this.pos += 2;
    this.flags |= flags;
  }

  /** Flags for the whole payload (NEEDS_NORMALISING, NO_START_CODE). */
  flag(flags: number): void {
    this.flags |= flags;
  }

  /** Ends the index of a payload of `length` bytes; returns where it starts (the unit's `nalsAt`). */
  finish(length: number): number {
    const m = this.mem;
    const at = this.at;
    m[at + COUNT] = (this.pos - at - NAL_INDEX_HEAD) >> 1;
    m[at + FLAGS] = this.flags;
    m[at + LENGTH] = length;
    m[at + LAP] = stampOf(this.lap);
    this.used = this.pos;
    return this.lap * SPAN + at;
  }

  /** Finds the NAL units of an Annex-B `payload` (one search) and writes their index; returns where it starts in `mem`. */
  index(payload: Buffer, codec: CodecId): number {
    NAL_SCANS.count++;
    this.begin();
    const n = payload.length;
    let start = -1;
    // Buffer.indexOf searches natively; a JS byte loop here cost ~5 % of the gateway's time at 500 streams.
    let i = payload.indexOf(SC3, 0);
    let flags = i === 1 && payload[0] === 0 ? 0 : NAL_FLAG.NEEDS_NORMALISING;
    while (i >= 0) {
      if (start >= 0) {
        // a 4-byte start code is a 3-byte one with a leading zero: trimmed here with any trailing zeros
        let end = i;
        while (end > start && payload[end - 1] === 0) end--;
        if (end > start) this.add(start, end, nalKindFlags(codec, payload[start]));
        if (payload[i - 1] !== 0) flags |= NAL_FLAG.NEEDS_NORMALISING;
      }
      start = i + 3;
      i = start + 2 < n ? payload.indexOf(SC3, start) : -1;
    }
    if (start >= 0 && start < n) this.add(start, n, nalKindFlags(codec, payload[start]));
    // no start code at all: the whole payload as one NAL unit rather than losing it
    else if (start < 0 && n > 0) this.add(0, n, 0);
    if (start < 0) flags |= NAL_FLAG.NO_START_CODE;
    this.flag(flags);
    return this.finish(n);
  }

  /** Forgets every index written (only for an arena of one's own whose indexes nobody keeps). */
  reset(): void {
    this.used = 0;
    this.lap = (this.lap + 1) % LAPS;
  }

  /**
   * Goes round to the start, taking along the `keep` int32 of the index being made (it needs `more` after them). An
   * index too large for the ring (thousands of NAL units) moves the arena to an array of its own size: units of the
   * old array keep it, their indexes intact.
   */
  private wrap(keep: number, more: number): void {
    if (2 * (keep + more) > this.mem.length) {
      const next = new Int32Array(Math.min(SPAN, Math.max(this.mem.length, 4 * (keep + more))));
      next.set(this.mem.subarray(this.at, this.at + keep));
      this.mem = next;
    } else {
      this.mem.copyWithin(0, this.at, this.at + keep);
    }
    this.lap = (this.lap + 1) % LAPS;
    this.used = 0;
    this.pos = keep;
    this.at = 0;
  }
}

/** The process's arena for the indexes units carry. */
export const NAL_ARENA = new NalArena();

/** Indexes of units made without one by hand (an object literal, say), found once on first read. */
const late = new WeakMap<AccessUnit, { mem: Int32Array; at: number }>();

/**
 * A reader of one unit's NAL index at a time; keep one per muxer and point it at each unit with `of`. A unit
 * without a valid index (made by hand, not by videoUnit/unitAt) is searched once, on its first read, and the index
 * kept for it.
 */
export class NalUnits {
  count = 0;
  flags = 0;
  private mem: Int32Array = EMPTY;
  private base = 0;

  /** Points at `u`'s index (found again if it was written over, or never made); returns its NAL unit count (0 for audio). */
  of(u: AccessUnit): number {
    const mem = u.nals;
    if (mem !== undefined) {
      const pos = placeOf(mem, u.nalsAt ?? 0, u.payload.length);
      if (pos >= 0) return this.point(mem, pos);
    }
    if (u.kind !== 'video') return this.none();
    let k = late.get(u);
    let pos = k === undefined ? -1 : placeOf(k.mem, k.at, u.payload.length);
    if (k === undefined || pos < 0) {
      const at = NAL_ARENA.index(u.payload, u.codec);
      k = { mem: NAL_ARENA.mem, at };
      late.set(u, k);
      pos = at % SPAN;
    }
    return this.point(k.mem, pos);
  }

  /** Points at the index `at` names in `mem`, one just made (a publisher's, before its unit is); returns its count. */
  ofIndex(mem: Int32Array, at: number): number {
    return this.point(mem, at % SPAN);
  }

  private point(mem: Int32Array, pos: number): number {
    this.mem = mem;
    this.base = pos + NAL_INDEX_HEAD;
    this.flags = mem[pos + FLAGS];
    return (this.count = mem[pos + COUNT]);
  }

  start(i: number): number {
    return this.mem[this.base + 2 * i];
  }

  end(i: number): number {
    return this.mem[this.base + 2 * i + 1];
  }

  private none(): number {
    this.mem = EMPTY;
    this.base = 0;
    this.flags = 0;
    return (this.count = 0);
  }
}

const EMPTY = new Int32Array(NAL_INDEX_HEAD);

/** The flags of the index `at` names in `mem`, one just made (NAL_FLAG). */
export function nalIndexFlags(mem: Int32Array, at: number): number {
  return mem[(at % SPAN) + FLAGS];
}

/** Whether `at` names an intact index in `mem` of a payload of `length` bytes (what a unit checks before it trusts one handed to it). */
export function isNalIndexOf(mem: Int32Array | undefined, at: number | undefined, length: number): boolean {
  return mem !== undefined && at !== undefined && at >= 0 && placeOf(mem, at, length) >= 0;
}
