import type { MediaSelect, MediaReader, ReaderHandle, ReaderStats } from '../../plugin-sdk/bus';
import type { TrackInfo } from '../../plugin-sdk/media';
import { BYTE_TOTAL_START } from '../../plugin-sdk/hot-metrics';
import { formOf, isTrackChange, type Entry, type QueueItem, type TrackChange } from './entry';

export interface ReaderSettings {
  /**
   * who reads (ReaderOptions.reader, or found by the bus for a sink that cannot say when it is done): named in
   * logs and metrics; undefined for an unnamed sink that answers holdsPayloads
   */
  name: string | undefined;
  media: MediaSelect;
  /** the stream's format slot whose forms this reader gets, or -1 */
  slot: number;
  maxQueueBytes: number;
  dropAfterMs: number;
  /** whether a start point must be a video keyframe (false for audio-only readers and streams without video) */
  needKey: () => boolean;
  now: () => number;
  /** the reader ended itself (stuck, or its sink threw): the stream logs and counts it */
  onFault: (r: Reader, reason: string) => void;
  onClose: (r: Reader) => void;
}

/** whether a sink says when it holds none of what it was given; one that does not is taken to hold everything */
export function answersHoldsPayloads(sink: Pick<MediaReader<unknown>, 'holdsPayloads'>): boolean {
  return typeof sink.holdsPayloads === 'function';
}

/** A reader that misses this many times its queue cap since it last took a unit is stuck, whatever the clock says. */
const STUCK_MISSED_FACTOR = 4;

/**
 * One reader of a stream with a bounded queue: the one slow-reader policy of the gateway. While the sink is not
 * writable, entries queue (by reference: the bytes are shared with the GOP cache and other readers). Past the cap
 * the queue is emptied and the reader waits for the next keyframe: it loses whole GOPs, never memory. A reader
 * that takes nothing for dropAfterMs while media waits, or misses 4x its cap, is ended ('reader stuck').
 * Nothing reaches the sink before start(), which the stream calls from a microtask after subscribe() returned.
 */
export class Reader<F = unknown> implements ReaderHandle {
  /**
   * Items from `head` to `tail`. Emptied by moving the indices, not by `length = 0`: V8 drops an array's backing
   * store at length 0, and a reader that keeps up empties its queue at every unit, so each unit cost it a new
   * backing store to grow and collect (41 ns against 2 ns a unit in a micro-benchmark, and young garbage).
   */
  private queue: QueueItem[] = [];
  private head = 0;
  private tail = 0;
  queuedBytes = 0;
  /** the GOP handed over at join may exceed the cap once: catching up is not falling behind */
  private joinAllowance = 0;
  private waitKey = true;
  private started = false;
  private closedFlag = false;
  private draining = false;
  /** tracks dropped by a skip, delivered before the next unit */
  private pendingTracks: TrackChange | undefined;
  /** bytes skipped since the reader last took a unit */
  private missed = 0;
  /** when the sink was first found not writable with units waiting (-1: taking units) */
  private stuckSince = -1;
  readonly stats: ReaderStats = { units: 0, bytes: BYTE_TOTAL_START, skips: 0, skippedUnits: 0, queuedBytes: 0 };

  /** its sink says when it holds none of what it was given (MediaReader.holdsPayloads), so payload memory can be reused */
  readonly tellsWhenDone: boolean;

  constructor(
    private readonly sink: MediaReader<F>,
    private readonly o: ReaderSettings,
  ) {
    this.tellsWhenDone = answersHoldsPayloads(sink);
  }

  get name(): string | undefined {
    return this.o.name;
  }

  /** whether its sink may still read a payload it was given (true when it cannot tell) */
  holdsPayloads(): boolean {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with .call(this.sink) below
    const h = this.sink.holdsPayloads;
    if (h === undefined) return true;
    try {
      return h.call(this.sink) !== false;
    } catch {
      return true;
    }
  }

