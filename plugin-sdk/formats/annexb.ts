/**
 * Annex-B helpers shared by publishers and muxers.
 * Terminals use both 3-byte (00 00 01) and 4-byte (00 00 00 01) start codes, sometimes in one frame.
 */

/** NAL units of an Annex-B buffer, without their start codes. Slices share the input's memory (no copy). */
export function splitAnnexB(buf: Buffer): Buffer[] {
  const units: Buffer[] = [];
  const n = buf.length;
  let i = 0;
  let start = -1;
  while (i + 2 < n) {
    // A start code is 00 00 01; a 4-byte one is the same with a leading zero, trimmed below.
    if (buf[i + 2] > 1) { i += 3; continue; }
    if (buf[i] === 0 && buf[i + 1] === 0 && buf[i + 2] === 1) {
      if (start >= 0) {
        let end = i;
        while (end > start && buf[end - 1] === 0) end--;
        if (end > start) units.push(buf.subarray(start, end));
      }
      i += 3;
      start = i;
      continue;
    }
    i++;
  }
  if (start >= 0 && start < n) {
    units.push(buf.subarray(start, n));
  } else if (start < 0 && n > 0) {
    // No start code at all: treat the whole buffer as one NAL unit rather than losing it.
    units.push(buf);
  }
  return units;
}

/** H.264 nal_unit_type */
export function h264NalType(nal: Buffer): number {
  return nal[0] & 0x1f;
}

/** H.265 nal_unit_type */
export function h265NalType(nal: Buffer): number {
  return (nal[0] >> 1) & 0x3f;
}

const START_CODE = Buffer.from([0, 0, 0, 1]);

/** Joins NAL units into one Annex-B buffer with 4-byte start codes. */
export function joinAnnexB(nals: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const nal of nals) parts.push(START_CODE, nal);
  return Buffer.concat(parts);
}
