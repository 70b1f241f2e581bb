/**
 * Short strings told to the other workers in batches (`Workers.broadcast`), for state that must add up across workers
 * when what feeds it lands on any of them: datagrams on a socket all workers share (rtsp-out's UDP readers), logins
 * on connections the primary deals in turn (the core's login brake).
 *
 * What is added is gathered for `batchMs` and sent as one message, so a burst costs one message between workers, not
 * one per event; a batch holds at most `maxBatch` items and the rest are dropped and counted, since what feeds it is
 * usually anyone's to send. What a sibling sends is checked for its shape (a list of strings up to `maxItemLength`,
 * at most `maxBatch` of them) before `received` sees it. In a single process nothing is sent or received.
 */
import type { Cancel, Clock } from './clock';
import type { Workers } from './plugin';

export interface BatchedBroadcastOptions {
  workers: Workers;
  topic: string;
  clock: Clock;
  /** how long items are gathered before they go */
  batchMs: number;
  /** items in one batch; more are dropped */
  maxBatch: number;
  /** longer items from a sibling are ignored */
  maxItemLength: number;
  /** true: an item already in the batch is not added again (a fact, not an event to count) */
  distinct?: boolean;
  /** the items of another worker's batch */
  received(items: readonly string[]): void;
  /** `n` items went to the other workers */
  sent?(n: number): void;
  /** an item was not sent: the batch was full */
  dropped?(): void;
}

export class BatchedBroadcast {
  private batch: string[] = [];
  private readonly inBatch = new Set<string>();
  private cancel: Cancel | undefined;

  constructor(private readonly o: BatchedBroadcastOptions) {
    if (o.workers.count > 1) o.workers.on(o.topic, (payload) => this.onSibling(payload));
  }

  add(item: string): void {
    if (this.o.workers.count <= 1) return;
    if (this.o.distinct && this.inBatch.has(item)) return;
    if (this.batch.length >= this.o.maxBatch) {
      this.o.dropped?.();
      return;
    }
    this.batch.push(item);
    if (this.o.distinct) this.inBatch.add(item);
    this.cancel ??= this.o.clock.setTimeout(() => this.flush(), this.o.batchMs);
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
    this.batch = [];
    this.inBatch.clear();
  }

  private flush(): void {
    this.cancel = undefined;
    const items = this.batch;
    if (items.length === 0) return;
    this.batch = [];
    this.inBatch.clear();
    this.o.workers.broadcast(this.o.topic, items);
    this.o.sent?.(items.length);
  }

  private onSibling(payload: unknown): void {
    // a sibling's message, but still checked: its shape is all the receiver relies on
    if (!Array.isArray(payload)) return;
    const items = payload.slice(0, this.o.maxBatch).filter((p): p is string => typeof p === 'string' && p.length <= this.o.maxItemLength);
    if (items.length) this.o.received(items);
  }
}
