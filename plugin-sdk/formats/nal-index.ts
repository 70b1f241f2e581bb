/**
 * A video unit's NAL index: where the NAL units of its Annex-B payload are, found once when the unit is made
 * (`videoUnit`/`unitAt` in media.ts, or handed to them by a publisher that already knows) and read by every output
 * (FLV, HLS, RTSP, the recorder) instead of each searching the payload again.
 *
 * Layout: an index is a run of int32 in a chunk shared by many units: [count, flags, payload length, start0, end0,
 * start1, end1, ...], NAL units [start, end) without their start codes, empty ones left out, the trailing zeros of a
 * NAL unit followed by another trimmed (a 4-byte start code's leading zero). A unit holds its chunk and where its
 * index starts (AccessUnit.nals, .nalsAt): two fields, no object of its own, so a unit costs no allocation more than
 * before. A chunk is never written again where an index was finished, and is freed by the collector with the last
 * unit that refers to it; chunks are small (4 KiB) so a unit kept long (a paused stream's GOP cache) pins little.
 */
import type { AccessUnit, CodecId } from '../media';

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

const COUNT = 0;
const FLAGS = 1;
const LENGTH = 2;
/** int32 before an index's ranges */
export const NAL_INDEX_HEAD = 3;
const CHUNK = 1024;
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
 * Where indexes are written: the chunk being filled. `begin`, `add` for each NAL unit and `finish` make one index
 * (what a publisher that lays out a payload itself does: no search); `index` finds a payload's NAL units and writes
 * them. Read `mem` right after `finish`/`index` returns: the next index may start a new chunk.
 */
export class NalArena {
  mem = new Int32Array(CHUNK);
  private used = 0;
  private at = 0;
  private pos = 0;
  private flags = 0;

  /** Starts an index; `add` its NAL units, then `finish`. */
  begin(): void {
    if (this.used + NAL_INDEX_HEAD + 4 > this.mem.length) this.fresh(0);
    this.at = this.used;
    this.pos = this.at + NAL_INDEX_HEAD;
    this.flags = 0;
  }

  /** One NAL unit [start, end) of the payload and its kind flags (nalKindFlags), or any other flags. */
  add(start: number, end: number, flags: number): void {
    if (this.pos + 2 > this.mem.length) this.fresh(this.pos - this.at);
    this.mem[this.pos] = start;
    this.mem[this.pos + 1] = end;
    this.pos += 2;
    this.flags |= flags;
  }

  /** Flags for the whole payload (NEEDS_NORMALISING, NO_START_CODE). */
  flag(flags: number): void {
    this.flags |= flags;
  }

  /** Ends the index of a payload of `length` bytes; returns where it starts in `mem`. */
  finish(length: number): number {
    const m = this.mem;
    const at = this.at;
    m[at + COUNT] = (this.pos - at - NAL_INDEX_HEAD) >> 1;
    m[at + FLAGS] = this.flags;
    m[at + LENGTH] = length;
    this.used = this.pos;
    return at;
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
  }

  /** Starts a new chunk, taking along the `keep` int32 of the index being made. */
  private fresh(keep: number): void {
    const next = new Int32Array(Math.max(CHUNK, 2 * (keep + NAL_INDEX_HEAD + 2)));
    if (keep > 0) next.set(this.mem.subarray(this.at, this.at + keep));
    this.mem = next;
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

  /** Points at `u`'s index; returns its NAL unit count (0 for audio). */
  of(u: AccessUnit): number {
    let mem = u.nals;
    let at = u.nalsAt ?? 0;
    if (mem === undefined || mem[at + LENGTH] !== u.payload.length) {
      if (u.kind !== 'video') return this.none();
      let k = late.get(u);
      if (k === undefined || k.mem[k.at + LENGTH] !== u.payload.length) {
        const i = NAL_ARENA.index(u.payload, u.codec);
        k = { mem: NAL_ARENA.mem, at: i };
        late.set(u, k);
      }
      mem = k.mem;
      at = k.at;
    }
    return this.ofIndex(mem, at);
  }

  /** Points at the index at `at` in `mem` (one a publisher holds before its unit is made); returns its count. */
  ofIndex(mem: Int32Array, at: number): number {
    this.mem = mem;
    this.base = at + NAL_INDEX_HEAD;
    this.flags = mem[at + FLAGS];
    return (this.count = mem[at + COUNT]);
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

/** The flags of the index at `at` in `mem` (NAL_FLAG). */
export function nalIndexFlags(mem: Int32Array, at: number): number {
  return mem[at + FLAGS];
}

/** Whether `mem` at `at` is an index of a payload of `length` bytes (what a unit checks before it trusts one handed to it). */
export function isNalIndexOf(mem: Int32Array | undefined, at: number | undefined, length: number): boolean {
  return mem !== undefined && at !== undefined && at >= 0 && at + NAL_INDEX_HEAD <= mem.length && mem[at + LENGTH] === length;
}
