import type { Logger } from 'pino';
import { NodeClaims } from './node-claims';
import { HandOver } from './hand-over';
import type { HoldingCaps } from './holding-guard';
import type { Slot } from './worker-slot';
import { onWorkerMessage, type PrimaryParts } from './primary-dispatch';
import { RequestDirectory } from './request-directory';
import { RoutedListeners } from './routed-listeners';
import { WorkerCalls } from './worker-calls';
import { WorkerPool } from './worker-pool';

export interface PrimaryOptions {
  workers: number;
  log: Logger;
  /** environment for the workers (the site argument travels in argv) */
  env: NodeJS.ProcessEnv;
  /** node options added to the primary's own for each worker (gc-flags.ts) */
  workerFlags?: string[];
  /**
   * the site's caps on what the primary itself holds (gateway.maxConnectionsPerListener, fdReserve, listenerLimits'
   * maxConnections): connections count from accept until they are handed to a worker. Unset: the defaults (automatic
   * per-listener cap, reserve 256)
   */
  connections?: HoldingCaps;
}

/**
 * The primary of a multi-worker gateway: it runs no plugin. It forks the workers, binds every routed port they ask
 * for (once, whatever the number of workers), reads each connection's first bytes to find the worker that owns its
 * stream and hands the socket over, forwards routed datagrams, relays calls between workers, keeps the directory of
 * request ids (unique across workers; which worker holds which) and, when a worker dies, sends its requests' closed
 * notices through another worker and starts it again.
 *
 * Each of those jobs is a module of its own, and this class composes them: the workers' processes in
 * worker-pool.ts, the routed ports in routed-listeners.ts, the request ids in request-directory.ts, the relayed calls
 * in worker-calls.ts, the switch over the workers' messages in primary-dispatch.ts, the sockets' hand-over in
 * hand-over.ts and the terminals' owners in node-claims.ts.
 */
export class Primary {
  /** the workers' processes: forked, restarted and stopped (worker-pool.ts) */
  private readonly pool: WorkerPool;
  private readonly handOver: HandOver;
  /** which worker owns each terminal: claimed by the worker that serves it, placed when a link or an open asks */
  private readonly claims: NodeClaims;
  /** the routed ports bound for the workers, and the caps on connections the primary holds (routed-listeners.ts) */
  private readonly listeners: RoutedListeners;
  /** request ids across workers: which worker holds which (request-directory.ts) */
  private readonly requests: RequestDirectory;
  /** calls between workers, relayed (worker-calls.ts) */
  private readonly calls: WorkerCalls;
  private readonly parts: PrimaryParts;

  constructor(o: PrimaryOptions) {
    this.pool = new WorkerPool({
      workers: o.workers,
      log: o.log,
      env: o.env,
      workerFlags: o.workerFlags,
      message: (slot, w, m, handle) => onWorkerMessage(this.parts, slot, w, m, handle),
      gone: (slot) => this.gone(slot),
      orphan: (index) => this.requests.orphan(index),
    });
    this.handOver = new HandOver({
      slots: this.pool.slots,
      log: o.log,
      booted: () => this.pool.isBooted(),
      hold: (go) => this.pool.hold(go),
      nextReady: () => this.pool.nextReady(),
      send: (w, m, handle, written) => this.pool.send(w, m, handle, written),
      ownerSlot: (key, place) => this.ownerSlot(key, place),
    });
    // what changes goes to every worker (they route forwarded requests and UDP peers by it)
    this.claims = new NodeClaims(o.workers, Date.now, (changes) => {
      for (const s of this.pool.slots) if (s.ready && s.worker) this.pool.send(s.worker, { t: 'owners', changes });
    });
    this.claims.startSweeping();
    this.listeners = new RoutedListeners({
      pool: this.pool,
      handOver: this.handOver,
      connections: o.connections,
      ownerSlot: (key, place) => this.ownerSlot(key, place),
    });
    this.requests = new RequestDirectory(this.pool);
    this.calls = new WorkerCalls(this.pool);
    this.parts = {
      pool: this.pool,
      listeners: this.listeners,
      requests: this.requests,
      claims: this.claims,
      calls: this.calls,
      handOver: this.handOver,
      ownerSlot: (key, place) => this.ownerSlot(key, place),
    };
  }

  /** resolves when every worker has booted; rejects (and stops the others) when one fails to */
  start(): Promise<void> {
    return this.pool.start();
  }

  /** the worker in a slot exited: what the primary held for it goes, before the pool restarts it or reports a failed boot */
  private gone(slot: Slot): void {
    // its terminals are nobody's now: placed again when they come back
    this.claims.workerGone(slot.index);
    this.calls.workerGone(slot.index);
    this.listeners.workerGone(slot.index);
    this.handOver.rehome(slot);
  }

  /** the worker that owns a key's terminal; `place`: one nobody owns gets a worker now */
  private ownerSlot(key: string, place: boolean): Slot | undefined {
    const w = place ? this.claims.place(key, this.pool.up) : this.claims.ownerOf(key);
    return w === undefined ? undefined : this.pool.slots[w];
  }

  /** stops the workers (each stops its plugins), then the listeners */
  async stop(limitMs: number): Promise<void> {
    this.pool.beginStop();
    this.claims.stop();
    this.listeners.stop();
    await this.pool.stop(limitMs);
  }

  /** the caps on what the primary holds (its descriptor limit and reserve, each routed TCP listener's cap), for the start line */
  describeConnections(): { fdLimit: number | undefined; fdReserve: number; listeners: Record<string, { maxConnections: number | null }> } {
    return this.listeners.describeConnections();
  }

  /** for tests: which worker owns a key's terminal (-1: none) */
  ownerOf(key: string): number {
    return this.claims.ownerOf(key) ?? -1;
  }
}
