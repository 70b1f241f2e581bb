import type { Worker } from 'node:cluster';
import type * as dgram from 'node:dgram';
import type * as net from 'node:net';
import type { Logger } from 'pino';
import type { ConnectionRouter, RouteDecision } from '../../plugin-sdk/cluster';
import type { AddressCaps, CountedConnection } from './address-caps';
import type { ToWorker } from './messages';
import { shardOf } from './shard';
import type { UdpBatches } from './udp-batches';

/** a connection that has not shown its stream within this is handed to any worker, whose own timeouts then apply */
const FIRST_BYTES_MS = 10_000;
/** refusals of the per-address cap are told to a worker at most this often */
const REFUSED_BATCH_MS = 100;
/** addresses named in one batch of refusals; more are counted */
const MAX_REFUSED_ITEMS = 1024;
/** routers get at most this many bytes to decide */
const MAX_HEAD = 4096;

/** one worker's place in the primary: the process in it now, and what is on its way to it */
export interface Slot {
  index: number;
  worker?: Worker;
  ready: boolean;
  restartMs: number;
  startedAt: number;
  /**
   * Connections handed to this worker that it may not have taken yet. Sending detaches the socket's handle and Node
   * closes the primary's copy only when the worker acknowledges it, sending the next handle only after that; a worker
   * that dies in between leaves the one in flight and those queued behind it open here, with nobody reading them
   * (clients hung until their own timeout). Entries Node has closed (taken) are swept at the next hand-over.
   */
  handing: Set<Handing>;
}

/** a routed port the primary bound for the workers */
export interface Listener {
  name: string;
  proto: 'tcp' | 'udp';
  router: ConnectionRouter;
  bound: Promise<number>;
  server?: net.Server;
  udp?: dgram.Socket;
  batches?: UdpBatches<Slot>;
  /** the per-address cap across workers (TCP) */
  caps?: AddressCaps;
  /** connections refused by `caps` not yet told to a worker (which counts and logs them) */
  refused?: { remotes: string[]; more: number };
}

/** libuv's TCP handle under a net.Socket (Node internals: `_handle`, and `fd` -1 once closed) */
interface TcpWrap { fd: number; close(): void }

function wrapOf(sock: net.Socket): TcpWrap | undefined {
  return (sock as unknown as { _handle?: TcpWrap | null })._handle ?? undefined;
}

interface Handing { l: Listener; sock: net.Socket; head: Buffer; key: string | undefined; wrap: TcpWrap; counted: CountedConnection | undefined }

/** what the hand-over needs of the primary */
export interface HandOverHost {
  readonly slots: readonly Slot[];
  readonly log: Logger;
  /** every worker has booted once (connections before that are held) */
  booted(): boolean;
  hold(go: () => void): void;
  nextReady(): Slot | undefined;
  send(w: Worker, m: ToWorker, handle?: net.Socket, undelivered?: (err: Error) => void): boolean;
}

/**
 * The primary's part in a routed TCP connection: it reads the first bytes, finds the worker, hands the socket over,
 * and copes with that worker dying meanwhile; and counts the connection against its address's cap across workers.
 */
export class HandOver {
  constructor(private readonly h: HandOverHost) {}

