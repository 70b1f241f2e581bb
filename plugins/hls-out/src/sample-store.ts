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
 * slice for the response. A chunk is reused once no part in the window, no response being written and no unit
 * waiting for its part reads it (each counted: parts and responses hold it, waiting units are asked about), so the
 * store makes new memory only as the window grows, and the collector has no stream of fresh buffers to chase (each
 * was external memory that brought a mark-compact nearer). A chunk some unit still read when its last holder let go
 * is left to the collector, never reused.
 */
const CHUNK_BYTES = 128 * 1024;
/** chunks kept for reuse per store: more would be memory a quiet stream holds for nothing */
const MAX_FREE = 2;
/** the tests' poison (test/setup.ts): memory given back for reuse is overwritten, so a read after it shows garbage */
const POISON = process.env.GW_POISON_PAYLOADS === '1';

interface Chunk {
  readonly buf: Buffer;
  /** parts in the window made of its bytes */
  parts: number;
  /** responses writing its bytes now */
  sending: number;
  /** no longer carved from */
  sealed: boolean;
  /** back in the free list (or let go): a record nothing may count on any more */
  done: boolean;
}

/** what a part or a response holds of the store: released once, when it no longer reads those bytes */
export interface StoreHold {
  release(): void;
}

const NO_HOLD: StoreHold = { release: () => undefined };

export class SampleStore {
  /** the record of each chunk, by its memory (a response or a part finds its chunks from their slices) */
  private readonly chunks = new WeakMap<ArrayBufferLike, Chunk>();
  private chunk: Chunk | undefined;
  private used = 0;
  private readonly free: Buffer[] = [];
  /** chunks made (not reused): what the window's growth and the collector cost */
  made = 0;

  /**
   * @param stillRead whether units the owner keeps outside parts (waiting for their part) read this memory; a chunk
   *   is reused only when nothing does. Checked when a chunk's last part or response lets go of it.
   */
  constructor(
    private readonly stillRead: (memory: ArrayBufferLike) => boolean = () => false,
    private readonly chunkBytes = CHUNK_BYTES,
  ) {}

  /** `len` bytes to fill (not zeroed); past a quarter of a chunk, memory of their own (the collector's) */
  take(len: number): Buffer {
    if (len > this.chunkBytes >>> 2) return Buffer.allocUnsafeSlow(len);
    let c = this.chunk;
    if (!c || this.used + len > c.buf.length) {
      if (c) {
        c.sealed = true;
        this.maybeFree(c);
      }
      let buf = this.free.pop();
      if (buf === undefined) {
        buf = Buffer.allocUnsafeSlow(this.chunkBytes);
        this.made++;
      }
      c = this.chunk = { buf, parts: 0, sending: 0, sealed: false, done: false };
      this.chunks.set(buf.buffer, c);
      this.used = 0;
    }
    const at = this.used;
    this.used += len;
    return c.buf.subarray(at, at + len);
  }

  /** a part made of these slices (its boxes too: they are not the store's) holds their chunks while in the window */
  holdPart(slices: readonly Buffer[]): StoreHold {
    return this.hold(slices, 'parts');
  }

  /** a response writing these slices holds their chunks until it is done with them (its 'close') */
  holdSend(slices: readonly Buffer[]): StoreHold {
    return this.hold(slices, 'sending');
  }

  private hold(slices: readonly Buffer[], as: 'parts' | 'sending'): StoreHold {
    const held: Chunk[] = [];
    for (const s of slices) {
      const c = this.chunks.get(s.buffer);
      if (c === undefined || c.done || held.includes(c)) continue;
      c[as]++;
      held.push(c);
    }
    if (held.length === 0) return NO_HOLD;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        for (const c of held) {
          c[as]--;
          this.maybeFree(c);
        }
      },
    };
  }

  private maybeFree(c: Chunk): void {
    if (c.done || !c.sealed || c.parts > 0 || c.sending > 0 || this.stillRead(c.buf.buffer)) return;
    c.done = true;
    this.chunks.delete(c.buf.buffer);
    if (this.free.length >= MAX_FREE) return;
    if (POISON) c.buf.fill(0xee);
    this.free.push(c.buf);
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
