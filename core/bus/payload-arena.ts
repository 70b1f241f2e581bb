/**
 * Frame payload memory of one stream, reused once nothing can read it any more (Publisher.alloc).
 *
 * Why: at 1,000 terminals the ingest copies ~125 MB/s of frames into fresh memory, which V8 counts as external
 * memory: every ~64 MB of it starts a mark-compact, a pause the event loop and every stream on it wait through.
 * Reusing a stream's own chunks ends that churn. (Memory stays about the same: the chunks of the GOP the cache
 * just let go wait as spares for the next one, where the collector's garbage waited before.)
 *
 * When a chunk may be reused: every unit carved from it was pushed (`pending` 0), the stream's GOP cache starts after
 * its last unit (`lastSeq`), every reader's queue does too, and every reader's sink says it holds none of what it was
 * given (`MediaSink.holdsPayloads`: an FLV player whose socket took all its bytes). The stream answers that (`done`).
 * What cannot be proven done is never reused, only forgotten (`escaped`), and the collector frees it as before: a
 * chunk with a slice carved and never pushed, chunks past MAX_TRACKED, and (the stream drops its whole arena) every
 * chunk of a stream a reader without `holdsPayloads` joins (HLS, RTSP, the recorder, a stage that cannot say: the
 * stream then uses small collected slabs while one is attached; a stage's stream fed by `passes` counts as the
 * input's holder, with its own readers) or a reader leaves with bytes still in its socket. Chunks are one
 * stream's: a mistake here could show a stream its own older frames, never another tenant's.
 */

interface Chunk {
  readonly buf: Buffer;
  /** slices carved and not pushed yet */
  pending: number;
  /** the stream's number of the last unit pushed from it (-1: none) */
  lastSeq: number;
}

/** counts of every arena of a bus, for its metrics */
export interface ArenaCounts {
  /** chunks allocated */
  allocated: number;
  /** chunks reused */
  reused: number;
  /** chunks left to the collector because no one could prove them done */
  escaped: number;
}

export const ARENA_CHUNK_BYTES = 64 * 1024;
/** spares kept at most: more would be memory held for a GOP that may never need it */
const MAX_SPARE = 4;
/**
 * chunks tracked at most while waiting to be done (4 MiB): a reader that always holds something (a player whose
 * socket never quite empties) would otherwise make the arena keep every chunk the stream ever had. Past this the
 * oldest are forgotten and left to the collector, which frees them once their units are gone, as before.
 */
const MAX_TRACKED = 64;

export class PayloadArena {
  /** in carving order; the last one is being filled */
  private readonly chunks: Chunk[] = [];
  private readonly spare: Chunk[] = [];
  private readonly byMemory = new Map<ArrayBufferLike, Chunk>();
  private used = 0;
  /** the slice alloc gave last and its chunk: the unit pushed next has it (found without a lookup by memory) */
  private lastSlice: Buffer | undefined;
  private lastChunk: Chunk | undefined;

  constructor(
    /** whether every holder is done with the units numbered up to `lastSeq` */
    private readonly done: (lastSeq: number) => boolean,
    private readonly counts: ArenaCounts,
    private readonly chunkSize = ARENA_CHUNK_BYTES,
  ) {}

  /**
   * n bytes for a unit's payload, not zeroed. A frame larger than a chunk gets memory of its own; one that does not
   * fit the rest of the chunk starts the next (key frames are the large ones, and they are where the memory churned).
   */
  alloc(n: number): Buffer {
    if (n > this.chunkSize) return Buffer.allocUnsafe(n);
    let c = this.chunks[this.chunks.length - 1];
    if (c === undefined || this.used + n > this.chunkSize) c = this.next();
    const at = this.used;
    // 8-byte alignment keeps typed-array views over the slices possible
    this.used = (at + n + 7) & ~7;
    c.pending++;
    const slice = c.buf.subarray(at, at + n);
    this.lastSlice = slice;
    this.lastChunk = c;
    return slice;
  }

  /** A unit with this payload was pushed to the stream as number `seq`. */
  pushed(payload: Buffer, seq: number): void {
    const c = payload === this.lastSlice ? this.lastChunk : this.byMemory.get(payload.buffer);
    if (c === undefined) return;
    if (c.pending > 0) c.pending--;
    if (seq > c.lastSeq) c.lastSeq = seq;
  }

  /** chunks held: carved from, and spare */
  get chunkCount(): number {
    return this.chunks.length + this.spare.length;
  }

  private next(): Chunk {
    this.reclaim();
    let c = this.spare.pop();
    if (c !== undefined) {
      c.pending = 0;
      c.lastSeq = -1;
      this.counts.reused++;
    } else {
      const buf = Buffer.allocUnsafeSlow(this.chunkSize);
      c = { buf, pending: 0, lastSeq: -1 };
      this.byMemory.set(buf.buffer, c);
      this.counts.allocated++;
    }
    this.chunks.push(c);
    this.used = 0;
    return c;
  }

  /** Oldest first, up to the first chunk something may still read: done ones become spares. */
  private reclaim(): void {
    const list = this.chunks;
    let i = 0;
    for (; i < list.length; i++) {
      const c = list[i];
      // units are numbered in push order, so later chunks hold later units
      if (c.lastSeq >= 0 && !this.done(c.lastSeq)) break;
      if (c.pending === 0 && this.spare.length < MAX_SPARE) {
        this.spare.push(c);
        continue;
      }
      // a slice carved and never pushed (dropped, or pushed late against the rule), or spares enough: forgotten
      this.byMemory.delete(c.buf.buffer);
      if (c.pending > 0) this.counts.escaped++;
    }
    if (list.length - i > MAX_TRACKED) {
      for (let k = i; k < list.length - MAX_TRACKED; k++) {
        this.byMemory.delete(list[k].buf.buffer);
        this.counts.escaped++;
      }
      i = list.length - MAX_TRACKED;
    }
    if (i > 0) list.splice(0, i);
  }
}
