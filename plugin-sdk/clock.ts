/** Time as the kernel sees it; tests swap in a manual clock to drive keep and timeout rules without sleeping. */
export type Cancel = () => void;

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): Cancel;
  setInterval(fn: () => void, ms: number): Cancel;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
  setInterval(fn, ms) {
    const t = setInterval(fn, ms);
    return () => clearInterval(t);
  },
};

/** A clock that moves only when told: `advance(ms)` fires due timers in time order. */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void; every?: number }>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): Cancel {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return () => this.timers.delete(id);
  }
  setInterval(fn: () => void, ms: number): Cancel {
    const id = ++this.seq;
    const every = Math.max(1, ms);
    this.timers.set(id, { at: this.t + every, fn, every });
    return () => this.timers.delete(id);
  }
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let nextId = -1;
      let next: { at: number; fn: () => void; every?: number } | undefined;
      for (const [id, tm] of this.timers) {
        if (tm.at <= end && (!next || tm.at < next.at)) {
          next = tm;
          nextId = id;
        }
      }
      if (!next) break;
      this.t = next.at;
      if (next.every) next.at += next.every;
      else this.timers.delete(nextId);
      next.fn();
    }
    this.t = end;
  }
}
