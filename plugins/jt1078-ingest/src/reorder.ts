/**
 * Sequence-number bookkeeping for one source: a reorder buffer for UDP, and loss accounting for both
 * transports (TCP uses it with maxPackets 0, which only counts gaps and never holds a packet).
 *
 * Audio and video: some terminals number all packets of a channel with one counter, others keep one
 * counter per media kind. Packets are therefore ordered per kind (video, audio), each with its own
 * expected sequence number, and a hole in one kind's sequence is not a loss when the other kind carried
 * that number (a shared counter). Ordering per kind is what matters downstream (frames are rebuilt per
 * kind; the timeline orders audio against video by timestamp). With separate counters the other kind's
 * numbers are unrelated and could hide a real loss, so the check is switched off while both kinds keep
 * carrying the same numbers, which a shared counter never does. That is judged on a decaying score
 * rather than on one occurrence: a single corrupted number must not switch a shared-counter source to
 * "separate" for good (every audio number would then look like a lost video packet).
 * Limitations, by necessity: with a shared counter a lost audio packet is indistinguishable from a lost
 * video packet, so it is reported as a loss in both kinds; and two separate counters that both start at
 * 0 together look shared for the first few packets, so a loss there can go unreported.
 */
import type { Jt1078Packet } from './packet';
import { performance } from 'node:perf_hooks';

export interface ReorderOptions {
  /** Packets held per kind while waiting for a missing one; 0 = release at once (TCP). Default 64. */
  maxPackets?: number;
  /** Longest a packet waits for a missing predecessor, ms. Default 200. */
  maxDelayMs?: number;
  /** Clock in ms (monotonic); injectable for tests. Default performance.now. */
  now?: () => number;
}

export interface ReorderSink {
  /** A packet in sequence order for its kind; lostBefore = packets of this kind missing just before it. */
  onOrderedPacket(packet: Jt1078Packet, lostBefore: number): void;
}

export interface ReorderStats {
  received: number;
  released: number;
  /** sequence numbers given up on */
  lost: number;
  /** arrived after their place was released (or given up on) */
  late: number;
  duplicates: number;
  /** counter restarts or jumps too big to be loss */
  resets: number;
}

const SEEN_SIZE = 1024;
const SEEN_MASK = SEEN_SIZE - 1;
const SEEN_HALF = SEEN_SIZE / 2;
/** in a seen slot: the number arrived after the other kind's first packet */
const OTHER_RAN = 0x10000;

/** "same number in both kinds" score: +1 per occurrence, -SCORE_DECAY per packet without, capped */
const SCORE_MAX = 16;
const SCORE_DECAY = 0.25;
const SCORE_SEPARATE = 3;
/** consecutive late packets taken as a counter restart */
const LATE_RUN_RESET = 8;

class KindQueue {
  expected = -1;
  /**
   * Nothing released yet: the first number to arrive need not be the first one sent, so an earlier one may still
   * move the start back (else a swap of the first two datagrams would cost the first frame and its whole GOP).
   */
  starting = false;
  /** while starting: the furthest number ahead of `expected` held so far */
  startAhead = 0;
  lateRun = 0;
  count = 0;
  pendingLoss = 0;
  /** arrival time of the longest-waiting buffered packet; recomputed after releases */
  oldest = 0;
  oldestDirty = false;
  slots: Array<Jt1078Packet | undefined> | null = null;
  arrival: Float64Array | null = null;
  /**
   * Numbers this kind received recently, indexed by seq & mask: the number, plus OTHER_RAN when it came after the
   * other kind's first packet; -1 for none. Stale slots are cleared ahead. One table of both facts, made at this
   * kind's first packet: two tables made at once were 10 KB of every stream, half of it for a kind that many
   * terminals never send.
   */
  private seen: Int32Array | undefined;
  lastSeen = -1;

  /**
   * Did this kind carry `seq` since the other kind began? Only then can it be the other kind's hole in a
   * shared counter: numbers carried before the other kind started belong to the past, and with separate
   * counters they would hide the other kind's first losses.
   */
  filledHoleOf(seq: number): boolean {
    return this.seen !== undefined && this.seen[seq & SEEN_MASK] === (seq | OTHER_RAN);
  }

  markSeen(seq: number, otherRunning: boolean): void {
    const seen = (this.seen ??= new Int32Array(SEEN_SIZE).fill(-1));
    // Clear the slots half a window ahead of everything between the previous and this number, so an
    // entry left from 65536 numbers ago can never pass for a recent one.
    if (this.lastSeen >= 0) {
      const d = (seq - this.lastSeen) & 0xffff;
      if (d > 0 && d < 0x8000) {
        const n = Math.min(d, SEEN_SIZE);
        for (let i = 1; i <= n; i++) seen[(this.lastSeen + i + SEEN_HALF) & SEEN_MASK] = -1;
        this.lastSeen = seq;
      }
    } else {
      this.lastSeen = seq;
    }
    seen[seq & SEEN_MASK] = otherRunning ? seq | OTHER_RAN : seq;
  }

