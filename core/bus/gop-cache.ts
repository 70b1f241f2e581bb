/**
 * A stream's GOP cache (its units from the latest keyframe on) kept as numbers, not objects.
 *
 * Why: a cached unit lives as long as its GOP, one to two seconds, which is longer than two young-generation
 * collections: every unit, its payload view, the bus's Entry and its FLV form (~430 B, five objects) were copied
 * twice, promoted, and left for a full collection to find dead. At 1,000 terminals that promotion (~8 MB/s) is what
 * started a full collection every ~7 s, whose marking is the end-to-end tail. The units a reader in step gets are
 * written and dropped while young; only the cache kept them. Here each cached unit is a row of numbers and three
 * pointers to things many units share (its codec's string, its payload's ArrayBuffer, its NAL index's chunk), and
 * the objects are made again for a reader that joins (rare: a player opening), with their forms from the format's
 * `catchUp`.
 *
 * A format whose encoder cannot make its forms again (no `catchUp`) needs its forms kept: while such a format is in
 * use the cache also keeps each unit's Entry, as the bus did before (`keepEntries`).
 */
import type { AccessUnit, CodecId } from '../../plugin-sdk/media';
import { unitOf } from '../../plugin-sdk/media';
import { memOf, offsetOf } from '../../plugin-sdk/byte-views';
import { newEntry, type Entry } from './entry';
import { Buffer } from 'node:buffer';

/** numbers a row: dts, pts, timescale, dtsTicks, ptsTicks, duration, payload offset, payload length, seq, src, flags, NAL index offset */
const ROW = 12;
const DTS = 0;
const PTS = 1;
const TIMESCALE = 2;
const DTS_TICKS = 3;
const PTS_TICKS = 4;
const DURATION = 5;
const OFFSET = 6;
const LENGTH = 7;
const SEQ = 8;
const SRC = 9;
const FLAGS = 10;
const NALS_AT = 11;
/** pointers a row: the codec, the payload's ArrayBuffer, the NAL index's chunk */
const REFS = 3;
const VIDEO = 1;
const KEYFRAME = 2;

const FIRST_ROWS = 64;
const SHRINK_ROWS = 1024;

export class GopCache {
  private nums = new Float64Array(FIRST_ROWS * ROW);
  /** REFS a row: the codec (an interned string), the payload's ArrayBuffer and the NAL index's chunk (each shared by many units) */
  private refs: unknown[] = [];
  private count = 0;
  private bytes = 0;
  /** the units' Entries, kept only while a format without `catchUp` is in use */
  private entries: Entry[] | undefined;

  /** units cached */
  get length(): number {
    return this.count;
  }

  /** payload bytes of the cached units */
  get payloadBytes(): number {
    return this.bytes;
  }

  /** Entry.src of the first cached unit, or undefined when empty (what payload reuse waits for) */
  get firstSrc(): number | undefined {
    return this.count > 0 ? this.nums[SRC] : undefined;
  }

  /** whether the cache keeps each unit's Entry (and so its forms) */
  get keepsEntries(): boolean {
    return this.entries !== undefined;
  }

  add(e: Entry): void {
    const u = e.unit;
    const i = this.count;
    if ((i + 1) * ROW > this.nums.length) this.grow();
    const n = this.nums;
    const at = i * ROW;
    n[at + DTS] = u.dts;
    n[at + PTS] = u.pts;
    n[at + TIMESCALE] = u.timescale;
    n[at + DTS_TICKS] = u.dtsTicks;
    n[at + PTS_TICKS] = u.ptsTicks;
    n[at + DURATION] = u.duration;
    n[at + OFFSET] = offsetOf(u.payload);
    n[at + LENGTH] = u.payload.length;
    n[at + SEQ] = e.seq;
    n[at + SRC] = e.src;
    n[at + FLAGS] = (u.kind === 'video' ? VIDEO : 0) | (u.keyframe ? KEYFRAME : 0);
    n[at + NALS_AT] = u.nalsAt ?? 0;
    this.refs[REFS * i] = u.codec;
    this.refs[REFS * i + 1] = memOf(u.payload);
    this.refs[REFS * i + 2] = u.nals;
    this.count = i + 1;
    this.bytes += u.payload.length;
    this.entries?.push(e);
  }

  /** Empties the cache (a keyframe starts the next GOP, or it grew past its cap). */
  clear(): void {
    // the rows' slots are kept for the next GOP; their buffers are let go now
    const r = this.refs;
    for (let i = 0, end = REFS * this.count; i < end; i++) r[i] = undefined;
    // a GOP of thousands of units (a long one of small audio frames) does not keep its rows for good
    if (this.nums.length > SHRINK_ROWS * ROW && this.count * 4 < this.nums.length / ROW) {
      this.nums = new Float64Array(FIRST_ROWS * ROW);
      this.refs = [];
    }
    this.count = 0;
    this.bytes = 0;
    if (this.entries !== undefined) this.entries = [];
  }

  /**
   * The cached units as Entries: the kept ones, or new ones (new unit objects over the same payload bytes, without
   * receivedAt: they are not news to anyone, so no latency is measured on them) with no forms yet.
   */
  entryList(): Entry[] {
    if (this.entries !== undefined) return this.entries;
    const out = new Array<Entry>(this.count);
    for (let i = 0; i < this.count; i++) out[i] = newEntry(this.unit(i), this.nums[i * ROW + SEQ], this.nums[i * ROW + SRC]);
    return out;
  }

  /** Starts keeping Entries (a format without `catchUp` came): the ones made now, as `entryList` made them. */
  keepEntries(): Entry[] {
    this.entries ??= this.entryList();
    return this.entries;
  }

  /** Stops keeping Entries (no format without `catchUp` is left). */
  dropEntries(): void {
    this.entries = undefined;
  }

  private unit(i: number): AccessUnit {
    const n = this.nums;
    const at = i * ROW;
    const flags = n[at + FLAGS];
    const payload = Buffer.from(this.refs[REFS * i + 1] as ArrayBuffer, n[at + OFFSET], n[at + LENGTH]);
    return unitOf(
      flags & VIDEO ? 'video' : 'audio',
      this.refs[REFS * i] as CodecId,
      n[at + DTS],
      n[at + PTS],
      n[at + TIMESCALE],
      n[at + DTS_TICKS],
      n[at + PTS_TICKS],
      n[at + DURATION],
      (flags & KEYFRAME) !== 0,
      payload,
      undefined,
      this.refs[REFS * i + 2] as Int32Array | undefined,
      n[at + NALS_AT],
    );
  }

  private grow(): void {
    const bigger = new Float64Array(this.nums.length * 2);
    bigger.set(this.nums);
    this.nums = bigger;
  }
}
