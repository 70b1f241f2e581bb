/**
 * Hands out Buffers carved from larger chunks, so a stream's many small frames do not each cost an ArrayBuffer
 * (allocating and later sweeping one per frame was a visible share of the gateway's time at hundreds of streams,
 * GC included). Used by the JT/T 1078 reassembler for frames and by the FLV muxer for tag bodies.
 *
 * One slab per stream, not one shared by all: a chunk lives as long as its longest-lived slice, and a stream's
 * slices die roughly in the order they were made (its GOP cache moves on), so a stalled stream pins only its own
 * chunks. Large requests get their own allocation, which bounds the waste at a chunk's tail.
 * Callers must write every byte of what they take (the memory is not zeroed).
 */
import { Buffer } from 'node:buffer';
/**
 * The chunk size for frame payloads (the JT/T 1078 reassembler's own slab, and the bus's when it does not reuse
 * payload memory): a stream always has one chunk partly filled and one pinned whole by the first frames of its GOP;
 * at 1,000 streams 16 KiB chunks took 16 KB a stream off RSS against 32 KiB (402 -> 386 KB) for the same CPU,
 * though frames over 4 KiB then get memory of their own.
 */
export const FRAME_SLAB_BYTES = 16 * 1024;

export class BufferSlab {
  /** the current chunk's memory (a Buffer of its own from allocUnsafeSlow: offset 0, chunkSize bytes) */
  private chunk: ArrayBuffer | undefined;
  private used = 0;

  constructor(private readonly chunkSize = 32 * 1024) {}

  take(len: number): Buffer {
    if (len > this.chunkSize >>> 2) return Buffer.allocUnsafe(len);
    let chunk = this.chunk;
    if (!chunk || this.used + len > this.chunkSize) {
      chunk = this.chunk = Buffer.allocUnsafeSlow(this.chunkSize).buffer as ArrayBuffer;
      this.used = 0;
    }
    const at = this.used;
    // 8-byte alignment keeps typed-array views over the slices possible
    this.used = (at + len + 7) & ~7;
    // a view made from the memory, not chunk.subarray: node's subarray reads the chunk's `.buffer` and `.byteOffset`,
    // each a generic property load in optimised code on Node 20 (byte-views.ts), for every slice
    return Buffer.from(chunk, at, len);
  }

  /** Drops the current chunk (its slices stay valid); the next take() starts a new one. */
  release(): void {
    this.chunk = undefined;
    this.used = 0;
  }
}
