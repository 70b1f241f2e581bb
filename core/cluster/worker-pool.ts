/**
 * The primary's workers as processes: it forks them, waits for them to boot, starts each again when it dies, and
 * stops them (primary.ts composes it with the rest of the primary).
 *
 * Why one place: the slots, the boot promise and the stopping flag decide together whether a worker that exits is
 * a boot failure, a death to restart, or part of a stop. What the rest of the primary held for the dead worker is
 * cleared by the host's `gone` before that decision, and its requests are closed by `orphan` only when it is restarted.
 */
import cluster, { type Worker } from 'node:cluster';
import type * as net from 'node:net';
import type { Logger } from 'pino';
import type { ToPrimary, ToWorker } from './messages';
import { idleSlot, type Slot } from './worker-slot';

/** a worker that dies is started again after this, doubling while it keeps dying within a minute, up to 30 s */
const RESTART_MIN_MS = 500;
const RESTART_MAX_MS = 30_000;

export interface WorkerPoolHost {
  workers: number;
  log: Logger;
  /** environment for the workers (the site argument travels in argv) */
  env: NodeJS.ProcessEnv;
  /** node options added to the primary's own for each worker (gc-flags.ts) */
  workerFlags?: string[];
  /** a message from the worker in a slot */
  message(slot: Slot, w: Worker, m: ToPrimary, handle: unknown): void;
  /** the worker in a slot exited (its slot already empty): what the primary held for it goes */
  gone(slot: Slot): void;
  /** a worker died after boot: its requests get their closed notices (before it is started again) */
  orphan(index: number): void;
}

export class WorkerPool {
  readonly slots: Slot[] = [];
  private rr = 0;
  /** connections accepted before every worker had booted */
  private held: Array<() => void> = [];
  private stopping = false;
  private booted = false;
  private bootResolve!: () => void;
  private bootReject!: (err: Error) => void;
  readonly log: Logger;

  constructor(private readonly o: WorkerPoolHost) {
    this.log = o.log;
  }

  /** resolves when every worker has booted; rejects (and stops the others) when one fails to */
  start(): Promise<void> {
    const extra = (this.o.workerFlags ?? []).filter((f) => !process.execArgv.includes(f));
    cluster.setupPrimary({ serialization: 'advanced', execArgv: [...process.execArgv, ...extra] });
    const booted = new Promise<void>((resolve, reject) => {
      this.bootResolve = resolve;
      this.bootReject = reject;
    });
    for (let i = 0; i < this.o.workers; i++) this.slots.push(idleSlot(i, RESTART_MIN_MS));
    // the first worker boots alone: a bad site fails once, with one message, and first-run work (stores, schemas)
    // is done before the others start
    this.fork(this.slots[0]);
    return booted;
  }

  /** whether every worker has booted (connections accepted before wait in `hold`) */
  isBooted(): boolean {
    return this.booted;
  }

  /** a connection accepted before every worker had booted: let go once they have */
  hold(go: () => void): void {
    this.held.push(go);
  }

  private fork(slot: Slot): void {
    slot.ready = false;
    slot.startedAt = Date.now();
    const w = cluster.fork({ ...this.o.env, JTGW_WORKER_INDEX: String(slot.index), JTGW_WORKER_COUNT: String(this.o.workers) });
    slot.worker = w;
    w.on('message', (m: ToPrimary, handle: unknown) => this.o.message(slot, w, m, handle));
    // a write to a worker that has just died fails with EPIPE before its exit is seen; without a listener Node throws
    // that from the worker's 'error' event and the primary, with every other worker, would go too. The exit handles it.
    w.on('error', (err: Error) => this.log.warn({ worker: slot.index, err: err.message }, 'channel to a worker failed: it is going, its exit restarts it'));
    w.on('exit', (code, signal) => this.onExit(slot, w, code, signal));
  }

  /** the worker in a slot said it is ready: the first one's readiness starts the others, the last one's ends boot */
  readied(slot: Slot): void {
    if (!this.booted && slot.index === 0) for (const s of this.slots) if (!s.worker) this.fork(s);
    if (!this.booted && this.slots.every((s) => s.ready)) {
      this.booted = true;
      this.bootResolve();
      const held = this.held;
      this.held = [];
      for (const go of held) go();
    }
  }

  private onExit(slot: Slot, w: Worker, code: number | null, signal: string | null): void {
    if (slot.worker !== w) return;
    const wasReady = slot.ready;
    slot.ready = false;
    slot.worker = undefined;
    this.o.gone(slot);
    if (this.stopping) return;
    if (!this.booted) {
      // a boot failure is the site's fault (it printed why): every worker would fail the same way
      this.bootReject(new Error(`worker ${slot.index} exited during boot (code ${code ?? signal})`));
      return;
    }
    this.log.error({ worker: slot.index, code, signal, wasReady }, 'worker died: its streams are lost; closing its requests and starting it again');
    this.o.orphan(slot.index);
    const quick = Date.now() - slot.startedAt < 60_000;
    const delay = quick ? slot.restartMs : RESTART_MIN_MS;
    slot.restartMs = quick ? Math.min(slot.restartMs * 2, RESTART_MAX_MS) : RESTART_MIN_MS;
    setTimeout(() => {
      if (!this.stopping) this.fork(slot);
    }, delay).unref();
  }

  /**
   * `written`: a handle's message was written (null), or could not be (the worker died a moment ago and its exit is
   * not seen yet; Node then keeps the socket open here, where nothing reads it)
   */
  send(w: Worker, m: ToWorker, handle?: net.Socket, written?: (err: Error | null) => void): boolean {
    if (!w.isConnected()) return false;
    try {
      // with a callback a failed write is reported to it, not thrown from the worker's 'error' event
      if (handle) w.send(m, handle, { keepOpen: false } as never, (err: Error | null) => written?.(err));
      else w.send(m, (err: Error | null) => written?.(err));
      return true;
    } catch (err) {
      this.log.warn({ err: (err as Error).message, t: m.t }, 'message to a worker failed');
      return false;
    }
  }

  up = (i: number): boolean => !!this.slots[i]?.ready && !!this.slots[i].worker;

  /** a ready worker, the next in turn */
  nextReady(): Slot | undefined {
    for (let i = 0; i < this.slots.length; i++) {
      const s = this.slots[this.rr++ % this.slots.length];
      if (s.ready && s.worker) return s;
    }
    return undefined;
  }

  /** from now on a worker that exits is not started again, and held connections are dropped */
  beginStop(): void {
    this.stopping = true;
    this.held = [];
  }

  /** asks each worker to stop (each stops its plugins) and waits for them; kills those still there after `limitMs` */
  async stop(limitMs: number): Promise<void> {
    const exits = this.slots.map(
      (s) =>
        new Promise<void>((resolve) => {
          const w = s.worker;
          if (!w || w.isDead()) {
            resolve();
            return;
          }
          w.once('exit', () => resolve());
          if (!this.send(w, { t: 'stop' })) w.kill('SIGTERM');
        }),
    );
    const timer = setTimeout(() => {
      for (const s of this.slots) s.worker?.process.kill('SIGKILL');
    }, limitMs);
    await Promise.all(exits);
    clearTimeout(timer);
  }
}
