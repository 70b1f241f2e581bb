/**
 * Annex-B helpers shared by publishers and muxers.
 * Terminals use both 3-byte (00 00 01) and 4-byte (00 00 00 01) start codes, sometimes in one frame.
 */

const SC3 = Buffer.from([0, 0, 1]);

/**
 * Where the NAL units of an Annex-B buffer are, [start, end) without their start codes, found without making a view
 * of each: a muxer that frames every unit reads a NAL unit's type and length and copies or references its bytes, so
 * a view per NAL unit and the array holding them were only garbage (the FLV encoder: 1,426 -> 1,223 ns a unit in a
 * micro-benchmark, though no change the gateway's CPU shows). One instance is reused for every buffer scanned; `scan`
 * overwrites what the last one found.
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

  /** The NAL units of `buf` (empty ones left out); the count. */
  scan(buf: Buffer): number {
    this.count = 0;
    const n = buf.length;
    const codes = startCodesOf(buf, false);
    const found = codes.count;
    let start = -1;
    for (let k = 0; k < found; k++) {
      const i = codes.position(k);
      // A start code is 00 00 01; a 4-byte one is the same with a leading zero, trimmed below.
      if (start >= 0) {
        let end = i;
        while (end > start && buf[end - 1] === 0) end--;
        if (end > start) this.push(start, end);
      }
      start = i + 3;
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

/**
 * Where the start codes (00 00 01) of one buffer are, found left to right, each search going on from the end of the
 * code before (codes never overlap). A 4-byte code is found as its last three bytes.
 */
export class StartCodes {
  count = 0;
  private at = new Int32Array(16);
  /** the buffer whose codes these are, while they wait for one more reader (see startCodesOf) */
  private sharedFor: Buffer | undefined;
  private sharedOffset = 0;
  private sharedLength = 0;

  position(k: number): number {
    return this.at[k];
  }

  find(buf: Buffer): void {
    this.count = 0;
    const n = buf.length;
    // Buffer.indexOf searches natively; a JS byte loop here cost ~5 % of the gateway's time at 500 streams.
    let i = buf.indexOf(SC3, 0);
    while (i >= 0) {
      if (this.count === this.at.length) {
        const grown = new Int32Array(2 * this.at.length);
        grown.set(this.at);
        this.at = grown;
      }
      this.at[this.count++] = i;
      const next = i + 3;
      i = next + 2 < n ? buf.indexOf(SC3, next) : -1;
    }
  }

  /** whether these are `buf`'s codes, left for it by the scan before; they are not left for anyone after */
  takeFor(buf: Buffer): boolean {
    const hit = buf === this.sharedFor && buf.byteOffset === this.sharedOffset && buf.length === this.sharedLength;
    this.sharedFor = undefined;
    return hit;
  }

  shareWith(buf: Buffer): void {
    this.sharedFor = buf;
    this.sharedOffset = buf.byteOffset;
    this.sharedLength = buf.length;
  }
}

const codes = new StartCodes();

/**
 * The start codes of `buf`, found once for a unit's two scans. Why: the ingest scans each frame for its NAL kinds
 * (scanH264/scanH265: is it a key frame, must its start codes be normalised) and the FLV muxer, in the same call
 * that pushes the unit, scans it again for its NAL units: two searches of every video byte, ~3.5 % of the gateway's
 * busy time at 1,000 streams between them. With `share`, what was found is left for the next call on the very same
 * buffer (same object, offset and length), and only for that one: a payload is not changed once published, and
 * nothing runs between the two scans that could change it. The result is overwritten by the next call: read it
 * before scanning anything else.
 */
export function startCodesOf(buf: Buffer, share: boolean): StartCodes {
  if (!codes.takeFor(buf)) codes.find(buf);
  if (share) codes.shareWith(buf);
  return codes;
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
