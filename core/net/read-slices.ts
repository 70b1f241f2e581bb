/**
 * Socket reads handled in slices of the event loop's time, so that a loop carrying a thousand busy sockets still
 * answers a quiet one (an API call, a player's request) within a few milliseconds.
 *
 * Why: libuv hands every socket that became readable to its callback in one poll phase, and a media read does
 * all of its work there (parse, reassemble, publish, write to players). At 1,000 terminals a poll phase is a
 * thousand reads' work, and a request that arrived during it waits for the rest of it and then for its own turn
 * among the next poll phase's thousand (test/bench/README.md, open-latency: p99 2-3 poll phases). Here a poll
 * phase handles reads at once only until the slice's budget is spent; the rest are copied aside (in arrival order,
 * per reader and across readers) and handled at the end of the loop's turn, again only a budget's worth, before the
 * next poll phase reads what came meanwhile. A request then waits at most about one budget. Below the budget
 * (every turn of a loop not near saturation) nothing is copied: one clock reading a read.
 *
 * A reader whose set-aside bytes pass `maxPendingBytes`, or that sets a read aside while all readers' pass
 * `maxBacklogBytes`, is paused (TCP pushes back on its sender) until they are handled. The copies are carved from
 * slabs, each reused once all of its copies have been handled; with every slab taken a read is handled at once.
 */
import type { Socket } from 'node:net';
import type { SliceReader as SdkSliceReader } from '../../plugin-sdk/plugin';
import { copyBytes, memOf } from '../../plugin-sdk/byte-views';
import { BYTE_TOTAL_START } from '../../plugin-sdk/hot-metrics';
import { pauseBorrowed, readBorrowed, resumeBorrowed } from './borrowed-reads';
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';

export interface ReadSliceStats {
  /** reads handled at once */
  direct: number;
  /** reads set aside past a slice's budget */
  deferred: number;
  deferredBytes: number;
  /** slices that ended with reads still set aside (the loop was behind by more than a budget) */
  overrun: number;
  /** times a reader was paused for its set-aside bytes */
  paused: number;
  /** reads handled at once past the budget, every slab being taken (memory stays bounded, the slice does not) */
  full: number;
}

export interface SliceReaderOptions {
  /** stop reading from the source (e.g. socket.pause()) */
  pause(): void;
  resume(): void;
  /** the handler threw on a set-aside read (on a read handled at once, the throw goes to the caller) */
  onError(err: unknown): void;
}

/** a reader's set-aside bytes past which it is paused: two seconds of a 1 Mbit/s terminal */
const DEFAULT_MAX_PENDING = 256 * 1024;
/**
 * all readers' set-aside bytes past which each reader that sets a read aside is paused: past it the loop is
 * seconds behind, and the kernel's socket buffers should hold what comes, not this process's memory
 */
const DEFAULT_MAX_BACKLOG = 4 * 1024 * 1024;

const SLAB_BYTES = 256 * 1024;
/**
 * slabs alive at most (made once, kept for reuse): twice the backlog that pauses readers, as copies of different
 * readers share slabs and a slab is free only once all of its copies are handled. With every slab taken, a read is
 * handled at once, as without slicing: memory stays bounded whatever the load.
 */
const MAX_SLABS = (2 * DEFAULT_MAX_BACKLOG) / SLAB_BYTES;
/**
 * Spare slabs are let go once this long has passed without needing them: a burst (450 streams opening at once made
 * all 32) then holds its 8 MiB only for a while, yet slabs made by one burst serve the bursts that follow it within
 * this time instead of being made again each time. Where the memory goes: glibc maps a 256 KiB allocation on its own
 * and unmaps it when freed, the first time; that raises its mapping threshold, so later slabs come from its heap and
 * return there, where the process's other buffers (payload chunks) reuse it. Measured in Node 20: RSS back down by
 * the slabs' 8 MiB after the first trim, flat after later ones.
 */
const TRIM_AFTER_MS = 10_000;

class Slab {
  /** the slab's memory, copies being views of it (allocUnsafeSlow: memory of its own, not zeroed) */
  readonly mem = memOf(Buffer.allocUnsafeSlow(SLAB_BYTES));
  used = 0;
  /** copies carved from it not yet handled */
  live = 0;
}