  /**
   * Reads a connection's first bytes until its router knows the stream, then hands the socket, and the bytes read,
   * to that stream's worker. Reading stops at the socket itself (readStop), so nothing more is read here: what the
   * peer sends next waits in the kernel for the worker.
   */
  route(l: Listener, sock: net.Socket): void {
    // a port is bound while the first worker boots: its connections wait (paused) until every worker can take one
    if (!this.h.booted()) {
      this.h.hold(() => this.route(l, sock));
      return;
    }
    let counted: CountedConnection | undefined;
    if (l.caps) {
      counted = l.caps.admit(sock.remoteAddress ?? '');
      if (!counted) {
        this.refuse(l, sock);
        return;
      }
    }
    let head: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (d: RouteDecision) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.removeListener('data', onData);
      sock.removeListener('error', abandon);
      sock.pause();
      // net.Socket keeps reading into its buffer while paused; stop the handle so every further byte stays in the kernel
      (sock as unknown as { _handle?: { readStop?: () => void } })._handle?.readStop?.();
      let more: Buffer | null;
      while ((more = sock.read() as Buffer | null) !== null) head = Buffer.concat([head, more]);
      this.handOver(l, sock, head, typeof d === 'object' ? d.key : undefined, true, counted);
    };
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const complete = head.length >= MAX_HEAD;
      let d: RouteDecision;
      try { d = l.router(head, complete); } catch { d = 'any'; }
      if (d === 'more' && !complete) return;
      finish(d === 'more' ? 'any' : d);
    };
    // an error or an end before the router decided: the primary still holds the socket, and closes it
    const abandon = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.drop(l, sock, counted);
    };
    // a peer that goes quiet before its router could decide: a last, final guess on what came
    const timer = setTimeout(() => {
      let d: RouteDecision = 'any';
      if (head.length) try { d = l.router(head, true); } catch { /* any */ }
      finish(d === 'more' ? 'any' : d);
    }, FIRST_BYTES_MS);
    sock.on('data', onData);
    sock.on('error', abandon);
    // accepted paused (pauseOnConnect): a 'data' listener alone does not start a paused socket
    sock.resume();
    sock.once('end', abandon);
  }

  /**
   * Gives an accepted connection and its first bytes to the worker of `key` (any worker without one). A connection
   * for any worker whose hand-over failed (that worker just died) is offered once more to the next one; otherwise it
   * is closed, so the client sees a reset and retries rather than hanging.
   */
  private handOver(l: Listener, sock: net.Socket, head: Buffer, key: string | undefined, firstTry: boolean, counted: CountedConnection | undefined): void {
    const slot = key !== undefined ? this.h.slots[shardOf(key, this.h.slots.length)] : this.h.nextReady();
    if (!slot?.ready || !slot.worker) {
      this.h.log.warn({ listener: l.name, key }, 'connection refused: its worker is restarting');
      this.drop(l, sock, counted);
      return;
    }
    for (const x of slot.handing) if (x.wrap.fd < 0) slot.handing.delete(x);
    const wrap = wrapOf(sock);
    if (!wrap) {
      // closed by its peer while it was being routed
      this.drop(l, sock, counted);
      return;
    }
    const h: Handing = { l, sock, head, key, wrap, counted };
    slot.handing.add(h);
    // counted in the worker from now: it reports the close (or dies, and its counts with it)
    if (counted) l.caps?.move(counted, slot.index);
    const sent = this.h.send(slot.worker, { t: 'conn', listener: l.name, head }, sock, (err) => {
      if (!slot.handing.delete(h)) return;
      this.h.log.warn({ listener: l.name, key, worker: slot.index, err: err.message, retried: key === undefined && firstTry && !sock.destroyed },
        'connection not handed over: its worker is gone');
      if (key === undefined && firstTry && !sock.destroyed) this.handOver(l, sock, head, key, false, counted);
      else this.drop(l, sock, counted);
    });
    if (!sent) {
      slot.handing.delete(h);
      this.drop(l, sock, counted);
    }
  }

  /** closes a connection the primary still holds, and stops counting it against its address */
  private drop(l: Listener, sock: net.Socket, counted: CountedConnection | undefined): void {
    sock.destroy();
    if (counted) l.caps?.move(counted, 'gone');
  }

  /**
   * A dead worker's connections still waiting to be handed over: one for any worker goes to another; one for the
   * dead worker's streams is closed (the terminal or player reconnects once the worker is back).
   */
  rehome(slot: Slot): void {
    const stuck = [...slot.handing].filter((h) => h.wrap.fd >= 0);
    slot.handing.clear();
    if (stuck.length) this.h.log.warn({ worker: slot.index, connections: stuck.length }, 'connections waiting for a dead worker: handed to another, or closed');
    for (const h of stuck) {
      // still queued (its handle never left the socket): it can go elsewhere; in flight: only closing is left
      const queued = wrapOf(h.sock) === h.wrap;
      if (queued && h.key === undefined) this.handOver(h.l, h.sock, h.head, undefined, false, h.counted);
      else if (queued) h.sock.destroy();
      else h.wrap.close();
    }
  }

  /**
   * A connection over its address's cap across workers: reset at once (no descriptor held, no TIME_WAIT), and told to
   * a worker in batches, whose connection guard counts it (gw_core_connections_refused_total) and logs it
   * rate-limited, as it does its own refusals.
   */
  private refuse(l: Listener, sock: net.Socket): void {
    const remote = sock.remoteAddress ?? '';
    sock.on('error', () => undefined);
    sock.resetAndDestroy();
    if (!l.refused) {
      const batch = { remotes: [] as string[], more: 0 };
      l.refused = batch;
      setTimeout(() => {
        l.refused = undefined;
        const w = this.h.nextReady()?.worker;
        if (w) this.h.send(w, { t: 'refused', listener: l.name, ...batch });
      }, REFUSED_BATCH_MS).unref();
    }
    // a flood's addresses are itemised up to a bound, the rest counted (as the worker's own log summarises them)
    if (l.refused.remotes.length < MAX_REFUSED_ITEMS) l.refused.remotes.push(remote);
    else l.refused.more++;
  }
}
