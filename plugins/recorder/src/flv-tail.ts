/**
 * Where the complete part of an FLV file ends: after a crash a recording can stop inside a tag, and what is
 * catalogued (and served) should stop at the last whole one.
 */
import * as fs from 'node:fs';

const TAG_HEADER = 11;
const PREV_SIZE = 4;
const TAG_TYPES = new Set([8, 9, 18]);

export interface FlvExtent {
  /** bytes up to the end of the last complete tag (header only: just past PreviousTagSize0) */
  length: number;
  /** the file's size as found */
  size: number;
  /** from the file header; undefined when the file does not start like an FLV file */
  hasVideo?: boolean;
  hasAudio?: boolean;
  /** false when the file is too short or not FLV at all */
  flv: boolean;
}

async function readAt(fh: fs.promises.FileHandle, pos: number, len: number): Promise<Buffer | null> {
  const buf = Buffer.alloc(len);
  const { bytesRead } = await fh.read(buf, 0, len, pos);
  return bytesRead === len ? buf : null;
}

/** True when a complete tag ends exactly at `end` (its PreviousTagSize names a tag that fits). */
async function tagEndsAt(fh: fs.promises.FileHandle, end: number, first: number): Promise<boolean> {
  if (end - PREV_SIZE - TAG_HEADER < first) return false;
  const prev = await readAt(fh, end - PREV_SIZE, PREV_SIZE);
  if (!prev) return false;
  const tagSize = prev.readUInt32BE(0);
  const start = end - PREV_SIZE - tagSize;
  if (tagSize < TAG_HEADER || start < first) return false;
  const head = await readAt(fh, start, TAG_HEADER);
  return !!head && TAG_TYPES.has(head[0]) && head.readUIntBE(1, 3) === tagSize - TAG_HEADER;
}

/**
 * Finds the end of the last complete tag. The common case (a file that ends on a tag boundary) costs three
 * small reads from the end; only a torn tail makes it walk the tag headers from the start.
 */
export async function flvExtent(file: string): Promise<FlvExtent> {
  const fh = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const size = (await fh.stat()).size;
    const head = size >= 13 ? await readAt(fh, 0, 13) : null;
    if (!head || head.toString('latin1', 0, 3) !== 'FLV') return { length: 0, size, flv: false };
    const dataOffset = head.readUInt32BE(5);
    const first = dataOffset + PREV_SIZE;
    const base = { size, hasVideo: (head[4] & 0x01) !== 0, hasAudio: (head[4] & 0x04) !== 0 };
    if (dataOffset < 9 || first > size) return { ...base, length: 0, flv: false };
    if (size === first || (await tagEndsAt(fh, size, first))) return { ...base, length: size, flv: true };
    let at = first;
    for (;;) {
      const h = await readAt(fh, at, TAG_HEADER);
      if (!h || !TAG_TYPES.has(h[0])) break;
      const end = at + TAG_HEADER + h.readUIntBE(1, 3) + PREV_SIZE;
      if (end > size) break;
      const prev = await readAt(fh, end - PREV_SIZE, PREV_SIZE);
      if (!prev || prev.readUInt32BE(0) !== end - PREV_SIZE - at) break;
      at = end;
    }
    return { ...base, length: at, flv: true };
  } finally {
    await fh.close();
  }
}
