import { performance } from 'node:perf_hooks';

/** Something holding a socket corked until the end of the tick. */
export interface Corked {
  uncork(): void;
}

/**
 * The end of a tick's writes to players. Each player's socket is corked at its first write of a tick and all are
 * uncorked together once the tick's writes are done, so what a player got in one tick (a unit's tags and chunk
 * framing, a joiner's whole GOP) leaves in one writev. Then the units those writes carried are timed for the
 * added-latency metric: arrival at the gateway to bytes handed to the kernel; a unit written while nothing is corked
 * went to the kernel at once, and is timed then.
 */
export class TickFlush {
  // Lists emptied by a count, not by `length = 0`, which makes V8 drop their backing stores and grow them again
  // every tick (to one slot per player).
  private corked: Corked[] = [];
  private corkedCount = 0;
  private spare: Corked[] = [];
  private received: number[] = [];
  private receivedCount = 0;
  private queued = false;

  constructor(private readonly latency: { observe(seconds: number): void }) {}

  cork(c: Corked): void {
    this.corked[this.corkedCount++] = c;
    this.schedule();
  }

  /** a unit that arrived at `receivedAt` (performance.now() ms) was written this tick */
  unitWritten(receivedAt: number): void {
    if (!this.queued) {
      // No player is corked, so the unit's bytes are with the kernel already (written whole): timed now, with no
      // tick callback scheduled for it. A tick callback a socket read costs a turn of node's tick queue after the
      // read's callback (~1 % of the gateway at 500 terminals, perf).
      this.latency.observe((performance.now() - receivedAt) / 1000);
      return;
    }
    this.received[this.receivedCount++] = receivedAt;
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
    const n = this.corkedCount;
    this.corked = this.spare;
    this.corkedCount = 0;
    this.spare = list;
    for (let i = 0; i < n; i++) {
      const c = list[i];
      // (a player gone since is not kept alive by its slot)
      list[i] = undefined as unknown as Corked;
      c.uncork();
    }
    const rec = this.received;
    const m = this.receivedCount;
    if (m === 0) return;
    this.receivedCount = 0;
    const now = performance.now();
    for (let i = 0; i < m; i++) this.latency.observe((now - rec[i]) / 1000);
  };
}
