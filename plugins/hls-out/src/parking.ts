/**
 * Fetches held until their segmenter has what they ask for (a blocking playlist reload, the hinted part, the
 * segment being made, an early player's first segment). An LL-HLS reader is parked most of the time, so a parked
 * fetch costs a record in its segmenter's list and nothing else: no promise, listener or timer of its own. Each
 * segmenter with parked fetches has one change listener, which has its list checked once the segmenter's work
 * is done (a microtask: the HTTP answers are not written from inside the bus's delivery, and a unit that ends a
 * segment and starts the next is seen as one change); one timer, at the earliest deadline of all, answers those
 * whose time is up.
 */
import type { Cancel, Clock } from '../../../plugin-sdk';
import type { Segmenter } from './segmenter';

export interface Parked {
  readonly seg: Segmenter;
  /** clock ms: answered then with whatever there is */
  deadline: number;
  /** in a list (kept by Parking) */
  parked: boolean;
}

interface Lot<R> {
  list: R[];
  off: () => void;
  /** its check is queued */
  queued: boolean;
}

export class Parking<R extends Parked> {
  private readonly lots = new Map<Segmenter, Lot<R>>();
  private count = 0;
  private timer: Cancel | undefined;
  private timerAt = Infinity;
  private stopped = false;
  /** a list is being gone through: removals only mark (the pass drops them) */
  private passing = false;

  constructor(
    private readonly clock: Clock,
    /** it can be answered now */
    private readonly ready: (r: R) => boolean,
    /** answer it: ok is ready(r) (false when its deadline came first, or at stop) */
    private readonly release: (r: R, ok: boolean) => void,
  ) {}

  /** fetches parked now */
  get size(): number {
    return this.count;
  }

  /** segmenters with parked fetches (each with one change listener) */
  get segmenters(): number {
    return this.lots.size;
  }

  /** holds r until ready(r) or its deadline; once stopped, answers it at once */
  park(r: R): void {
    if (this.stopped) {
      this.release(r, this.ready(r));
      return;
    }
    let lot = this.lots.get(r.seg);
    if (!lot) {
      const seg = r.seg;
      const l: Lot<R> = { list: [], off: () => undefined, queued: false };
      const check = (): void => this.changed(seg, l);
      l.off = seg.onChange(() => {
        if (l.queued) return;
        l.queued = true;
        queueMicrotask(check);
      });
      this.lots.set(seg, l);
      lot = l;
    }
    lot.list.push(r);
    r.parked = true;
    this.count++;
    this.arm(r.deadline);
  }

  /** r's client left: it is forgotten, unanswered */
  remove(r: R): void {
    if (!r.parked) return;
    r.parked = false;
    this.count--;
    const lot = this.lots.get(r.seg);
    if (!lot || this.passing) return;
    const i = lot.list.indexOf(r);
    if (i >= 0) lot.list.splice(i, 1);
    this.dropIfEmpty(r.seg, lot);
  }

  /** every parked fetch is answered now with what there is, and later ones at once: nothing waits past a stop */
  stop(): void {
    this.stopped = true;
    this.timer?.();
    this.timer = undefined;
    this.timerAt = Infinity;
    const all: R[] = [];
    for (const lot of this.lots.values()) {
      lot.off();
      for (const r of lot.list) if (r.parked) all.push(r);
    }
    this.lots.clear();
    for (const r of all) {
      r.parked = false;
      this.count--;
      this.release(r, this.ready(r));
    }
  }

  private changed(seg: Segmenter, lot: Lot<R>): void {
    lot.queued = false;
    this.pass(lot, undefined);
    this.dropIfEmpty(seg, lot);
  }

  private dropIfEmpty(seg: Segmenter, lot: Lot<R>): void {
    if (lot.list.length > 0 || this.lots.get(seg) !== lot) return;
    lot.off();
    this.lots.delete(seg);
  }

  /**
   * Goes through a list, compacting it in place (a release may park again, onto its end): at a change (`at`
   * undefined) the ready ones are answered, at the timer those whose deadline is `at` or before. Returns the earliest
   * deadline left.
   */
  private pass(lot: Lot<R>, at: number | undefined): number {
    const was = this.passing;
    this.passing = true;
    let next = Infinity;
    try {
      const list = lot.list;
      const n = list.length;
      let keep = 0;
      for (let i = 0; i < n; i++) {
        const r = list[i];
        if (!r.parked) continue;
        const due = at === undefined ? this.ready(r) : r.deadline <= at;
        if (!due) {
          list[keep++] = r;
          next = Math.min(next, r.deadline);
          continue;
        }
        r.parked = false;
        this.count--;
        this.release(r, at === undefined || this.ready(r));
      }
      for (let i = n; i < list.length; i++) {
        if (!list[i].parked) continue;
        next = Math.min(next, list[i].deadline);
        list[keep++] = list[i];
      }
      list.length = keep;
    } finally {
      this.passing = was;
    }
    return next;
  }

  /** the one timer: at the earliest deadline */
  private arm(at: number): void {
    if (at >= this.timerAt) return;
    this.timer?.();
    this.timerAt = at;
    this.timer = this.clock.setTimeout(() => this.expire(), Math.max(0, at - this.clock.now()));
  }

  private expire(): void {
    // (a timer may fire a little before the clock reads its time)
    const now = Math.max(this.clock.now(), this.timerAt);
    this.timer = undefined;
    this.timerAt = Infinity;
    let next = Infinity;
    for (const [seg, lot] of this.lots) {
      next = Math.min(next, this.pass(lot, now));
      this.dropIfEmpty(seg, lot);
    }
    if (next < Infinity) this.arm(next);
  }
}
