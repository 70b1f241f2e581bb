/**
 * One stream form's sample bytes, in the form its fragments carry them: a unit's bytes are copied here once, when
 * the bus hands the unit over, and the parts made from them refer to these bytes instead of copying them again.
 *
 * Why: the segmenter used to keep the bus's units until their part was cut (up to a second, longer while video
 * waits for its audio), so it could not say when it was done with their payloads and payload reuse was off for
 * every stream an HLS player read (MediaReader.holdsPayloads); each part then copied its samples into a buffer of
 * its own. That was two buffers' worth of fresh memory per byte of media, and the collector paid for both (36 % of
 * the gateway's time at 300 LL-HLS readers, issue 47). Now the bus's payload memory is reused as for FLV, and the
 * copy here is the only one.
 *
 * Slices are contiguous (no alignment gaps), so the samples of one track that follow each other in a part make one
 * slice for the response. A chunk is the collector's once no part or waiting unit refers to it: the live window
 * moves in order, so a stream pins at most its window and one chunk.
 */
const CHUNK_BYTES = 64 * 1024;

export class SampleStore {
  private chunk: Buffer | undefined;
  private used = 0;

  constructor(private readonly chunkBytes = CHUNK_BYTES) {}

  /** `len` bytes to fill (not zeroed); past a quarter of a chunk, memory of their own */
  take(len: number): Buffer {
    if (len > this.chunkBytes >>> 2) return Buffer.allocUnsafeSlow(len);
    if (!this.chunk || this.used + len > this.chunk.length) {
      this.chunk = Buffer.allocUnsafeSlow(this.chunkBytes);
      this.used = 0;
    }
    const at = this.used;
    this.used += len;
    return this.chunk.subarray(at, at + len);
  }
}

/** `slices` with neighbours in memory joined: what a response writes */
export function joinAdjacent(slices: readonly Buffer[]): Buffer[] {
  const out: Buffer[] = [];
  for (const s of slices) {
    if (s.length === 0) continue;
    const last = out[out.length - 1];
    if (last !== undefined && last.buffer === s.buffer && last.byteOffset + last.length === s.byteOffset) {
      out[out.length - 1] = Buffer.from(last.buffer as ArrayBuffer, last.byteOffset, last.length + s.length);
    } else out.push(s);
  }
  return out;
}
