/**
 * Frame payload memory of one stream, reused once nothing can read it any more (Publisher.alloc).
 *
 * Why: at 1,000 terminals the ingest copies ~125 MB/s of frames into fresh memory, which V8 counts as external
 * memory: every ~64 MB of it starts a mark-compact, a pause the event loop and every stream on it wait through.
 * Reusing chunks ends that churn. Chunks a stream is done with go to the bus's pool (chunk-pool.ts), where the next
 * stream that needs one takes it.
 *
 * When a chunk may be reused: every unit carved from it was pushed (`pending` 0), the stream's GOP cache starts after
 * its last unit (`lastSeq`), every reader's queue does too, and every reader's sink says it holds none of what it was
 * given (`MediaReader.holdsPayloads`: an FLV player whose socket took all its bytes). The stream answers that (`done`).
 * What cannot be proven done is never reused, only forgotten (`escaped`), and left to the collector: a
 * chunk with a slice carved and never pushed, chunks past MAX_TRACKED_UNITS, and (the stream drops its whole arena) every
 * chunk of a stream a reader without `holdsPayloads` joins (HLS, RTSP, the recorder, a stage that cannot say: the
 * stream then uses small collected slabs while one is attached; a stage's stream fed by `passes` counts as the
 * input's holder, with its own readers) or a reader leaves with bytes still in its socket. A chunk is one stream's
 * from the pool's `take` until this arena gives it back; chunk-pool.ts says what sharing the pool costs.
 */

import { memOf, offsetOf } from '../../plugin-sdk/byte-views';
import type { Chunk, ChunkPool } from './chunk-pool';
import { Buffer } from 'node:buffer';

/**
 * chunks tracked at most while waiting to be done, in the pool's units (4 MiB of 32 KiB ones): a reader that always
 * holds something (a player whose socket never quite empties) would otherwise make the arena keep every chunk the
 * stream ever had. Past this the oldest are forgotten and left to the collector, which frees them once their units
 * are gone.
 */
const MAX_TRACKED_UNITS = 128;

export class PayloadArena {
  /** in carving order; the last one is being filled */
  private readonly chunks: Chunk[] = [];
  private trackedBytes = 0;
  private used = 0;
  /**
   * The chunk being carved (the list's last) and its size: alloc's test reads neither the list nor the chunk. At
   * 1,000 streams a stream's arena has left the cache by its next frame, and the list's length, its elements and the
   * chunk's Buffer were three lines fetched for that test (alloc's hottest line in a profile).
   */
  private cur: Chunk | undefined;
  private curSize = 0;
  /**
   * The chunk alloc carved last, and where its last slice starts (-1: none): the unit pushed next has it, found
   * without chunkOf's scan. Numbers and an old chunk, not the slice: a field holding the young slice took the write
   * barrier's slow path once a frame.
   */
  private lastChunk: Chunk | undefined;
  private lastAt = -1;

  constructor(
    /** whether every holder is done with the units numbered up to `lastSeq` */
    private readonly done: (lastSeq: number) => boolean,
    private readonly pool: ChunkPool,
  ) {}

  /**
   * n bytes for a unit's payload, not zeroed. A frame that does not fit the rest of the chunk starts the next, one
   * at least its size (key frames are the large ones, and they are where the memory churned); one larger than the
   * pool's largest gets memory of its own.
   */
  alloc(n: number): Buffer {
    if (n > this.pool.maxChunk) return Buffer.allocUnsafe(n);
    let c = this.cur;
    if (c === undefined || this.used + n > this.curSize) c = this.next(n);
    const at = this.used;
    // 8-byte alignment keeps typed-array views over the slices possible
    this.used = (at + n + 7) & ~7;
    c.pending++;
    // a view made from the chunk's ArrayBuffer (its memory of its own: offset 0): node's subarray reads the Buffer's
    // `.buffer` and `.byteOffset`, generic property loads in optimised code on Node 20, for every frame
    const slice = Buffer.from(c.mem, at, n);
    this.lastChunk = c;
    this.lastAt = at;
    return slice;
  }

  /** A unit with this payload was pushed to the stream as number `seq`. */
  pushed(payload: Buffer, seq: number): void {
    const c = this.chunkOf(payload);
    if (c === undefined) return;
    if (c.pending > 0) c.pending--;
    if (seq > c.lastSeq) c.lastSeq = seq;
  }

