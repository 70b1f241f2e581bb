/**
 * Payload chunks no stream can read any more, kept for the next stream of the bus that needs one (payload-arena.ts).
 *
 * Why one pool for the bus and not spares per stream: a stream's need swings by a whole GOP. Its GOP cache grows
 * from a key frame to the next and then lets the whole GOP go at once; spares kept per stream would cover that peak
 * (measured: 5 chunks of 64 KiB, 320 KiB a stream, for a GOP cache of 188 KiB on average). Streams' key frames do
 * not come together, so what one stream lets go another is filling its GOP with: a shared pool holds the sum of the
 * averages, not of the peaks.
 *
 * What it costs: a chunk moves between streams, so a mistake in deciding when a chunk is done (PayloadArena) could
 * show a reader bytes of another stream, where with spares per stream it could only show its own stream's older
 * frames. The rule that decides is tested with readers of several streams that check every byte they read, and
 * Node's own pool of small Buffers (Buffer.allocUnsafe) mixes every connection's bytes the same way.
 *
 * Sizes are whole multiples of `unit`: a frame that does not fit the rest of its stream's chunk gets one of at least
 * its size, the smallest free one that holds it (a key frame larger than `unit` gets one of its own size rounded
 * up, and the frames after it fill what is left), or a new one. Frames over `maxChunk` get memory the collector
 * frees (4K key frames: rare, and a pool of their size would be memory held for one stream).
 */

export interface Chunk {
  readonly buf: Buffer;
  /** buf's ArrayBuffer, read once: `.buffer` is a call into the runtime every time */
  readonly mem: ArrayBufferLike;
  /** slices carved and not pushed yet */
  pending: number;
  /** the stream's number of the last unit pushed from it (-1: none) */
  lastSeq: number;
}

/** counts of the bus's payload chunks, for its metrics */
export interface ArenaCounts {
  /** chunks allocated */
  allocated: number;
  /** chunks taken from the pool again */
  reused: number;
  /** chunks left to the collector because no one could prove them done */
  escaped: number;
  /** done chunks let go because no stream needed them for a while (POOL_TRIM_MS) */
  released: number;
}

export const CHUNK_UNIT_BYTES = 32 * 1024;
export const MAX_CHUNK_BYTES = 1024 * 1024;
/**
 * Free chunks that none of the bus's streams took during a whole window this long are let go. Longer than a GOP:
 * where streams' GOPs end together (a fleet switched on at once, the bench's terminals) the pool fills with a GOP's
 * worth of every stream and is emptied again within one GOP, and letting that go would bring back the churn the
 * pool exists to end; what closed streams gave back is unused for the whole window and goes.
 */
export const POOL_TRIM_MS = 10_000;

export class ChunkPool {
  readonly counts: ArenaCounts = { allocated: 0, reused: 0, escaped: 0, released: 0 };
  /** free chunks by size: free[k] holds chunks of (k + 1) units */
  private readonly free: Chunk[][] = [];
  private freeBytes = 0;
  /** bytes of the chunks streams hold (being carved, or waiting until their units are done) */
  private heldBytes = 0;
  /** the fewest free bytes since the window began: that many were never needed in it */
  private lowWater = 0;
  private windowStart: number;
  /** ends the window while free chunks wait and no stream takes any (a fleet gone quiet, not to zero streams) */
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** the gateway clock, ms */
    private readonly now: () => number,
    readonly unit = CHUNK_UNIT_BYTES,
    readonly maxChunk = MAX_CHUNK_BYTES,
    private readonly trimMs = POOL_TRIM_MS,
  ) {
    if (maxChunk % unit !== 0) throw new RangeError(`maxChunk ${maxChunk} is not a multiple of unit ${unit}`);
    for (let k = 0; k < maxChunk / unit; k++) this.free.push([]);
    this.windowStart = now();
  }

  /** A chunk of at least n bytes (n <= maxChunk), for a stream to carve from. */
  take(n: number): Chunk {
    this.trimIdle();
    const need = n <= this.unit ? 0 : Math.ceil(n / this.unit) - 1;
    const free = this.free;
    for (let k = need; k < free.length; k++) {
      const c = free[k].pop();
      if (c === undefined) continue;
      c.pending = 0;
      c.lastSeq = -1;
      this.freeBytes -= c.buf.length;
      if (this.freeBytes < this.lowWater) this.lowWater = this.freeBytes;
      this.heldBytes += c.buf.length;
      this.counts.reused++;
      return c;
    }
    const size = (need + 1) * this.unit;
    this.heldBytes += size;
    this.counts.allocated++;
    const buf = Buffer.allocUnsafeSlow(size);
    return { buf, mem: buf.buffer, pending: 0, lastSeq: -1 };
  }

  /** A stream is done with this chunk: nothing can read it any more. */
  give(c: Chunk): void {
    const size = c.buf.length;
    this.heldBytes -= size;
    this.free[size / this.unit - 1].push(c);
    this.freeBytes += size;
    if (this.timer === undefined) this.timer = setTimeout(this.onTimer, this.trimMs).unref();
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    this.trimIdle();
    if (this.freeBytes > 0) this.timer = setTimeout(this.onTimer, this.trimMs).unref();
  };

  /**
   * A stream lets go of a chunk it cannot prove done (`escaped`: counted), or of its chunks as it closes (its
   * readers' sockets may still hold bytes): the collector frees it once the last slice is gone. Call `settle` after
   * the last of a batch.
   */
  forget(c: Chunk, escaped = true): void {
    this.heldBytes -= c.buf.length;
    if (escaped) this.counts.escaped++;
  }

  /** After a stream let its chunks go: when no stream holds any, the free ones go too (nothing will take them soon). */
  settle(): void {
    if (this.heldBytes === 0) this.release(this.freeBytes);
    else this.trimIdle();
  }

  /** At the end of a window, lets go of the free bytes no stream needed during it. */
  private trimIdle(): void {
    const t = this.now();
    if (t - this.windowStart < this.trimMs) return;
    this.release(this.lowWater);
    this.windowStart = t;
    this.lowWater = this.freeBytes;
  }

  /** Lets about `bytes` of free chunks go to the collector, largest first. */
  private release(bytes: number): void {
    const target = this.freeBytes - bytes;
    for (let k = this.free.length - 1; k >= 0 && this.freeBytes > target; k--) {
      const list = this.free[k];
      while (list.length > 0 && this.freeBytes > target) {
        this.freeBytes -= list.pop()!.buf.length;
        this.counts.released++;
      }
    }
    if (this.lowWater > this.freeBytes) this.lowWater = this.freeBytes;
  }

  /** bytes waiting in the pool, and held by streams */
  get bytes(): { free: number; held: number } {
    return { free: this.freeBytes, held: this.heldBytes };
  }
}
