/**
 * A record's MP4 as a layout over its FLV file: ftyp + moov + the mdat header in memory (the "head"), then the
 * samples' bytes, read from the FLV file when they are sent. Any byte range of the MP4 can be produced without
 * writing the MP4 anywhere, and memory holds the index and one read window, never the media.
 */
import * as fs from 'node:fs';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { indexFlv, type FlvIndex, type IndexOptions } from './flv-index';
import { ftyp, mdatHeader } from './mp4-boxes';
import { buildMoov } from './mp4-moov';
import type { SampleTable } from './mp4-samples';

const readAsync = promisify(fs.read);
/** how much of the FLV file one read takes (many samples at once: they are separated by tag headers only) */
const READ_WINDOW = 1 << 20;

export interface Mp4Layout {
  /** ftyp, moov and the mdat header */
  head: Buffer;
  /** bytes of the whole MP4 */
  total: number;
  /**
   * sample i's bytes are at `head.length + payloadBefore[i]` of the MP4 and `samples.flvOffset[i]` of the FLV; a
   * negative flvOffset (an encoded sample, mp4-aac.ts) means `memory` at `-1 - flvOffset[i]` instead
   */
  payloadBefore: Float64Array;
  /** samples that are not in the FLV (AAC encoded from its G.711), end to end */
  memory?: Buffer;
  /** the audio track was encoded from this (`audio=aac` of G.711); undefined: the FLV's own samples */
  audioFrom?: 'alaw' | 'ulaw';
  samples: SampleTable;
  durationMs: number;
  /** bytes of the FLV file the MP4 holds (the whole file, or up to a torn or corrupt tag) */
  flvLength: number;
  /** why the FLV was not taken to its end, when a tag did not parse */
  stopped?: string;
  skippedAudioFormats: number[];
  videoCodecs: string[];
  audioCodecs: string[];
  /** memory the layout holds, for the cache's budget */
  bytes: number;
}

export function layoutOf(index: FlvIndex, memory?: Buffer): Mp4Layout {
  const s = index.samples;
  const payloadBefore = new Float64Array(s.count + 1);
  for (let i = 0; i < s.count; i++) payloadBefore[i + 1] = payloadBefore[i]! + s.size[i]!;
  const payload = payloadBefore[s.count]!;
  const hevc = index.descriptions[0].some((d) => d.codec === 'h265');
  const type = ftyp(hevc);
  const mdat = mdatHeader(payload);
  // The moov's size does not depend on the offsets it lists, only on their width: measure, then write for real.
  const measure = (co64: boolean): number => type.length + buildMoov(index, () => 0, co64).box.length + mdat.length;
  let co64 = false;
  let start = measure(false);
  if (start + payload > 0xffffffff) {
    co64 = true;
    start = measure(true);
  }
  const moov = buildMoov(index, (i) => start + payloadBefore[i]!, co64);
  const head = Buffer.concat([type, moov.box, mdat]);
  s.dropTiming();
  return {
    head,
    total: head.length + payload,
    payloadBefore,
    samples: s,
    durationMs: moov.durationMs,
    flvLength: index.flvLength,
    stopped: index.stopped,
    skippedAudioFormats: index.skippedAudioFormats,
    videoCodecs: index.descriptions[0].map((d) => d.codec),
    audioCodecs: index.descriptions[1].map((d) => d.codec),
    bytes: head.length + payloadBefore.byteLength + s.bytes + (memory?.length ?? 0),
    memory,
  };
}

export async function mp4LayoutOf(file: string, opts: IndexOptions = {}): Promise<Mp4Layout> {
  return layoutOf(await indexFlv(file, opts));
}

/** the first sample whose bytes end after MP4 offset `pos` (binary search over payloadBefore) */
function sampleAt(l: Mp4Layout, payloadPos: number): number {
  let lo = 0;
  let hi = l.samples.count;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (l.payloadBefore[mid + 1]! <= payloadPos) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class FlvChangedError extends Error {
  readonly code = 'FLV_CHANGED';
}

/**
 * Bytes `start..end` (inclusive) of the MP4, read from the FLV file open at `fd` in windows of up to 1 MiB. The
 * file is only appended to while recording and only removed whole, so a short read means it was cut (recovery
 * cutting a torn tag): the stream then fails with FlvChangedError rather than send wrong bytes.
 */
export async function* mp4Bytes(l: Mp4Layout, fd: number, start: number, end: number): AsyncGenerator<Buffer> {
  const h = l.head.length;
  if (start < h) {
    yield l.head.subarray(start, Math.min(end + 1, h));
    start = h;
  }
  if (start > end) return;
  const s = l.samples;
  const mem = l.memory;
  const inMemory = (k: number): boolean => s.flvOffset[k]! < 0;
  let i = sampleAt(l, start - h);
  let pos = start - h; // in payload coordinates
  const last = end - h;
  while (pos <= last && i < s.count) {
    const skip = pos - l.payloadBefore[i]!;
    if (inMemory(i)) {
      const at = -1 - s.flvOffset[i]! + skip;
      const n = Math.min(s.size[i]! - skip, last - pos + 1);
      yield mem!.subarray(at, at + n);
      pos += n;
      i++;
      continue;
    }
    // one read for the FLV samples from i on that fit the window (at least one, or the first part of a big one);
    // samples from memory between them ride along
    const from = s.flvOffset[i]! + skip;
    let j = i;
    let to = s.flvOffset[i]! + s.size[i]!;
    if (to - from <= READ_WINDOW) {
      while (j + 1 < s.count && l.payloadBefore[j + 1]! <= last) {
        if (!inMemory(j + 1)) {
          const next = s.flvOffset[j + 1]! + s.size[j + 1]!;
          if (next - from > READ_WINDOW) break;
          to = next;
        }
        j++;
      }
    }
    const len = Math.min(to - from, READ_WINDOW);
    const buf = Buffer.allocUnsafe(len);
    const { bytesRead } = await readAsync(fd, buf, 0, len, from);
    if (bytesRead < len) throw new FlvChangedError('the FLV file is shorter than when it was indexed');
    // the samples' bytes within the window, in order, cut to the range
    const first = i;
    for (let k = first; k <= j && pos <= last; k++) {
      let part: Buffer;
      if (inMemory(k)) {
        const at = -1 - s.flvOffset[k]!;
        part = mem!.subarray(at, at + Math.min(s.size[k]!, last - pos + 1));
      } else {
        const a = s.flvOffset[k]! + (k === first ? skip : 0) - from;
        if (a >= len) break;
        const sampleEnd = s.flvOffset[k]! + s.size[k]!;
        part = buf.subarray(a, Math.min(sampleEnd - from, len, a + (last - pos + 1)));
      }
      yield part;
      pos += part.length;
      if (pos >= l.payloadBefore[k + 1]!) i = k + 1;
    }
  }
}

/**
 * A Readable of bytes `start..end` of the MP4. `close` (the descriptor's) runs once the reading is over: after a
 * read in flight has returned when the stream is destroyed mid-way, so the descriptor is never closed under it.
 */
export function mp4Stream(l: Mp4Layout, fd: number, start: number, end: number, close: () => void): Readable {
  let entered = false;
  async function* run(): AsyncGenerator<Buffer> {
    entered = true;
    try {
      yield* mp4Bytes(l, fd, start, end);
    } finally {
      close();
    }
  }
  const r = Readable.from(run(), { objectMode: false, highWaterMark: 1 << 20 });
  r.once('close', () => {
    if (!entered) close();
  });
  return r;
}
