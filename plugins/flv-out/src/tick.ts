import { performance } from 'node:perf_hooks';

/** Something holding a socket corked until the end of the tick. */
export interface Corked {
  uncork(): void;
}

/**
 * The end of a tick's writes to players. Each player's socket is corked at its first write of a tick and all are
 * uncorked together once the tick's writes are done, so what a player got in one tick (a unit's tags and chunk
 * framing, a joiner's whole GOP) leaves in one writev. Then the units those writes carried are timed for the
 * added-latency metric: arrival at the gateway to bytes handed to the kernel.
 */
export class TickFlush {
  private corked: Corked[] = [];
  private spare: Corked[] = [];
  private received: number[] = [];
  private queued = false;

  constructor(private readonly latency: { observe(seconds: number): void }) {}

  cork(c: Corked): void {
    this.corked.push(c);
    this.schedule();
  }

  /** a unit that arrived at `receivedAt` (performance.now() ms) was written this tick */
  unitWritten(receivedAt: number): void {
    this.received.push(receivedAt);
    this.schedule();
  }

  private schedule(): void {
    if (this.queued) return;
    this.queued = true;
    process.nextTick(this.flush);
  }

  private readonly flush = (): void => {
    this.queued = false;
    // swapped, so a player corked while these uncork (a write callback writing again) waits for the next round
    const list = this.corked;
    this.corked = this.spare;
    this.spare = list;
    for (let i = 0; i < list.length; i++) list[i].uncork();
    list.length = 0;
    const rec = this.received;
    if (rec.length === 0) return;
    const now = performance.now();
    for (let i = 0; i < rec.length; i++) this.latency.observe((now - rec[i]) / 1000);
    rec.length = 0;
  };
}
