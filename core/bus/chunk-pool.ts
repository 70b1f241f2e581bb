/**
 * Payload chunks no stream can read any more, kept for the next stream of the bus that needs one (payload-arena.ts).
 *
 * Why one pool for the bus (so one per worker process) and not one per stream: a stream's need swings by a whole
 * GOP. Its GOP cache grows from a key frame to the next and then lets the whole GOP go at once; a pool of its own
 * has to keep that peak. Streams' key frames do not come together, so what one stream lets go another is filling
 * its GOP with: a shared pool holds the sum of the averages, not of the peaks. Measured (test/bench/payload-pools.ts,
 * 500 streams of ~1 Mbit/s, GOPs of 2 s at random phases): the shared pool holds 79 MB (162 KiB a stream, of which
 * the GOP caches are 63 MB and spares 5 MB) at ~0.5 us of CPU a frame; pools per stream hold 172 MB (352 KiB a
 * stream, 97 MB of it spare) at ~0.75 us a frame (2.5x the chunks allocated, more memory touched). With every key
 * frame at once (a fleet switched on together): 126 MB against 173 MB. (No reuse: ~2.2 us a frame, the collector's.)
 *
 * What it costs: a chunk moves between streams, so a mistake in deciding when a chunk is done (a sink's wrong
 * `false` from MediaReader.holdsPayloads, or a bug in PayloadArena) could show a reader bytes of another stream where
 * a pool per stream could only show its own stream's newer frames: wrong video either way, another vehicle's here.
 * Against it: a sink that cannot tell is taken to hold (the default), the rule is tested with readers of several
 * streams that check every byte they read, and tests poison what comes back to the pool (`poison`), so a wrong
 * `false` fails a test instead of showing a frame that passes for right. Node's own pool of small Buffers
 * (Buffer.allocUnsafe) mixes every connection's bytes the same way.
 *
 * Sizes are whole multiples of `unit`: a frame that does not fit the rest of its stream's chunk gets one of at least
 * its size, the smallest free one that holds it (a key frame larger than `unit` gets one of its own size rounded
 * up, and the frames after it fill what is left), or a new one. Frames over `maxChunk` get memory the collector
 * frees (4K key frames: rare, and a pool of their size would be memory held for one stream).
 */
import { Buffer } from 'node:buffer';

/** Written over a chunk as it comes back to a poisoning pool: DE AD BE EF, repeated from the chunk's start. */
const POISON = Buffer.from([0xde, 0xad, 0xbe, 0xef]);

/**
 * Whether a pool poisons what comes back by default: tests set GW_POISON_PAYLOADS=1 (test/setup.ts), so a payload
 * read after its reader said it held none shows the poison. Off in production: a chunk's bytes are overwritten by
 * the next frames anyway, and the fill would be a write of every byte once more.
 */
export function poisonByDefault(): boolean {
  return process.env.GW_POISON_PAYLOADS === '1';
}

/** Whether every byte of `b` is the poison (a slice starts 8-byte aligned in its chunk, so on the pattern's start). */
export function isPoisoned(b: Buffer): boolean {
  if (b.length === 0) return false;
  for (let i = 0; i < b.length; i++) if (b[i] !== POISON[i & 3]) return false;
  return true;
}

export interface Chunk {
  readonly buf: Buffer;
  /** buf's ArrayBuffer, read once: `.buffer` is a call into the runtime every time. buf is all of it (offset 0). */
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
    /** overwrite each chunk that comes back with POISON (tests): a reader still reading it sees garbage */
    readonly poison = poisonByDefault(),
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
    if (this.poison) c.buf.fill(POISON);
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