  hasSeen(seq: number): boolean {
    // (an empty slot, -1, has all low bits set: it must not pass for number 65535)
    const v = this.seen === undefined ? -1 : this.seen[seq & SEEN_MASK];
    return v >= 0 && (v & 0xffff) === seq;
  }
}

export class Jt1078Reorderer {
  readonly stats: ReorderStats = { received: 0, released: 0, lost: 0, late: 0, duplicates: 0, resets: 0 };
  private readonly maxPackets: number;
  private readonly maxDelay: number;
  private readonly now: () => number;
  /** ring size: a power of two comfortably above maxPackets, and the window inside which numbers count as near */
  private readonly window: number;
  private readonly queues = [new KindQueue(), new KindQueue()];
  /** both kinds keep carrying the same numbers: counters are separate, so no cross-kind hole filling */
  private separateCounters = false;
  private sameNumberScore = 0;

  constructor(
    private readonly sink: ReorderSink,
    opts: ReorderOptions = {},
  ) {
    this.maxPackets = Math.max(0, Math.floor(opts.maxPackets ?? 64));
    this.maxDelay = opts.maxDelayMs ?? 200;
    this.now = opts.now ?? (() => performance.now());
    let w = 1024;
    while (w < this.maxPackets * 4) w *= 2;
    this.window = Math.min(w, 16384);
  }

  /** Packets currently held. */
  get buffered(): number {
    return this.queues[0].count + this.queues[1].count;
  }

  /** True while this source's audio and video appear to number their packets independently. */
  get countersSeparate(): boolean {
    return this.separateCounters;
  }

  push(p: Jt1078Packet): void {
    if (p.dataType > 3) return;
    this.stats.received++;
    const k = p.dataType === 3 ? 1 : 0;
    const q = this.queues[k];
    const other = this.queues[1 - k];
    const seq = p.seq;
    if (other.hasSeen(seq)) {
      if (this.sameNumberScore < SCORE_MAX) this.sameNumberScore += 1;
    } else if (this.sameNumberScore > 0) {
      this.sameNumberScore -= SCORE_DECAY;
    }
    this.separateCounters = this.sameNumberScore >= SCORE_SEPARATE;
    q.markSeen(seq, other.expected >= 0);

    const W = this.window;
    if (q.expected < 0) {
      q.expected = seq;
      q.starting = this.maxPackets > 0;
      q.startAhead = 0;
    }
    let d = (seq - q.expected) & 0xffff;
    if (q.starting && d >= 0x8000 && 0x10000 - d <= this.maxPackets && q.startAhead + (0x10000 - d) < W) {
      // an earlier number than the first one seen, before anything left: the stream starts here instead
      q.startAhead += 0x10000 - d;
      q.expected = seq;
      d = 0;
    } else if (q.starting && d < W && d > q.startAhead) {
      q.startAhead = d;
    }

    if (this.maxPackets === 0) {
      // In-order transport: release at once and only account for holes.
      if (d >= 0x8000 || d >= W) {
        // Backwards or far ahead on an ordered transport: the terminal restarted its counter. What was
        // lost in between is unknown, but something was: the frame in progress cannot be trusted.
        this.stats.resets++;
        this.release(q, p, 1);
      } else {
        this.release(q, p, this.countMissing(q.expected, d, other));
      }
      q.expected = (seq + 1) & 0xffff;
      return;
    }

    if (d >= 0x8000) {
      // Isolated late packets are reordering; a run of them is a terminal that restarted its counter
      // a little below where it was, which would otherwise stall this kind until it caught up.
      if (0x10000 - d <= W && ++q.lateRun < LATE_RUN_RESET) {
        this.stats.late++;
        this.drain(other);
        return;
      }
      this.reset(q, seq, 1);
    } else if (d >= W) {
      this.reset(q, seq, 1);
    }
    q.lateRun = 0;
    if (q.slots === null) {
      q.slots = new Array<Jt1078Packet | undefined>(W);
      q.arrival = new Float64Array(W);
    }
    const slot = seq & (W - 1);
    const held = q.slots[slot];
    if (held !== undefined) {
      if (held.seq === seq) {
        this.stats.duplicates++;
        return;
      }
      // Cannot happen while the window is respected; keep the newer packet rather than corrupt order.
      q.count--;
    }
    const t = this.now();
    q.slots[slot] = p;
    (q.arrival as Float64Array)[slot] = t;
    if (q.count === 0) q.oldest = t;
    q.count++;
    this.drain(q);
    this.drain(other);
  }

