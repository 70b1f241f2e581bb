/**
 * Calls between workers as the primary relays them: a worker's call goes to one worker or to all, and the answers
 * go back to the caller as one reply (rpc-relay.ts keeps the calls that wait; retired-counters.ts the counters of
 * dead workers that a metrics call's reply includes).
 *
 * Why the primary relays: workers have no channel to each other, only to the primary. A call to a worker that is
 * restarting, or that dies before it answers, is answered here as failed, so the caller never waits for nobody.
 */
import type { ToPrimary } from './messages';
import { METRICS_METHOD, RetiredCounters } from './retired-counters';
import { RpcRelay, type PendingRpc } from './rpc-relay';
import type { WorkerPool } from './worker-pool';

export class WorkerCalls {
  private readonly rpcs = new RpcRelay();
  private readonly retiredCounters = new RetiredCounters();

  constructor(private readonly pool: WorkerPool) {}

  /** a call from one worker to another (or to all), relayed; its answer goes back the same way */
  relay(from: number, m: Extract<ToPrimary, { t: 'rpc' }>): void {
    const slots = this.pool.slots;
    const targets = m.to === 'all' ? slots.filter((s) => s.ready && s.worker) : [slots[m.to]].filter((s) => s?.ready && s.worker);
    const fromW = slots[from]?.worker;
    if (targets.length === 0) {
      if (fromW) this.pool.send(fromW, { t: 'rpc-reply', id: m.id, ok: false, error: { message: `worker ${String(m.to)} is restarting`, errCode: -3 } });
      return;
    }
    const id = this.rpcs.open(
      from,
      m.id,
      m.method,
      m.to === 'all',
      targets.map((t) => t.index),
    );
    for (const t of targets) {
      if (!this.pool.send(t.worker!, { t: 'rpc-in', id, method: m.method, args: m.args })) {
        const done = this.rpcs.answer(id, t.index, { ok: false, error: { message: `worker ${t.index} is restarting`, errCode: -3 } });
        if (done) this.finish(done);
      }
    }
  }

  /** worker `index`'s answer to a relayed call */
  answered(index: number, m: Extract<ToPrimary, { t: 'rpc-out' }>): void {
    if (m.ok && this.rpcs.get(m.id)?.method === METRICS_METHOD) this.retiredCounters.answered(index, m.value);
    const done = this.rpcs.answer(m.id, index, { ok: m.ok, value: m.value, error: m.error });
    if (done) this.finish(done);
  }

  private finish(p: PendingRpc): void {
    const w = this.pool.slots[p.from]?.worker;
    if (!w) return;
    if (p.all) {
      // a call to all answers with every worker's result; failed ones are left out (a restarting worker holds nothing)
      const values = p.results.filter((r) => r.ok).map((r) => r.value);
      this.pool.send(w, { t: 'rpc-reply', id: p.fromId, ok: true, value: p.method === METRICS_METHOD ? this.retiredCounters.withRetired(values) : values });
      return;
    }
    const r = p.results[0];
    this.pool.send(w, { t: 'rpc-reply', id: p.fromId, ok: r.ok, value: r.value, error: r.error as never });
  }

  /** the worker in a slot exited: what it had counted is kept, and calls waiting on it answer now, as failed */
  workerGone(index: number): void {
    this.retiredCounters.exited(index);
    for (const p of this.rpcs.died(index)) this.finish(p);
  }
}
