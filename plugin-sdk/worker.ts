/**
 * CPU-bound work off the main event loop: a worker thread that serves requests, under a supervisor.
 *
 * Main thread:  const w = new StageWorker<Req, Res>(require.resolve('./my-worker'), { name: 'aac', log });
 *               const res = await w.call(req, [req.pcm.buffer]);   // transfer lists avoid copies
 * Worker file:  serveWorker<Req, Res>(async (req) => res);
 *
 * One worker can host many jobs (e.g. one encoder per stream, keyed in the request). Calls made in one pass of the
 * event loop (until its check phase: every socket read of the pass) travel as one message each way: at hundreds of
 * streams, a message per call would cost the main thread more than the work it moves away. If the worker dies (a crash, process.exit, an uncaught error), every call in
 * flight rejects and the supervisor starts a new one, backing off when it keeps dying; `close()` stops it for good.
 */
import { isMainThread, parentPort, Worker, type TransferListItem } from 'node:worker_threads';
import type { Logger } from 'pino';

interface Pending<Res> {
  resolve(r: Res): void;
  reject(e: Error): void;
  at: number;
}

type Reply<Res> = { id: number; ok: true; res: Res } | { id: number; ok: false; error: string };

/** What crosses to the worker: the calls of one turn, in order. */
interface Batch<Req> {
  calls: Array<{ id: number; req: Req }>;
}

export interface StageWorkerOptions {
  /** names the worker in logs and errors */
  name: string;
  log: Logger;
  /** passed to the worker as workerData */
  workerData?: unknown;
  /** restarts allowed within a minute before the worker is given up (calls then reject at once; default 5) */
  maxRestartsPerMinute?: number;
  /**
   * a call unanswered this long, with no other answer meanwhile, means the worker hangs: it is terminated and
   * restarted (default 10 s). A worker that is behind but answering is left to catch up.
   */
  hangMs?: number;
}

export class StageWorker<Req, Res> {
  private worker: Worker | undefined;
  private pending = new Map<number, Pending<Res>>();
  private seq = 0;
  private closing = false;
  private restarts: number[] = [];
  private gaveUp: string | undefined;
  private outbox: Array<{ id: number; req: Req }> = [];
  private outTransfer: TransferListItem[] = [];
  private flushQueued = false;
  /** messages posted (one per turn with calls) */
  batches = 0;
  /** times the worker died and was started again */
  deaths = 0;
  /** when the worker last sent replies (Date.now()) */
  private lastReplyAt = 0;

  private readonly watchdog: NodeJS.Timeout;

  constructor(
    private readonly file: string,
    private readonly opts: StageWorkerOptions,
  ) {
    this.spawn();
    const hangMs = opts.hangMs ?? 10_000;
    // one timer for all calls: a timer per call would cost more than many of the calls
    this.watchdog = setInterval(
      () => {
        const w = this.worker;
        if (!w) return;
        const now = Date.now();
        for (const p of this.pending.values()) {
          // Hung means no progress: the oldest call waited hangMs and nothing at all came back meanwhile. A worker
          // that is only behind (a saturated core, a burst of opens) keeps answering batches; killing it would fail
          // every call in flight and lose work it was about to finish.
          if (now - p.at > hangMs && now - this.lastReplyAt > hangMs) {
            this.died(w, `no answer for ${hangMs} ms`);
            void w.terminate();
          }
          break; // the oldest call comes first in the map
        }
      },
      Math.max(50, Math.min(1000, hangMs / 4)),
    );
    this.watchdog.unref();
  }

  /** calls waiting for an answer */
  get inFlight(): number {
    return this.pending.size;
  }

