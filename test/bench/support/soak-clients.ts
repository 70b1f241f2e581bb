/**
 * The soak's API clients: each is one application (its own credentials, so /strm/status lists exactly its own
 * requests) running a sequential loop: open a few live requests (mostly on SIMs the terminals push, some on SIMs
 * nobody pushes), keep them for a while, ask for their status, close them, think, again. Because one client never has
 * two calls in flight, what it believes is open is exact at every status answer: a request the gateway lists that
 * the client closed (or never opened) is a leaked request; one the client holds that the gateway no longer lists was
 * ended by the gateway, and the client then owes the ledger nothing but expects its final notice.
 */
import { ApiError, ERR_RETRY, type AppCredentials } from './soak-api';
import { nap, uniform, type SoakCtx } from './soak-context';

export interface ClientOptions {
  /** requests opened per cycle: 1..maxOpen */
  maxOpen: number;
  /** how long a cycle holds its requests, s */
  holdMin: number;
  holdMax: number;
  /** pause between cycles, s */
  thinkMin: number;
  thinkMax: number;
  /** share of opens on a SIM no terminal pushes */
  idleShare: number;
}

export interface ClientCounters {
  opens: number;
  openRetries: number;
  openRefused: number;
  keeps: number;
  statuses: number;
  closes: number;
  /** requests the client held that the gateway had ended (keep/close false, missing from status) */
  endedByGateway: number;
  failedCalls: number;
}

/** reqIds the gateway listed that their client had closed or never opened, over the whole run */
export const leakedRequests = new Set<string>();

export class ApiClient {
  private readonly open = new Set<string>();
  /** opens whose answer was lost: the request may or may not exist (the next status or close tells) */
  private readonly uncertain = new Set<string>();

  constructor(
    readonly index: number,
    readonly app: AppCredentials,
    private readonly ctx: SoakCtx,
    private readonly o: ClientOptions,
    private readonly pickSim: (idle: boolean) => string,
    private readonly n: ClientCounters,
  ) {}

  get owner(): string {
    return `c${this.index}`;
  }

  get openCount(): number {
    return this.open.size;
  }

  async run(): Promise<void> {
    const { ctx, o } = this;
    // spread the clients' first calls over a few seconds
    if (!(await nap(ctx, uniform(ctx.rnd, 0, 5000)))) return;
    while (!ctx.stop.aborted) {
      const k = 1 + Math.floor(ctx.rnd() * o.maxOpen);
      for (let i = 0; i < k && !ctx.stop.aborted; i++) await this.guard(() => this.openOne(this.pickSim(ctx.rnd() < o.idleShare)));
      const holdEnd = performance.now() + uniform(ctx.rnd, o.holdMin, o.holdMax) * 1000;
      // keeps at a third of keepIntv, so two may be lost before the gateway's hold (keepIntv * 1.25) runs out
      const keepEvery = (ctx.keepIntv * 1000) / 3;
      let statusDone = false;
      while (!ctx.stop.aborted && performance.now() < holdEnd) {
        if (!(await nap(ctx, Math.min(keepEvery * uniform(ctx.rnd, 0.8, 1), holdEnd - performance.now())))) break;
        if (performance.now() < holdEnd - 1000) await this.guard(() => this.keepAll());
        if (!statusDone && ctx.rnd() < 0.5) {
          await this.guard(() => this.checkStatus());
          statusDone = true;
        }
      }
      await this.guard(() => this.checkStatus());
      await this.guard(() => this.closeAll());
      await nap(ctx, uniform(ctx.rnd, o.thinkMin, o.thinkMax) * 1000);
    }
  }

  /** End of the load: close whatever is still open (a few tries), then one last status must list nothing. */
  async shutdown(): Promise<void> {
    for (let i = 0; i < 3 && this.open.size > 0; i++) await this.guard(() => this.closeAll());
    await this.guard(() => this.checkStatus());
  }

  /** a failed call (transport) is noted and the loop goes on; anything else is a bug here and ends the run */
  private async guard(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      this.n.failedCalls++;
      this.ctx.anomalies.note('API call failed', err.message);
    }
  }

  private async openOne(sim: string): Promise<void> {
    const { ctx } = this;
    const reqId = ctx.newReqId();
    ctx.ledger.opening(reqId, this.owner, performance.now());
    let r;
    try {
      r = await ctx.api.call<Array<{ ready: boolean }>>('POST', '/strm/open', this.app, {
        reqId,
        user: { token: 't' },
        typ: 'live',
        simNo: sim,
        chanId: 1,
        keepIntv: ctx.keepIntv,
        cb: ctx.cb(this.owner),
      });
    } catch (err) {
      // the answer was lost: the request may exist; hold it, the next close settles it (closed true or false)
      this.open.add(reqId);
      this.uncertain.add(reqId);
      throw err;
    }
    const a = r.data?.[0];
    if (r.errCode === 0 && a) {
      ctx.ledger.opened(reqId, a.ready);
      this.open.add(reqId);
      this.n.opens++;
      return;
    }
    ctx.ledger.notOpened(reqId);
    if (r.errCode === ERR_RETRY) this.n.openRetries++;
    else {
      this.n.openRefused++;
      ctx.anomalies.note('open refused', `${sim}: ${r.errCode} ${r.message}`);
    }
  }

  private gone(reqId: string, why: string): void {
    this.open.delete(reqId);
    // an open whose answer was lost and that the gateway does not know: it never existed, no notice is owed
    if (this.uncertain.delete(reqId)) {
      this.ctx.ledger.notOpened(reqId);
      return;
    }
    this.n.endedByGateway++;
    // 2: the SIM's terminal stayed away past the grace; 6: nobody pushed the SIM within the open timeout
    this.ctx.ledger.goneAtGateway(reqId, performance.now(), why, [2, 6]);
  }

  private async keepAll(): Promise<void> {
    if (this.open.size === 0) return;
    const r = await this.ctx.api.call<Array<{ reqId: string; keep: boolean }>>('POST', '/strm/keep', this.app, { reqIds: [...this.open] });
    this.n.keeps++;
    for (const k of r.data ?? []) if (!k.keep && this.open.has(k.reqId)) this.gone(k.reqId, 'keep answered false');
  }

  private async closeAll(): Promise<void> {
    if (this.open.size === 0) return;
    const r = await this.ctx.api.call<Array<{ reqId: string; closed: boolean }>>('POST', '/strm/close', this.app, { reqIds: [...this.open] });
    this.n.closes++;
    for (const c of r.data ?? []) {
      if (!this.open.has(c.reqId)) continue;
      if (c.closed) {
        this.open.delete(c.reqId);
        this.uncertain.delete(c.reqId);
        this.ctx.ledger.closedByClient(c.reqId, performance.now());
      } else {
        this.gone(c.reqId, 'close answered false');
      }
    }
  }

  private async checkStatus(): Promise<void> {
    const r = await this.ctx.api.call<Array<{ reqId: string; ready: boolean }>>('GET', '/strm/status', this.app);
    this.n.statuses++;
    const listed = new Set<string>();
    for (const s of r.data ?? []) {
      listed.add(s.reqId);
      if (!this.open.has(s.reqId)) {
        if (!leakedRequests.has(s.reqId)) this.ctx.anomalies.note('leaked request (listed after its client closed it)', `${this.owner} ${s.reqId}`);
        leakedRequests.add(s.reqId);
      } else {
        this.uncertain.delete(s.reqId);
        if (s.ready) this.ctx.ledger.sawReady(s.reqId);
      }
    }
    for (const id of [...this.open]) if (!listed.has(id)) this.gone(id, 'no longer listed by status');
  }
}
