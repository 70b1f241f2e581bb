/**
 * Calls one worker makes to another or to all of them, waiting in the primary for their answers (worker-calls.ts
 * relays them).
 *
 * Why each call keeps the set of workers that still owe it an answer, not a count: a call finishes when each
 * worker it went to has answered or died. With a count, a worker that answered and then died before the others
 * answered was counted twice, once for its answer and once for its death. The call then finished early and the
 * other workers' answers were dropped: a /metrics scrape without a live worker's counters (a fall that Prometheus
 * reads as a counter reset), or a status listing without that worker's streams.
 */

export interface RpcResult {
  ok: boolean;
  value?: unknown;
  error?: unknown;
}

export interface PendingRpc {
  /** the calling worker's slot, and its id for the call */
  from: number;
  fromId: number;
  method: string;
  /** a call to every worker: answered with all their results */
  all: boolean;
  /** slots that have neither answered nor died */
  owed: Set<number>;
  results: RpcResult[];
}

export class RpcRelay {
  private readonly pending = new Map<number, PendingRpc>();
  private seq = 0;

  /** A call sent to the workers in `targets` (at least one); returns its relay id. */
  open(from: number, fromId: number, method: string, all: boolean, targets: number[]): number {
    const id = ++this.seq;
    this.pending.set(id, { from, fromId, method, all, owed: new Set(targets), results: [] });
    return id;
  }

  /** the call, while it waits */
  get(id: number): PendingRpc | undefined {
    return this.pending.get(id);
  }

  /**
   * Worker `index`'s answer to call `id` (or the primary's failure to send it the call). Returns the call when that
   * was the last answer it waited for, and then forgets it. An answer from a worker the call does not wait for (it
   * was already counted as dead) is ignored.
   */
  answer(id: number, index: number, r: RpcResult): PendingRpc | undefined {
    const p = this.pending.get(id);
    if (p === undefined || !p.owed.delete(index)) return undefined;
    p.results.push(r);
    if (p.owed.size > 0) return undefined;
    this.pending.delete(id);
    return p;
  }

  /** Worker `index` died: each call still waiting for its answer gets a failure. Returns the calls that completes. */
  died(index: number): PendingRpc[] {
    const done: PendingRpc[] = [];
    for (const [id, p] of this.pending) {
      if (!p.owed.has(index)) continue;
      const complete = this.answer(id, index, { ok: false, error: { message: `worker ${index} died`, errCode: -3 } });
      if (complete) done.push(complete);
    }
    return done;
  }

  /** calls waiting */
  get size(): number {
    return this.pending.size;
  }
}