  /**
   * Queues a call; this turn's calls cross in one message. A Buffer or typed array in `req` is cloned with its whole
   * ArrayBuffer, not just the view: a unit's payload is a view into a slab or a socket read, so pass a compact copy
   * (`new Uint8Array(payload)`), or a 160-byte frame costs a 32 KiB copy.
   */
  call(req: Req, transfer?: readonly TransferListItem[]): Promise<Res> {
    if (this.closing) return Promise.reject(new Error(`worker ${this.opts.name} is closed`));
    if (this.gaveUp) return Promise.reject(new Error(`worker ${this.opts.name} gave up: ${this.gaveUp}`));
    if (!this.worker) this.spawn();
    const id = ++this.seq;
    return new Promise<Res>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, at: Date.now() });
      this.outbox.push({ id, req });
      if (transfer) for (const t of transfer) this.outTransfer.push(t);
      if (!this.flushQueued) {
        this.flushQueued = true;
        // not nextTick: each socket read is a callback of its own, and its calls would each cross alone
        setImmediate(this.flush);
      }
    });
  }

  /**
   * Posts the calls queued so far now instead of at the end of the turn: for a caller that gathers a turn's work
   * itself (in its own check-phase callback) and would otherwise wait a whole extra pass of the loop.
   */
  send(): void {
    this.flush();
  }

  private readonly flush = (): void => {
    this.flushQueued = false;
    const calls = this.outbox;
    const transfer = this.outTransfer;
    this.outbox = [];
    this.outTransfer = [];
    const w = this.worker;
    if (calls.length === 0 || !w) return;
    try {
      w.postMessage({ calls } satisfies Batch<Req>, transfer);
      this.batches++;
    } catch (err) {
      // (a value that cannot be cloned): fail this turn's calls, not the worker
      for (const c of calls) {
        const p = this.pending.get(c.id);
        this.pending.delete(c.id);
        p?.reject(err as Error);
      }
    }
  };

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.watchdog);
    const w = this.worker;
    this.worker = undefined;
    this.failAll(new Error(`worker ${this.opts.name} is closed`));
    if (w) await w.terminate();
  }

  private spawn(): Worker {
    const w = new Worker(this.file, { workerData: this.opts.workerData });
    this.worker = w;
    // a worker must never keep the process alive on its own: the plugin closes it at stop
    w.unref();
    w.on('message', (m: { replies: Array<Reply<Res>> }) => {
      this.lastReplyAt = Date.now();
      for (const r of m.replies) {
        const p = this.pending.get(r.id);
        if (!p) continue;
        this.pending.delete(r.id);
        if (r.ok) p.resolve(r.res);
        else p.reject(new Error(r.error));
      }
    });
    w.on('error', (err) => this.died(w, `error: ${err.message}`));
    w.on('exit', (code) => this.died(w, `exit code ${code}`));
    return w;
  }

  private died(w: Worker, why: string): void {
    if (this.worker !== w) return;
    this.worker = undefined;
    this.failAll(new Error(`worker ${this.opts.name} died (${why})`));
    if (this.closing) return;
    this.deaths++;
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < 60_000);
    if (this.restarts.length >= (this.opts.maxRestartsPerMinute ?? 5)) {
      this.gaveUp = `died ${this.restarts.length + 1} times within a minute, last: ${why}`;
      this.opts.log.error({ worker: this.opts.name, why }, 'worker keeps dying: not restarting it');
      return;
    }
    this.restarts.push(now);
    this.opts.log.warn({ worker: this.opts.name, why }, 'worker died: starting a new one');
    this.spawn();
  }

  private failAll(err: Error): void {
    const list = [...this.pending.values()];
    this.pending.clear();
    this.outbox = [];
    this.outTransfer = [];
    for (const p of list) p.reject(err);
  }
}

/**
 * The worker side: answers each request with what `handle` returns (or its error message). Call it once at the
 * top of the worker file. `transfer` picks what of a result to move instead of copy. A turn's calls arrive
 * together; their answers go back together once all of them are settled, in the order they came.
 */
export function serveWorker<Req, Res>(handle: (req: Req) => Res | Promise<Res>, transfer?: (res: Res) => TransferListItem[]): void {
  if (isMainThread || !parentPort) throw new Error('serveWorker runs in a worker thread');
  const port = parentPort;
  const one = async ({ id, req }: { id: number; req: Req }, moved: TransferListItem[]): Promise<Reply<Res>> => {
    try {
      const res = await handle(req);
      if (transfer) for (const t of transfer(res)) if (!moved.includes(t)) moved.push(t);
      return { id, ok: true, res };
    } catch (err) {
      return { id, ok: false, error: (err as Error | undefined)?.message ?? String(err) };
    }
  };
  const batch = async ({ calls }: Batch<Req>): Promise<void> => {
    const moved: TransferListItem[] = [];
    const replies: Array<Reply<Res>> = [];
    for (const c of calls) replies.push(await one(c, moved));
    port.postMessage({ replies }, moved);
  };
  // Strictly in order, across messages too: a job's calls (an open that awaits, then its frames) must run in the
  // order they were made, and the next message may arrive while this one awaits.
  let chain = Promise.resolve();
  port.on('message', (m: Batch<Req>) => {
    chain = chain.then(() => batch(m));
  });
}