  /**
   * A slice alloc gave that no unit will carry: its chunk no longer waits for it, and when nothing was carved after
   * it, its room is carved again.
   */
  discard(payload: Buffer): void {
    const c = this.chunkOf(payload);
    if (c === undefined || c.pending === 0) return;
    c.pending--;
    // the slice carved last: its room is carved again (a chunk's memory is all of its ArrayBuffer: offsets are the same)
    if (c === this.lastChunk && c === this.cur && offsetOf(payload) === this.lastAt) {
      this.used = this.lastAt;
      this.lastAt = -1;
      this.lastChunk = undefined;
    }
  }

  /** chunks held: carved from, and waiting to be done */
  get chunkCount(): number {
    return this.chunks.length;
  }

  /**
   * The stream drops this arena: a reader that cannot say when it is done came (`escaped`), or the stream closed.
   */
  forgetAll(escaped: boolean): void {
    for (const c of this.chunks) this.pool.forget(c, escaped);
    this.pool.settle();
    this.chunks.length = 0;
    this.cur = undefined;
    this.curSize = 0;
    this.trackedBytes = 0;
    this.lastAt = -1;
    this.lastChunk = undefined;
  }

  /**
   * The chunk a slice was carved from: the one carved last (nearly every slice, pushed or discarded right after its
   * alloc), else the tracked ones, newest first (a slice not pushed at once is a frame held back a little). A scan, not
   * a map by memory: the list is a GOP's chunks or so, and the map's insert and delete for every chunk (with the
   * `.buffer` reads they need) cost more than the scans of the few slices not from lastChunk.
   */
  private chunkOf(payload: Buffer): Chunk | undefined {
    const mem = memOf(payload);
    const last = this.lastChunk;
    if (last !== undefined && last.mem === mem) return last;
    const list = this.chunks;
    for (let i = list.length - 1; i >= 0; i--) if (list[i].mem === mem) return list[i];
    return undefined;
  }

  private next(n: number): Chunk {
    this.reclaim();
    const c = this.pool.take(n);
    this.chunks.push(c);
    this.trackedBytes += c.buf.length;
    this.used = 0;
    this.cur = c;
    this.curSize = c.buf.length;
    return c;
  }

  /**
   * Gives back what is done now rather than at the next chunk this stream needs. The stream calls it when its GOP
   * cache let a whole GOP go (a key frame): else those chunks would wait for the key frame's chunk to fill, a whole
   * GOP held twice over for a while by every stream.
   */
  settle(): void {
    // not the chunk being carved, nor one with a slice still to be pushed (a frame held back to be ordered): the
    // next chunk's reclaim decides on those
    if (this.chunks.length > 1) this.reclaim(this.chunks.length - 1, true);
  }

  /** Oldest first, up to the first chunk something may still read: done ones go back to the pool. */
  private reclaim(before = this.chunks.length, waitPending = false): void {
    const list = this.chunks;
    let i = 0;
    for (; i < before; i++) {
      const c = list[i];
      if (waitPending && c.pending > 0) break;
      // units are numbered in push order, so later chunks hold later units
      if (c.lastSeq >= 0 && !this.done(c.lastSeq)) break;
      this.untrack(c);
      // a slice carved and never pushed (dropped, or pushed late against the rule): forgotten
      if (c.pending === 0) this.pool.give(c);
      else this.pool.forget(c);
    }
    const maxBytes = MAX_TRACKED_UNITS * this.pool.unit;
    for (; i < list.length && this.trackedBytes > maxBytes; i++) {
      this.untrack(list[i]);
      this.pool.forget(list[i]);
    }
    if (i === 0) return;
    list.splice(0, i);
    // the chunk being carved went too (done, or past MAX_TRACKED_UNITS): the next alloc takes another
    // (an empty list's [-1] is a named-property miss that turned a load megamorphic once)
    const last = list.length > 0 ? list[list.length - 1] : undefined;
    if (last !== this.cur) {
      this.cur = undefined;
      this.curSize = 0;
    }
  }

  private untrack(c: Chunk): void {
    this.trackedBytes -= c.buf.length;
  }
}
