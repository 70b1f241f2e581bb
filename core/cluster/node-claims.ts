import { shardOf } from './shard';

/** a place given to a terminal's link or an open before any stream of its SIM holds it: kept this long */
export const PENDING_MS = 30_000;
/**
 * Places at most given and not yet taken up: past this (a sender spraying datagrams of made-up SIMs) a SIM nobody
 * holds goes to the worker its SIM hashes to, and nothing is kept for it.
 */
export const MAX_PENDING = 10_000;

/**
 * Which worker of this node owns each terminal (by SIM: every channel of a terminal is in one worker, so a link that
 * carries several finds them all), as the primary keeps it. Ownership is claimed, not computed: a worker holds a SIM
 * while it serves a stream of it (it says so as streams open and close), and a SIM nobody holds is placed on the
 * worker with the fewest terminals (ties: the worker its SIM hashes to, so a quiet node places as it always did) the
 * first time an open or a link asks for it; that place lasts PENDING_MS unless a stream takes it up. A dead worker's
 * SIMs are forgotten at once. Nothing here outlives what the workers can tell again: it is rebuilt from their holds.
 */
export class NodeClaims {
  /** SIM -> its place */
  private readonly bySim = new Map<string, { worker: number; streams: number; pendingUntil: number }>();
  /** SIMs per worker (held or pending), for the fewest rule */
  private readonly load: number[];
  /** changes not yet told to the workers: SIM -> worker, -1 for none */
  private changes = new Map<string, number>();

  private flushQueued = false;
  private sweeper: NodeJS.Timeout | undefined;

  /**
   * `told`: where the changes go, batched once per turn of the event loop (the primary tells every worker); without
   * one they wait for takeChanges()
   */
  constructor(
    private readonly workers: number,
    private readonly now: () => number = Date.now,
    private readonly told?: (changes: Array<[string, number]>) => void,
  ) {
    this.load = new Array<number>(workers).fill(0);
  }

  /** places no stream took up are swept every `everyMs` (their lapse told like any change) until stop() */
  startSweeping(everyMs = 5000): void {
    this.sweeper = setInterval(() => this.sweep(), everyMs);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /** the worker that owns the SIM of a routing key (`{sim}_{chan}`, or a SIM), if any */
  ownerOf(key: string): number | undefined {
    const e = this.bySim.get(simOf(key));
    if (!e) return undefined;
    if (e.streams === 0 && e.pendingUntil <= this.now()) {
      this.drop(simOf(key), e.worker);
      return undefined;
    }
    return e.worker;
  }

  /**
   * The worker for a SIM: its owner, or a place for it now on a worker that can take it (`up(i)`: running). Undefined
   * when no worker is up.
   */
  place(key: string, up: (worker: number) => boolean): number | undefined {
    const sim = simOf(key);
    const owner = this.ownerOf(sim);
    if (owner !== undefined && up(owner)) return owner;
    let best: number | undefined;
    const preferred = shardOf(sim, this.workers);
    for (let i = 0; i < this.workers; i++) {
      if (!up(i)) continue;
      if (best === undefined || this.load[i] < this.load[best] || (this.load[i] === this.load[best] && i === preferred)) best = i;
    }
    if (best === undefined) return undefined;
    if (owner !== undefined) this.drop(sim, owner);
    if (this.pending >= MAX_PENDING) return up(preferred) ? preferred : best;
    this.set(sim, { worker: best, streams: 0, pendingUntil: this.now() + PENDING_MS });
    return best;
  }

  /** worker `w` opened (+1) or closed (-1) a stream of the SIM */
  held(w: number, key: string, delta: 1 | -1): void {
    const sim = simOf(key);
    const e = this.bySim.get(sim);
    if (delta > 0) {
      if (e && e.worker === w) {
        if (e.streams++ === 0) this.pendingCount--;
      } else {
        // a stream where no place was given (or another was): the worker that serves it owns it
        if (e) this.drop(sim, e.worker);
        this.set(sim, { worker: w, streams: 1, pendingUntil: 0 });
      }
      return;
    }
    if (!e || e.worker !== w || e.streams === 0) return;
    if (--e.streams === 0) {
      // (counted as pending for a moment, so drop's bookkeeping holds)
      this.pendingCount++;
      this.drop(sim, w);
    }
  }

  /** a worker died: its SIMs are nobody's now */
  workerGone(w: number): void {
    for (const [sim, e] of [...this.bySim]) if (e.worker === w) this.drop(sim, w);
  }

  /** places given that no stream took up in time go (their workers' load with them) */
  sweep(): void {
    const now = this.now();
    for (const [sim, e] of [...this.bySim]) if (e.streams === 0 && e.pendingUntil <= now) this.drop(sim, e.worker);
  }

  /** every SIM and its worker, for a worker that starts (it learns the rest as changes) */
  snapshot(): Array<[string, number]> {
    return [...this.bySim].map(([sim, e]) => [sim, e.worker]);
  }

  /** the changes since the last call, to tell every worker */
  takeChanges(): Array<[string, number]> {
    if (this.changes.size === 0) return [];
    const out = [...this.changes];
    this.changes = new Map();
    return out;
  }

  get size(): number {
    return this.bySim.size;
  }

  loadOf(w: number): number {
    return this.load[w] ?? 0;
  }

  /** places given and not taken up by a stream */
  get pending(): number {
    return this.pendingCount;
  }

  private pendingCount = 0;

  private set(sim: string, e: { worker: number; streams: number; pendingUntil: number }): void {
    this.bySim.set(sim, e);
    this.load[e.worker]++;
    if (e.streams === 0) this.pendingCount++;
    this.changed(sim, e.worker);
  }

  private changed(sim: string, w: number): void {
    this.changes.set(sim, w);
    if (!this.told || this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      const changes = this.takeChanges();
      if (changes.length) this.told!(changes);
    });
  }

  private drop(sim: string, w: number): void {
    const e = this.bySim.get(sim);
    if (e?.worker !== w) return;
    this.bySim.delete(sim);
    this.load[w]--;
    if (e.streams === 0) this.pendingCount--;
    this.changed(sim, -1);
  }
}

/** the SIM of a routing key `{sim}_{chan}` (a SIM holds no '_'), or the key itself */
export function simOf(key: string): string {
  const i = key.indexOf('_');
  return i > 0 ? key.slice(0, i) : key;
}
