/**
 * One kind's frame in progress in the reassembler (reassembler.ts): its packets' bodies, where each sits in the
 * Buffer it came in, and what the reassembler has learnt of the source's boundary marks.
 */
import { memOf, offsetOf, setBytes } from '../../../plugin-sdk';
import { Buffer } from 'node:buffer';

const MODE_UNPROVEN = 0;
export const MODE_MARKS = 1;
export const MODE_M = 2;

const NO_BODY = Buffer.alloc(0);
/** in FrameBuilder.parts: the body is in the same Buffer as the part before it */
const SAME_READ = Buffer.alloc(0);

export class FrameBuilder {
  /**
   * the Buffers holding the frame's packet bodies so far (the first `count`), each body at partAt..partEnd, or
   * SAME_READ for the Buffer of the part before; parts[0] may be `store`, the rest the current read.
   * - A frame's packets mostly come in one read, and the read's view is young while this array is old: each store of
   *   it took the write barrier's slow path (0.8 % of the gateway's samples at 500 terminals with decodePacket's),
   *   where SAME_READ, an old constant, takes none.
   * - The array is kept across frames: emptied with `length = 0`, V8 dropped its backing store and grew it again for
   *   every frame (0.5 % of the main thread at 1,000 terminals).
   * - Slots are emptied as the frame goes (`release`): a view left in a slot lived until a frame as long overwrote it,
   *   a key frame's ~50 until the next key frame, so the collector copied and promoted them and marked them in every
   *   stream's array.
   */
  parts: Buffer[] = [];
  /** where each part's body starts and ends in its Buffer (a packet's wire bytes: no view is made per packet) */
  partAt: number[] = [];
  partEnd: number[] = [];
  count = 0;
  /** the last part that names its Buffer (not SAME_READ); -1 with none */
  private lastSource = -1;
  bytes = 0;
  /** the unfinished frame's bodies copied out of earlier reads (see Jt1078Reassembler.detach) */
  store: Buffer | undefined;
  inFrame = false;
  pt = 0;
  dataType = 0;
  timestamp = 0;
  /** MODE_UNPROVEN until the marks and the M bit have disagreed a couple of times */
  mode = MODE_UNPROVEN;
  votesMarks = 0;
  votesM = 0;
  /** the last packet's marks and M bit disagreed on whether it ended the frame */
  tentative = false;
  /** ... and it was the mark that said "ends" */
  tentativeMarkEnds = false;
  /** inside a frame that cannot be used: its packets are swallowed until it ends */
  skipping = false;
  /** video: waiting for an I frame */
  waitKey = true;

  /** A packet's body, src[at, end), as the frame's next part. */
  addPart(src: Buffer, at: number, end: number): void {
    const i = this.count++;
    if (this.lastSource >= 0 && src === this.parts[this.lastSource]) this.parts[i] = SAME_READ;
    else {
      this.parts[i] = src;
      this.lastSource = i;
    }
    this.partAt[i] = at;
    this.partEnd[i] = end;
    this.bytes += end - at;
  }

  /**
   * Copies the bodies of parts `from`..count into `into` at `at`; returns where they end.
   *
   * Any copy between two Buffers makes a view of the source: Node 20's Buffer.copy makes one too, after more checks,
   * and a subarray asks the runtime for `.buffer` and `.byteOffset` each time. Here the view is a plain Uint8Array over
   * the ArrayBuffer, read once per source Buffer (a frame's parts nearly all come from one read), through
   * plugin-sdk/byte-views.ts (on the prototype, each property was a generic LoadIC here). The source is kept in locals:
   * kept in a field, the read's young view took the write barrier's slow path once a frame.
   */
  copyParts(from: number, into: Buffer, at: number): number {
    if (from >= this.count) return at;
    const parts = this.parts;
    // a SAME_READ part at `from` is in the Buffer of the last part before it that names one
    let k = from;
    while (k > 0 && parts[k] === SAME_READ) k--;
    let src = parts[k];
    let mem = memOf(src);
    let off = offsetOf(src);
    for (let i = from; i < this.count; i++) {
      const q = parts[i];
      if (q !== SAME_READ && q !== src) {
        src = q;
        mem = memOf(q);
        off = offsetOf(q);
      }
      const a = this.partAt[i];
      const n = this.partEnd[i] - a;
      setBytes(into, new Uint8Array(mem, off + a, n), at);
      at += n;
    }
    return at;
  }

  /** The frame so far is `store`'s first `bytes`: its only part. */
  keepOnly(store: Buffer, bytes: number): void {
    this.release(1);
    this.count = 1;
    this.lastSource = 0;
    this.parts[0] = store;
    this.partAt[0] = 0;
    this.partEnd[0] = bytes;
  }

  reset(): void {
    this.release(0);
    this.count = 0;
    this.lastSource = -1;
    this.bytes = 0;
    this.store = undefined;
    this.inFrame = false;
    this.skipping = false;
    this.tentative = false;
  }

  /** Empties the slots from `from` up to `count` (the same Buffer in all keeps the array's elements of one kind). */
  private release(from: number): void {
    const parts = this.parts;
    for (let i = from; i < this.count; i++) parts[i] = NO_BODY;
  }
}