  /** whether nothing numbered up to `src` (Entry.src) waits in its queue or may still be read by its sink */
  doneWith(src: number): boolean {
    if (this.closedFlag) return true;
    const q = this.queue;
    for (let i = this.head; i < this.tail; i++) {
      const item = q[i];
      if (!isTrackChange(item)) {
        if (item.src <= src) return false;
        break;
      }
    }
    return !this.holdsPayloads();
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  get slot(): number {
    return this.o.slot;
  }

  /** The GOP cache and current tracks at join; delivered from start(). */
  join(tracks: TrackChange, gop: readonly Entry[]): void {
    const mine = this.mine(tracks);
    if (mine.length) this.queueTracks(mine);
    const before = this.queuedBytes;
    for (const e of gop) this.offer(e, true);
    this.joinAllowance = this.queuedBytes - before;
  }

  start(): void {
    if (this.closedFlag || this.started) return;
    this.started = true;
    this.drain();
  }

  private wants(e: Entry): boolean {
    const kind = e.unit.kind;
    if (this.o.media !== 'av' && kind !== (this.o.media === 'v' ? 'video' : 'audio')) return false;
    return this.o.slot < 0 || formOf(e, this.o.slot) !== undefined;
  }

  /** Offers an entry; returns the change in queued bytes so the stream can keep its total. */
  offer(e: Entry, joining = false): number {
    if (this.closedFlag || !this.wants(e)) return 0;
    if (this.waitKey) {
      const u = e.unit;
      if (this.o.media !== 'a' && this.o.needKey() && !(u.kind === 'video' && u.keyframe)) return 0;
      this.waitKey = false;
    }
    // in step (nothing waits, the sink takes it now): the entry skips the queue. The queue is old and the entry
    // young, so its store there took the write barrier's slow path, for every reader and unit
    if (!joining && this.started && this.head === this.tail && !this.draining && this.takeNow(e)) return 0;
    const before = this.queuedBytes;
    this.queue[this.tail++] = e;
    this.queuedBytes += e.unit.payload.length;
    if (!joining) {
      // written first if the sink can take it: a unit bigger than the cap is not "behind" when nothing waits
      if (this.started) this.drain();
      if (this.queuedBytes > this.o.maxQueueBytes + this.joinAllowance) this.skip();
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- drain() or skip() above may close it
      if (this.queuedBytes > 0 && !this.closedFlag) this.checkStuck();
    }
    return this.queuedBytes - before;
  }

  tracksChanged(tracks: ReadonlyArray<TrackInfo>): void {
    if (this.closedFlag) return;
    this.queueTracks(this.mine(tracks));
    if (this.started) this.drain();
  }

  private mine(tracks: ReadonlyArray<TrackInfo>): TrackChange {
    return this.o.media === 'av' ? tracks : tracks.filter((t) => t.kind === (this.o.media === 'v' ? 'video' : 'audio'));
  }

  private queueTracks(tracks: TrackChange): void {
    if (!this.sink.tracks) return;
    this.queue[this.tail++] = tracks;
  }

  private emptyQueue(): void {
    this.queue = [];
    this.head = 0;
    this.tail = 0;
  }

  /** Drops everything queued and waits for the next keyframe. Returns bytes freed. */
  skip(): number {
    const freed = this.queuedBytes;
    let units = 0;
    for (let i = this.head; i < this.tail; i++) {
      const q = this.queue[i];
      if (isTrackChange(q)) this.pendingTracks = q;
      else units++;
    }
    this.emptyQueue();
    this.queuedBytes = 0;
    this.joinAllowance = 0;
    this.waitKey = true;
    this.missed += freed;
    this.stats.skips++;
    this.stats.skippedUnits += units;
    this.stats.queuedBytes = 0;
    if (this.pendingTracks) {
      this.queue[this.tail++] = this.pendingTracks;
      this.pendingTracks = undefined;
    }
    try {
      this.sink.skipped?.({ units, bytes: freed });
    } catch (err) {
      this.fault(`sink threw in skipped(): ${(err as Error | undefined)?.message ?? String(err)}`);
    }
    return freed;
  }

  private checkStuck(): void {
    if (this.missed > STUCK_MISSED_FACTOR * this.o.maxQueueBytes) {
      this.fault(`reader stuck: missed ${this.missed} bytes without taking any`);
      return;
    }
    if (this.stuckSince < 0) return;
    if (this.o.now() - this.stuckSince > this.o.dropAfterMs) this.fault(`reader stuck: took nothing for ${this.o.dropAfterMs} ms`);
  }

  resume(): void {
    if (this.started) this.drain();
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    const sink = this.sink;
    const slot = this.o.slot;
    try {
      while (this.head < this.tail && !this.closedFlag) {
        if (sink.writable && !sink.writable()) {
          if (this.stuckSince < 0) this.stuckSince = this.o.now();
          break;
        }
        const q = this.queue[this.head];
        this.queue[this.head++] = undefined as unknown as QueueItem;
        if (isTrackChange(q)) {
          sink.tracks!(q);
          continue;
        }
        this.queuedBytes -= q.unit.payload.length;
        this.hand(sink, slot, q);
      }
      if (this.head === this.tail) {
        // (every slot taken was cleared as it was taken)
        this.head = 0;
        this.tail = 0;
        this.joinAllowance = 0;
        // a queue that once held thousands (a stalled reader) does not keep their slots for good
        if (this.queue.length > 4096) this.queue = [];
      } else if (this.head > 1024) {
        this.queue = this.queue.slice(this.head, this.tail);
        this.tail -= this.head;
        this.head = 0;
      }
      this.stats.queuedBytes = this.queuedBytes;
    } catch (err) {
      this.fault(`sink threw: ${(err as Error | undefined)?.message ?? String(err)}`);
    } finally {
      this.draining = false;
    }
  }

  /** An entry to a sink with nothing queued before it; false when the sink is not writable (the entry is queued). */
  private takeNow(e: Entry): boolean {
    const sink = this.sink;
    if (sink.writable && !sink.writable()) return false;
    this.draining = true;
    try {
      this.hand(sink, this.o.slot, e);
    } catch (err) {
      this.fault(`sink threw: ${(err as Error | undefined)?.message ?? String(err)}`);
    } finally {
      this.draining = false;
    }
    // what came while the sink wrote (a sink whose write led to another push of this stream) goes after it
    if (this.head < this.tail) this.drain();
    return true;
  }

  /** An entry to the sink, counted as taken. */
  private hand(sink: MediaReader<F>, slot: number, q: Entry): void {
    const n = q.unit.payload.length;
    this.stats.units++;
    this.stats.bytes += n;
    this.missed = 0;
    this.stuckSince = -1;
    sink.write(q.unit, (slot < 0 ? undefined : slot === 0 ? q.f0 : formOf(q, slot)) as F);
  }

  private fault(reason: string): void {
    if (this.closedFlag) return;
    this.o.onFault(this, reason);
    this.end(reason);
    this.o.onClose(this);
  }

  /** The stream ended this reader (closed, or the reader was stuck). */
  end(reason: string): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.emptyQueue();
    this.queuedBytes = 0;
    this.stats.queuedBytes = 0;
    try {
      this.sink.end?.(reason);
    } catch {
      // the reader is gone either way
    }
  }

  close(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.emptyQueue();
    this.queuedBytes = 0;
    this.stats.queuedBytes = 0;
    this.o.onClose(this);
  }
}