export class ReadSlices {
  readonly stats: ReadSliceStats = { direct: 0, deferred: 0, deferredBytes: BYTE_TOTAL_START, overrun: 0, paused: 0, full: 0 };
  /** when the current slice began (loop clock, ms); -1: none open */
  sliceStart = -1;
  private readonly queue: SliceReader[] = [];
  private head = 0;
  /** slabs holding copies not yet handled, the one being carved included */
  private readonly inUse: Slab[] = [];
  private carving: Slab | undefined;
  private readonly freeSlabs: Slab[] = [];
  /** the most slabs in use at once since the last trim, and when that was */
  private peakInUse = 0;
  private trimmedAt: number;
  private scheduled = false;
  private readonly drainBound = () => this.drain();

  /**
   * @param budgetMs a slice's length; 0 or less: every read is handled at once (no slicing)
   * @param now a monotonic clock in ms
   */
  constructor(
    readonly budgetMs: number,
    readonly now: () => number = () => performance.now(),
    readonly maxPendingBytes = DEFAULT_MAX_PENDING,
    readonly maxBacklogBytes = DEFAULT_MAX_BACKLOG,
  ) {
    this.trimmedAt = now();
  }

  /** bytes of copy slabs alive (in use or spare) */
  get slabBytes(): number {
    return (this.inUse.length + this.freeSlabs.length) * SLAB_BYTES;
  }

  /** bytes set aside and not yet handled, all readers */
  backlogBytes = 0;

  reader(onChunk: (chunk: Buffer) => void, opts: SliceReaderOptions): SliceReader {
    return new SliceReader(this, onChunk, opts);
  }

  /** A TCP socket's bytes through the shared read buffer (borrowed-reads.ts) and these slices; ctx.net.readSliced. */
  readSocket(socket: Socket, onChunk: (chunk: Buffer) => void, onError: (err: unknown) => void): SliceReader {
    // (readBorrowed may deliver what the socket holds already, so the reader comes first and learns the path after)
    let borrowed = false;
    const reader = this.reader(onChunk, {
      pause: () => (borrowed ? pauseBorrowed(socket) : socket.pause()),
      resume: () => (borrowed ? resumeBorrowed(socket) : socket.resume()),
      onError,
    });
    borrowed = readBorrowed(socket, (chunk) => reader.deliver(chunk));
    return reader;
  }

  /** readers with set-aside reads */
  get backlog(): number {
    return this.queue.length - this.head;
  }

  /** @internal: whether a read of n bytes can be set aside (a slab has room, or one more may be taken) */
  canCopy(n: number): boolean {
    if (n > SLAB_BYTES) return false;
    const c = this.carving;
    return (c !== undefined && c.used + n <= SLAB_BYTES) || this.freeSlabs.length > 0 || this.inUse.length < MAX_SLABS;
  }

  /** @internal: a read's bytes copied aside, into the slab being carved (canCopy said there is room) */
  copy(chunk: Buffer): Buffer {
    const n = chunk.length;
    let slab = this.carving;
    if (slab === undefined || slab.used + n > SLAB_BYTES) {
      slab = this.carving = this.freeSlabs.pop() ?? new Slab();
      this.inUse.push(slab);
      if (this.inUse.length > this.peakInUse) this.peakInUse = this.inUse.length;
    }
    const c = Buffer.from(slab.mem, slab.used, n);
    copyBytes(chunk, 0, n, c, 0);
    // 8-byte steps keep each copy's start aligned for the parser's reads
    slab.used += (n + 7) & ~7;
    slab.live++;
    return c;
  }

  /** @internal: a read set aside has been handled (handlers copy what they keep): a copy's slab is free once all of its copies are; an owned read has none */
  release(c: Buffer): void {
    const inUse = this.inUse;
    const mem = memOf(c);
    for (let i = 0; i < inUse.length; i++) {
      const slab = inUse[i];
      if (slab.mem !== mem) continue;
      if (--slab.live > 0) return;
      slab.used = 0;
      if (slab === this.carving) return;
      inUse.splice(i, 1);
      this.freeSlabs.push(slab);
      return;
    }
  }

  /** @internal */
  enqueue(r: SliceReader): void {
    this.queue.push(r);
  }

  /** @internal: a read arrived with no slice open: this one begins now and ends at the end of the loop's turn */
  open(): void {
    const now = this.now();
    this.sliceStart = now;
    if (now - this.trimmedAt >= TRIM_AFTER_MS) this.trim(now);
    this.schedule();
  }

