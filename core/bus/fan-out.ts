import type { TrackInfo } from '../../plugin-sdk/media';
import type { Entry } from './entry';
import type { Reader } from './reader';

/**
 * A stream's readers, and the payload bytes waiting in their queues: every unit is offered to each reader's own
 * queue, and when the queues and the GOP cache together pass the stream's cap, the reader furthest behind is moved
 * to the next keyframe (its queue dropped), so one stalled reader cannot hold a stream's memory.
 */
export class FanOut {
  private readonly readers = new Set<Reader>();
  /** payload bytes in the readers' queues: a running total, recounted before anyone is shed */
  private queued = 0;
  /** readers moved to the next keyframe to keep the stream under its cap */
  skips = 0;

  constructor(
    /** read at each check: the bus's limits */
    private readonly limits: { readonly maxStreamBytes: number },
  ) {}

  get size(): number {
    return this.readers.size;
  }

  /** a reader joined with what it queued at join (its GOP) */
  add(r: Reader): void {
    this.readers.add(r);
    this.queued += r.queuedBytes;
  }

  /** whether it was one of them */
  delete(r: Reader): boolean {
    if (!this.readers.delete(r)) return false;
    this.recount();
    return true;
  }

  /** The stream closes: the readers, no longer counted, to be ended. */
  takeAll(): Reader[] {
    const all = [...this.readers];
    this.readers.clear();
    this.queued = 0;
    return all;
  }

  /** A unit to every reader; `gopBytes`, what the GOP cache holds, counts against the cap with the queues. */
  offer(entry: Entry, gopBytes: number): void {
    for (const r of this.readers) this.queued += r.offer(entry);
    const max = this.limits.maxStreamBytes;
    if (this.queued + gopBytes > max) {
      // the running total misses what sinks drained since; recount before shedding anyone
      this.recount();
      if (this.queued + gopBytes > max) this.shedLargestQueue();
    }
  }

  tracksChanged(list: ReadonlyArray<TrackInfo>): void {
    for (const r of this.readers) r.tracksChanged(list);
  }

  /** whether no reader still queues, or may read, a unit numbered up to `lastSrc` (Entry.src) */
  doneWith(lastSrc: number): boolean {
    for (const r of this.readers) if (!r.doneWith(lastSrc)) return false;
    return true;
  }

  /** payload bytes in the readers' queues now (shared units counted once per reader) */
  queuedBytes(): number {
    this.recount();
    return this.queued;
  }

  private shedLargestQueue(): void {
    let worst: Reader | undefined;
    for (const r of this.readers) if (!worst || r.queuedBytes > worst.queuedBytes) worst = r;
    if (worst && worst.queuedBytes > 0) {
      this.queued -= worst.skip();
      this.skips++;
    }
    this.recount();
  }

  private recount(): void {
    let q = 0;
    for (const r of this.readers) q += r.queuedBytes;
    this.queued = q;
  }
}
