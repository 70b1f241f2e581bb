/**
 * Annex-B helpers shared by publishers and muxers.
 * Terminals use both 3-byte (00 00 01) and 4-byte (00 00 00 01) start codes, sometimes in one frame.
 */

import { NAL_SCANS } from './nal-index';
import { Buffer } from 'node:buffer';

const SC3 = Buffer.from([0, 0, 1]);

/**
 * Where the NAL units of an Annex-B buffer are, [start, end) without their start codes, found without making a view
 * of each. One instance is reused for every buffer scanned; `scan` overwrites what the last one found. A unit's own
 * NAL units are in its index (nal-index.ts, NalUnits): this is for bytes that are not a unit's payload (files,
 * elementary streams, tests), and a list muxers fill with the ranges they keep (`push`).
 */
export class NalRanges {
  count = 0;
  private at = new Int32Array(32);

  start(i: number): number {
    return this.at[2 * i];
  }

  end(i: number): number {
    return this.at[2 * i + 1];
  }

  /** The NAL units of `buf` (empty ones left out); the count. The same units as a unit's index of `buf` has. */
  scan(buf: Buffer): number {
    NAL_SCANS.count++;
    this.count = 0;
    const n = buf.length;
    let start = -1;
    // Buffer.indexOf searches natively
    let i = buf.indexOf(SC3, 0);
    while (i >= 0) {
      // A start code is 00 00 01; a 4-byte one is the same with a leading zero, trimmed below.
      if (start >= 0) {
        let end = i;
        while (end > start && buf[end - 1] === 0) end--;
        if (end > start) this.push(start, end);
      }
      start = i + 3;
      i = start + 2 < n ? buf.indexOf(SC3, start) : -1;
    }
    if (start >= 0 && start < n) this.push(start, n);
    // No start code at all: the whole buffer as one NAL unit rather than losing it.
    else if (start < 0 && n > 0) this.push(0, n);
    return this.count;
  }

  clear(): void {
    this.count = 0;
  }

  push(start: number, end: number): void {
    const k = 2 * this.count++;
    if (k + 2 > this.at.length) {
      const grown = new Int32Array(2 * this.at.length);
      grown.set(this.at);
      this.at = grown;
    }
    this.at[k] = start;
    this.at[k + 1] = end;
  }
}

const splitRanges = new NalRanges();

/** NAL units of an Annex-B buffer, without their start codes. Slices share the input's memory (no copy). */
export function splitAnnexB(buf: Buffer): Buffer[] {
  const n = splitRanges.scan(buf);
  const units = new Array<Buffer>(n);
  for (let i = 0; i < n; i++) units[i] = buf.subarray(splitRanges.start(i), splitRanges.end(i));
  return units;
}

/** H.264 nal_unit_type of the NAL unit starting at `at` (a NalRanges start, or 0 for a NAL unit's own view) */
export function h264NalType(nal: Buffer, at = 0): number {
  return nal[at] & 0x1f;
}

/** H.265 nal_unit_type of the NAL unit starting at `at` */
export function h265NalType(nal: Buffer, at = 0): number {
  return (nal[at] >> 1) & 0x3f;
}

const START_CODE = Buffer.from([0, 0, 0, 1]);

/** Joins NAL units into one Annex-B buffer with 4-byte start codes, in memory from `alloc`. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe does not use this
export function joinAnnexB(nals: Buffer[], alloc: (bytes: number) => Buffer = Buffer.allocUnsafe): Buffer {
  let n = 0;
  for (const nal of nals) n += START_CODE.length + nal.length;
  const out = alloc(n);
  let at = 0;
  for (const nal of nals) {
    at += START_CODE.copy(out, at);
    at += nal.copy(out, at);
  }
  return out;
}

/**
 * A video track's parameter sets as Annex-B (H.265: VPS, SPS, PPS; H.264: SPS, PPS), for an output of raw Annex-B:
 * a unit carries only those its source sent with it, so a reader writes these before its first unit and again when
 * the track changes. Empty when the track has none.
 */
export function parameterSetsAnnexB(t: { sps?: Buffer; pps?: Buffer; vps?: Buffer }): Buffer {
  const sets: Buffer[] = [];
  for (const s of [t.vps, t.sps, t.pps]) if (s !== undefined && s.length > 0) sets.push(s);
  return joinAnnexB(sets);
}