  /** Lets go of the spare slabs the last period did not need: it kept as many as it had in use at once. */
  private trim(now: number): void {
    this.trimmedAt = now;
    const keep = Math.max(0, this.peakInUse - this.inUse.length);
    if (this.freeSlabs.length > keep) this.freeSlabs.length = keep;
    this.peakInUse = this.inUse.length;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.drainBound);
  }

  /** End of a turn: handle set-aside reads, oldest first, for one budget; what is left waits for the next turn. */
  private drain(): void {
    this.scheduled = false;
    const start = this.now();
    this.sliceStart = start;
    const q = this.queue;
    while (this.head < q.length) {
      const r = q[this.head];
      q[this.head++] = undefined as unknown as SliceReader;
      r.runPending();
      if (this.now() - start > this.budgetMs) break;
    }
    if (this.head >= q.length) {
      q.length = 0;
      this.head = 0;
      this.sliceStart = -1;
      return;
    }
    this.stats.overrun++;
    if (this.head > 1024 && this.head * 2 > q.length) {
      q.splice(0, this.head);
      this.head = 0;
    }
    this.schedule();
  }
}

export class SliceReader implements SdkSliceReader {
  /** set-aside reads, oldest first; null when none */
  private pending: Buffer[] | null = null;
  private pendingBytes = 0;
  private paused = false;

  constructor(
    private readonly slices: ReadSlices,
    private readonly onChunk: (chunk: Buffer) => void,
    private readonly opts: SliceReaderOptions,
  ) {}

  /**
   * A read, handled now or set aside if the slice's budget is spent. Borrowed (valid during the call only, e.g. a
   * socket's shared read buffer): set aside as a copy. `owned` (the caller gives it away, e.g. a datagram): set aside
   * as it is, as long as this reader's and all readers' set-aside bytes are under their limits (no pausing a
   * datagram source: past them it is handled at once).
   */
  deliver(chunk: Buffer, owned = false): void {
    const s = this.slices;
    if (this.pending === null) {
      if (s.budgetMs <= 0) {
        // slicing off: no slice to open, no end-of-turn callback to schedule
      } else if (s.sliceStart < 0) s.open();
      else if (s.now() - s.sliceStart > s.budgetMs) {
        if (this.room(chunk.length, owned)) {
          this.pending = [];
          s.enqueue(this);
          this.setAside(chunk, owned);
          return;
        }
        s.stats.full++;
      }
    } else if (this.room(chunk.length, owned)) {
      this.setAside(chunk, owned);
      return;
    } else {
      // no room to set it aside: handled now, after what this reader set aside before it
      s.stats.full++;
      this.runPending();
    }
    s.stats.direct++;
    this.onChunk(chunk);
  }

  private room(n: number, owned: boolean): boolean {
    const s = this.slices;
    return owned ? this.pendingBytes + n <= s.maxPendingBytes && s.backlogBytes + n <= s.maxBacklogBytes : s.canCopy(n);
  }

  /** Handles every set-aside read now (e.g. before the source's end is acted on). */
  flush(): void {
    if (this.pending !== null) this.runPending();
  }

  private setAside(chunk: Buffer, owned: boolean): void {
    const s = this.slices;
    this.pending!.push(owned ? chunk : s.copy(chunk));
    this.pendingBytes += chunk.length;
    s.backlogBytes += chunk.length;
    s.stats.deferred++;
    s.stats.deferredBytes += chunk.length;
    if (!owned && !this.paused && (this.pendingBytes > s.maxPendingBytes || s.backlogBytes > s.maxBacklogBytes)) {
      this.paused = true;
      s.stats.paused++;
      this.opts.pause();
    }
  }

  /** @internal */
  runPending(): void {
    const p = this.pending;
    if (p === null) return; // flushed meanwhile
    this.pending = null;
    this.slices.backlogBytes -= this.pendingBytes;
    this.pendingBytes = 0;
    for (let i = 0; i < p.length; i++) {
      try {
        this.onChunk(p[i]);
      } catch (err) {
        this.opts.onError(err);
      }
      this.slices.release(p[i]);
    }
    if (this.paused) {
      this.paused = false;
      this.opts.resume();
    }
  }
}
