/**
 * The soak's terminals: each slot is one simulated terminal (its own SIM, channel 1, TCP), the request that holds
 * its stream (opened with a cb, kept by the keeper) and one HTTP-FLV player on that request's URL. Churn acts on a
 * slot: the player leaves and comes back, or the terminal drops its link and reconnects, within the ingest's
 * disconnect grace (the stream and request must survive, the player keep playing) or past it (the gateway must
 * close the request with closeCause 2, cut the player off, and tell the application; the slot then opens a new one).
 */
import type * as net from 'node:net';
import { FlvPlayCounter } from './flv-play-counter';
import { connectTcp, isLoopback } from './gateway-harness';
import { ApiError, ERR_RETRY, type AppCredentials } from './soak-api';
import { nap, uniform, type SoakCtx } from './soak-context';
import { SynthTerminal, type SynthStream } from './synth-terminals';

/** a terminal socket holding this much unsent data drops frames (the gateway is not reading) */
const MAX_SEND_BACKLOG = 1024 * 1024;
/** a player connected this long to a stream whose terminal has pushed this long should have video within it */
export const STALL_MS = 8000;

interface OpenAnswer {
  reqId: string;
  playUrl: string;
  ready: boolean;
  host: string;
  port: number;
  tcp: boolean;
}

export class SoakPlayer {
  readonly counter: FlvPlayCounter;
  socket: net.Socket | undefined;
  connectedAt = 0;
  lastVideoAt = 0;
  closed = false;
  /** the soak closed it (churn, shutdown): its close is no anomaly */
  leaving = false;

  constructor(
    readonly reqId: string,
    private readonly onVideo: () => void,
    private readonly onCut: (p: SoakPlayer) => void,
  ) {
    this.counter = new FlvPlayCounter((type) => {
      if (type !== 9) return;
      if (this.lastVideoAt === 0) this.onVideo();
      this.lastVideoAt = performance.now();
    });
  }

