import type { AccessUnit } from '../../plugin-sdk/media';
import type { MediaSink, Subscription } from '../../plugin-sdk/bus';

/**
 * One reader of a stream with a bounded queue. When the sink cannot keep up and the queue passes its cap,
 * the queue is emptied and the reader waits for the next keyframe: it loses whole GOPs, never memory.
 */
export class Subscriber implements Subscription {
  private queue: AccessUnit[] = [];
  private head = 0;
  queuedBytes = 0;
  private waitKey: boolean;
  private closedFlag = false;
  private draining = false;
  readonly stats = { units: 0, bytes: 0, skips: 0, queuedBytes: 0 };

  constructor(
    private readonly sink: MediaSink,
    private readonly maxQueueBytes: number,
    /** false for streams without video: any unit is a start point */
    private needKey: () => boolean,
    private readonly onClose: (s: Subscriber) => void,
  ) {
    this.waitKey = true;
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Offers a unit; returns the change in queued bytes so the stream can keep its total. */
  offer(au: AccessUnit): number {
    if (this.closedFlag) return 0;
    if (this.waitKey) {
      if (this.needKey() && !(au.kind === 'video' && au.keyframe)) return 0;
      this.waitKey = false;
    }
    const before = this.queuedBytes;
    this.queue.push(au);
    this.queuedBytes += au.payload.length;
    if (this.queuedBytes > this.maxQueueBytes) this.skip();
    else this.drain();
    return this.queuedBytes - before;
  }

  /** Drops everything queued and waits for the next keyframe. Returns bytes freed. */
  skip(): number {
    const freed = this.queuedBytes;
    this.queue = [];
    this.head = 0;
    this.queuedBytes = 0;
    this.waitKey = true;
    this.stats.skips++;
    this.stats.queuedBytes = 0;
    return freed;
  }

  resume(): void {
    this.drain();
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      const sink = this.sink;
      while (this.head < this.queue.length && !this.closedFlag && (!sink.writable || sink.writable())) {
        const au = this.queue[this.head];
        this.queue[this.head++] = undefined as unknown as AccessUnit;
        this.queuedBytes -= au.payload.length;
        this.stats.units++;
        this.stats.bytes += au.payload.length;
        sink.write(au);
      }
      if (this.head === this.queue.length) {
        this.queue.length = 0;
        this.head = 0;
      } else if (this.head > 1024) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      this.stats.queuedBytes = this.queuedBytes;
    } finally {
      this.draining = false;
    }
  }

  tracksChanged(tracks: Parameters<NonNullable<MediaSink['tracks']>>[0]): void {
    if (!this.closedFlag) this.sink.tracks?.(tracks);
  }

  end(reason: string): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.queue = [];
    this.queuedBytes = 0;
    this.sink.end?.(reason);
  }

  close(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.queue = [];
    this.queuedBytes = 0;
    this.onClose(this);
  }
}