  /** Releases whatever waited longer than maxDelayMs; call from a timer (see nextDeadline). */
  poll(): void {
    this.drain(this.queues[0]);
    this.drain(this.queues[1]);
  }

  /** When poll() next has something to do (ms on the injected clock), or Infinity. */
  nextDeadline(): number {
    let t = Infinity;
    for (const q of this.queues) {
      if (q.count > 0) {
        if (q.oldestDirty) this.recomputeOldest(q);
        t = Math.min(t, q.oldest + this.maxDelay);
      }
    }
    return t;
  }

  /** Releases everything held, in order, counting the holes as lost (end of stream). */
  flush(): void {
    for (const q of this.queues) this.releaseAll(q);
  }

  // ---------------------------------------------------------------------------------------------

  private release(q: KindQueue, p: Jt1078Packet, lost: number): void {
    this.stats.released++;
    const n = lost + q.pendingLoss;
    q.pendingLoss = 0;
    this.sink.onOrderedPacket(p, n);
  }

  /** Numbers in [from, from + d) this kind never had, leaving out those the other kind carried. */
  private countMissing(from: number, d: number, other: KindQueue): number {
    if (d === 0) return 0;
    if (this.separateCounters) return d;
    let n = 0;
    for (let i = 0; i < d; i++) if (!other.filledHoleOf((from + i) & 0xffff)) n++;
    return n;
  }

  private drain(q: KindQueue): void {
    if (q.count === 0 || q.slots === null) return;
    const slots = q.slots;
    const mask = this.window - 1;
    const other = q === this.queues[0] ? this.queues[1] : this.queues[0];
    let now = -1;
    if (q.starting) {
      // hold the first packets for up to maxDelayMs (or maxPackets) in case an earlier one is still on its way
      if (q.oldestDirty) this.recomputeOldest(q);
      now = this.now();
      if (q.count <= this.maxPackets && now - q.oldest < this.maxDelay) return;
      q.starting = false;
    }
    while (q.count > 0) {
      const s = q.expected;
      const slot = s & mask;
      const p = slots[slot];
      if (p !== undefined && p.seq === s) {
        slots[slot] = undefined;
        q.count--;
        q.oldestDirty = true;
        q.expected = (s + 1) & 0xffff;
        this.release(q, p, 0);
        continue;
      }
      if (!this.separateCounters && other.filledHoleOf(s)) {
        q.expected = (s + 1) & 0xffff;
        continue;
      }
      if (q.count <= this.maxPackets) {
        if (q.oldestDirty) this.recomputeOldest(q);
        if (now < 0) now = this.now();
        if (now - q.oldest < this.maxDelay) break;
      }
      // Waited long enough, or too much is held: give up on this number.
      q.pendingLoss++;
      this.stats.lost++;
      q.expected = (s + 1) & 0xffff;
    }
  }

  private recomputeOldest(q: KindQueue): void {
    q.oldestDirty = false;
    if (q.count === 0 || q.slots === null) return;
    const arrival = q.arrival as Float64Array;
    const mask = this.window - 1;
    let left = q.count;
    let min = Infinity;
    for (let i = 0; i < this.window && left > 0; i++) {
      const slot = (q.expected + i) & mask;
      if (q.slots[slot] !== undefined) {
        left--;
        if (arrival[slot] < min) min = arrival[slot];
      }
    }
    q.oldest = min;
  }

  private releaseAll(q: KindQueue): void {
    q.starting = false;
    if (q.slots === null) return;
    const mask = this.window - 1;
    const from = q.expected;
    for (let i = 0; i < this.window && q.count > 0; i++) {
      const s = (from + i) & 0xffff;
      const slot = s & mask;
      const p = q.slots[slot];
      if (p !== undefined && p.seq === s) {
        q.slots[slot] = undefined;
        q.count--;
        this.release(q, p, 0);
      } else if (this.separateCounters || !this.queues[q === this.queues[0] ? 1 : 0].filledHoleOf(s)) {
        q.pendingLoss++;
        this.stats.lost++;
      }
      q.expected = (s + 1) & 0xffff;
    }
    q.oldestDirty = false;
  }

  /** The counter restarted or leapt: release what is held, then continue from seq (a discontinuity). */
  private reset(q: KindQueue, seq: number, lost: number): void {
    this.stats.resets++;
    this.releaseAll(q);
    q.expected = seq;
    q.pendingLoss += lost;
  }
}
