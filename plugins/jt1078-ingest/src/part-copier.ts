/**
 * Copies packet bodies (a range of the Buffer they were read into) into a frame's memory.
 *
 * Any copy between two Buffers makes a view of the source: Node 20's Buffer.copy makes one too, after more checks,
 * and a subarray asks the runtime for `.buffer` and `.byteOffset` each time. Here the view is a plain Uint8Array over
 * the ArrayBuffer read once per source Buffer: a frame's parts nearly all come from the same read buffer. The
 * properties go through plugin-sdk/byte-views.ts: read on the prototype, each was a generic LoadIC in `complete`.
 */
import { memOf, offsetOf, setBytes } from '../../../plugin-sdk';

const NONE = Buffer.alloc(0);
/** read once, as forget runs once a frame */
const NONE_MEM = memOf(NONE);

export class PartCopier {
  /** the Buffer copied from last, until `forget` */
  private src: Buffer = NONE;
  private mem: ArrayBufferLike = NONE_MEM;
  private off = 0;

  /** Copies src[from, to) into dst at `at`; returns the bytes copied. */
  copy(src: Buffer, from: number, to: number, dst: Buffer, at: number): number {
    if (src !== this.src) {
      this.src = src;
      this.mem = memOf(src);
      this.off = offsetOf(src);
    }
    setBytes(dst, new Uint8Array(this.mem, this.off + from, to - from), at);
    return to - from;
  }

  /** Lets go of the last source: called after each frame's copies, so a datagram or a frame's store is not pinned */
  forget(): void {
    this.src = NONE;
    this.mem = NONE_MEM;
  }
}