  async connect(url: URL, signal: AbortSignal): Promise<void> {
    const s = await connectTcp(Number(url.port || 80), signal);
    this.socket = s;
    this.connectedAt = performance.now();
    s.on('data', (chunk: Buffer) => {
      this.counter.push(chunk);
      if (this.counter.error !== undefined) s.destroy();
    });
    s.on('error', () => undefined);
    s.on('close', () => {
      this.closed = true;
      if (!this.leaving) this.onCut(this);
    });
    s.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n`);
  }

  close(): void {
    this.leaving = true;
    this.socket?.destroy();
  }
}

export interface SlotCounters {
  holderOpens: number;
  openRetries: number;
  shortDrops: number;
  longDrops: number;
  playerChurns: number;
  playersCut: number;
}

export class TerminalSlot {
  reqId: string | undefined;
  private url: URL | undefined;
  private pushPort = 0;
  term: SynthTerminal | undefined;
  termSince = 0;
  player: SoakPlayer | undefined;
  busy = false;
  /** a request this slot expects the gateway to end (its terminal is away past the grace), until confirmed */
  pendingGone: string | undefined;
  /** the gateway is expected to cut the player off (long drop) */
  private cutExpected = false;

  constructor(
    readonly index: number,
    readonly sim: string,
    readonly app: AppCredentials,
    private readonly ctx: SoakCtx,
    private readonly stream: SynthStream,
    /** the terminals the pacing timer sends for */
    private readonly live: Set<SynthTerminal>,
    private readonly n: SlotCounters,
  ) {}

  get owner(): string {
    return `h${this.index}`;
  }

  /** steady: not in a churn step, pushing and playing */
  isSteady(now: number): boolean {
    return (
      !this.busy &&
      !!this.term &&
      !this.term.socket.destroyed &&
      !!this.player &&
      !this.player.closed &&
      now - this.termSince > STALL_MS &&
      now - this.player.connectedAt > STALL_MS
    );
  }

  /** a steady slot whose player has had no video for STALL_MS */
  isStalled(now: number): boolean {
    return this.isSteady(now) && now - Math.max(this.player!.lastVideoAt, this.player!.connectedAt) > STALL_MS;
  }

  /** Runs one step of the slot's life with the slot marked busy (churn skips busy slots). */
  async step(what: () => Promise<void>): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      await what();
    } finally {
      this.busy = false;
    }
  }

  /** open the holding request if there is none, connect the terminal and the player if they are not */
  async bringUp(): Promise<void> {
    if (!this.reqId && !(await this.openHolder())) return;
    if (!this.term || this.term.socket.destroyed) await this.connectTerminal();
    if (!this.player || this.player.closed) await this.connectPlayer();
  }

  private async openHolder(): Promise<boolean> {
    const { ctx } = this;
    while (!ctx.stop.aborted) {
      const reqId = ctx.newReqId();
      ctx.ledger.opening(reqId, this.owner, performance.now());
      try {
        const r = await ctx.api.call<OpenAnswer[]>('POST', '/strm/open', this.app, {
          reqId,
          user: { token: 't' },
          typ: 'live',
          simNo: this.sim,
          chanId: 1,
          keepIntv: ctx.keepIntv,
          cb: ctx.cb(this.owner),
        });
        const a = r.data?.[0];
        if (r.errCode === 0 && a) {
          ctx.ledger.opened(reqId, a.ready);
          if (!a.tcp || !isLoopback(a.host)) throw new Error(`open ${this.sim}: push address ${a.host} (tcp ${a.tcp}) is not loopback TCP`);
          const url = new URL(a.playUrl.replace(/^ws/, 'http'));
          if (!isLoopback(url.hostname)) throw new Error(`open ${this.sim}: play URL host ${url.hostname} is not loopback`);
          this.reqId = reqId;
          this.url = url;
          this.pushPort = a.port;
          this.n.holderOpens++;
          return true;
        }
        ctx.ledger.notOpened(reqId);
        // the previous stream of this SIM is still being torn down (at most 5 s): retry
        if (r.errCode === ERR_RETRY) this.n.openRetries++;
        else ctx.anomalies.note('holder open refused', `${this.sim}: ${r.errCode} ${r.message}`);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        await this.forgetLostOpen(reqId, err);
      }
      await nap(ctx, uniform(ctx.rnd, 500, 1500));
    }
    return false;
  }

  /** an open whose answer was lost: close that reqId in case it exists, and account for it */
  private async forgetLostOpen(reqId: string, err: Error): Promise<void> {
    const { ctx } = this;
    ctx.anomalies.note('API call failed', err.message);
    try {
      const r = await ctx.api.call<Array<{ closed: boolean }>>('POST', '/strm/close', this.app, { reqIds: [reqId] });
      if (r.data?.[0]?.closed) ctx.ledger.closedByClient(reqId, performance.now());
      else ctx.ledger.notOpened(reqId);
    } catch {
      // still unreachable: the end-of-run check of the holders' applications finds it if it exists
    }
  }

  private async connectTerminal(): Promise<void> {
    const sock = await connectTcp(this.pushPort, this.ctx.deadline);
    sock.on('error', () => undefined);
    sock.on('data', () => undefined); // the gateway sends nothing down this link; drain whatever it does send
    const term = new SynthTerminal(this.sim, sock, this.stream, MAX_SEND_BACKLOG);
    // a different I frame per terminal, so the sum of their rates follows the capture's average
    const first = this.stream.keyframes[Math.floor(this.ctx.rnd() * this.stream.keyframes.length)];
    term.start(performance.now() + this.ctx.rnd() * 40, first);
    this.term = term;
    this.termSince = performance.now();
    this.live.add(term);
    sock.on('close', () => this.live.delete(term));
  }

  private async connectPlayer(): Promise<void> {
    if (!this.url || !this.reqId) return;
    const reqId = this.reqId;
    const p = new SoakPlayer(
      reqId,
      () => this.ctx.ledger.sawReady(reqId),
      (cut) => this.onPlayerCut(cut),
    );
    this.player = p;
    await p.connect(this.url, this.ctx.deadline);
  }

  private onPlayerCut(p: SoakPlayer): void {
    if (this.cutExpected || this.ctx.stop.aborted || p.reqId !== this.reqId) return;
    this.n.playersCut++;
    const why = p.counter.error ?? 'connection closed';
    this.ctx.anomalies.note('player cut off by the gateway', `${this.sim} ${p.reqId}: ${why} after ${p.counter.videoTags} video tags`);
  }

  /** The player leaves for `awayMs` and plays again (same request). */
  async churnPlayer(awayMs: number): Promise<void> {
    this.n.playerChurns++;
    this.player?.close();
    if (!(await nap(this.ctx, awayMs))) return;
    if (this.reqId) await this.connectPlayer();
  }

  /**
   * The terminal drops its link. Short: it comes back within the grace; the request must live on. Long: it stays
   * away past the grace; the gateway must have ended the request (checked with a keep), then a new one is opened.
   */
  async dropTerminal(long: boolean, awayMs: number): Promise<void> {
    const { ctx } = this;
    const old = this.reqId;
    if (long) {
      this.n.longDrops++;
      this.cutExpected = true;
      this.pendingGone = old;
    } else {
      this.n.shortDrops++;
    }
    const droppedAt = performance.now();
    this.term?.socket.destroy();
    this.term = undefined;
    const waited = await nap(ctx, awayMs);
    if (long && !waited) {
      // the load ended before the grace could: nothing to judge; the shutdown closes the request (or finds it gone)
      this.pendingGone = undefined;
      this.cutExpected = false;
      return;
    }
    if (long && old) {
      try {
        const r = await ctx.api.call<Array<{ keep: boolean }>>('POST', '/strm/keep', this.app, { reqIds: [old] });
        if (r.data?.[0]?.keep === false) {
          ctx.ledger.goneAtGateway(old, droppedAt + ctx.graceMs, 'terminal away past the grace', [2]);
        } else {
          ctx.anomalies.note(
            'request outlived its terminal past the grace',
            `${this.sim} ${old}: keep answered ${JSON.stringify(r.data)} ${((performance.now() - droppedAt) / 1000).toFixed(1)} s after the drop`,
          );
          const c = await ctx.api.call<Array<{ closed: boolean }>>('POST', '/strm/close', this.app, { reqIds: [old] });
          if (c.data?.[0]?.closed) ctx.ledger.closedByClient(old, performance.now());
        }
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        ctx.anomalies.note('API call failed', err.message);
      }
      this.player?.close();
      this.reqId = undefined;
      this.pendingGone = undefined;
      this.cutExpected = false;
    }
    if (ctx.stop.aborted) return;
    await this.bringUp();
  }

  /** The gateway no longer holds this slot's request though nothing here asked for that (found by the keeper). */
  async lostRequest(reqId: string): Promise<void> {
    if (this.reqId !== reqId) return;
    this.ctx.ledger.goneAtGateway(reqId, performance.now(), 'keep answered false', []);
    this.ctx.anomalies.note('holder request ended by the gateway', `${this.sim} ${reqId}`);
    this.cutExpected = true;
    this.player?.close();
    this.reqId = undefined;
    this.cutExpected = false;
    if (!this.ctx.stop.aborted) await this.bringUp();
  }

  /** End of the load: close the request (a client close), the player and the terminal. */
  async shutdown(): Promise<void> {
    const { ctx } = this;
    this.cutExpected = true;
    this.player?.close();
    const id = this.reqId;
    if (id) {
      this.reqId = undefined;
      for (let i = 0; i < 3; i++) {
        try {
          const r = await ctx.api.call<Array<{ closed: boolean }>>('POST', '/strm/close', this.app, { reqIds: [id] });
          if (r.data?.[0]?.closed) ctx.ledger.closedByClient(id, performance.now());
          else ctx.ledger.goneAtGateway(id, performance.now(), 'close answered false at shutdown', []);
          break;
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          ctx.anomalies.note('API call failed', err.message);
        }
      }
    }
    this.term?.socket.destroy();
    this.term = undefined;
  }
}

/**
 * Keeps every slot's request (one call per application and 1000 ids); a request the gateway no longer has, and the
 * slot did not expect to lose, is handed to the slot.
 */
export async function keepHolders(ctx: SoakCtx, slots: TerminalSlot[]): Promise<void> {
  const byApp = new Map<AppCredentials, TerminalSlot[]>();
  for (const s of slots) if (s.reqId && s.pendingGone !== s.reqId) (byApp.get(s.app) ?? byApp.set(s.app, []).get(s.app)!).push(s);
  for (const [app, list] of byApp) {
    for (let i = 0; i < list.length; i += 1000) {
      const part = list.slice(i, i + 1000);
      const ids = part.map((s) => s.reqId!);
      const r = await ctx.api.call<Array<{ reqId: string; keep: boolean }>>('POST', '/strm/keep', app, { reqIds: ids });
      const bySlot = new Map(part.map((s) => [s.reqId!, s]));
      for (const k of r.data ?? []) {
        const s = bySlot.get(k.reqId);
        if (k.keep || !s || s.busy || s.reqId !== k.reqId || s.pendingGone === k.reqId) continue;
        void s.step(() => s.lostRequest(k.reqId)).catch((err: Error) => ctx.anomalies.note('slot step failed', err.message));
      }
    }
  }
}
