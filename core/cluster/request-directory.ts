/**
 * The primary's directory of request ids: which worker holds each open request, and how many each application has
 * open across workers.
 *
 * Why in the primary: a request id is unique across workers and an application's cap counts its requests in all
 * of them, so only the process that sees every worker can answer a reservation. The directory also keeps each
 * request's closed notice, because a worker that dies cannot send its own: a live worker sends them for it.
 */
import type { Notice } from '../../plugin-sdk/notices';
import { CloseCause, closeReasonOf } from '../../plugin-sdk/sessions';
import type { ToPrimary } from './messages';
import type { WorkerPool } from './worker-pool';

/** a reservation's answer: taken, already this application's, another application's, or over its cap */
export type ReserveResult = 'ok' | 'self' | 'other' | 'cap';

export class RequestDirectory {
  /** reqId -> the worker that holds it, its application, and its closed notice should that worker die */
  private readonly directory = new Map<string, { worker: number; appId: string; notice: Notice }>();
  /** open requests per application across workers, for its cap */
  private readonly perApp = new Map<string, number>();

  constructor(private readonly pool: WorkerPool) {}

  /** worker `index` asks to hold a request id */
  reserve(index: number, m: Extract<ToPrimary, { t: 'reserve' }>): ReserveResult {
    const e = this.directory.get(m.reqId);
    if (e) return e.appId === m.appId ? 'self' : 'other';
    const held = this.perApp.get(m.appId) ?? 0;
    if (held >= m.limit) return 'cap';
    this.directory.set(m.reqId, { worker: index, appId: m.appId, notice: m.notice });
    this.perApp.set(m.appId, held + 1);
    return 'ok';
  }

  /** worker `index` closed a request (one it does not hold stays) */
  release(index: number, reqId: string): void {
    const e = this.directory.get(reqId);
    if (e && e.worker === index) this.forget(reqId, e.appId);
  }

  /** the worker that holds each request id (-1: none) */
  owners(reqIds: string[]): number[] {
    return reqIds.map((id) => this.directory.get(id)?.worker ?? -1);
  }

  /** the requests a dead worker held get their closed notices (internalError) from a live worker */
  orphan(index: number): void {
    const notices: Notice[] = [];
    for (const [reqId, e] of this.directory) {
      if (e.worker !== index) continue;
      this.forget(reqId, e.appId);
      notices.push({
        ...e.notice,
        payload: { ...e.notice.payload, act: 'closed', closeCause: CloseCause.internalError, closeReason: closeReasonOf[CloseCause.internalError] },
        last: true,
      });
    }
    if (notices.length === 0) return;
    const deliver = (attempt: number) => {
      const live = this.pool.slots.find((s) => s.ready && s.worker);
      if (!live) {
        // the only worker was the one that died: its replacement sends them once it is up
        if (attempt < 120) setTimeout(() => deliver(attempt + 1), 500).unref();
        else this.pool.log.error({ requests: notices.length }, 'closed notices of a dead worker could not be sent: no worker came up');
        return;
      }
      this.pool.send(live.worker!, { t: 'rpc-in', id: 0, method: 'emit-notices', args: notices });
      this.pool.log.warn({ worker: index, requests: notices.length, via: live.index }, 'closed notices sent for the requests of a dead worker');
    };
    deliver(0);
  }

  private forget(reqId: string, appId: string): void {
    this.directory.delete(reqId);
    const left = (this.perApp.get(appId) ?? 1) - 1;
    if (left > 0) this.perApp.set(appId, left);
    else this.perApp.delete(appId);
  }
}
