import type { Worker } from 'node:cluster';
import type * as dgram from 'node:dgram';
import * as net from 'node:net';
import type { Logger } from 'pino';
import type { ConnectionRouter, RouteDecision } from '../../plugin-sdk/cluster';
import { ConnectionGuard, type ListenerGate, type RefusalReason } from '../connection-guard';
import type { FdProbe } from '../fd-probe';
import type { ListenerLimits } from '../gateway-config';
import type { AddressCaps, CountedConnection } from './address-caps';
import type { ToWorker } from './messages';
import type { UdpBatches } from './udp-batches';

/** a connection that has not shown its stream within this is handed to any worker, whose own timeouts then apply */
const FIRST_BYTES_MS = 10_000;
/** refusals are told to a worker at most this often */
const REFUSED_BATCH_MS = 100;
/** addresses named in one batch of refusals; more are counted */
const MAX_REFUSED_ITEMS = 1024;
/** routers get at most this many bytes to decide */
const MAX_HEAD = 4096;
/**
 * handles given to Node for one worker and not yet written. Node writes a worker's next handle only once the worker
 * acknowledged the last, and queues every message behind it meanwhile (calls, datagrams): the rest wait here, where
 * the connections that showed their stream go first.
 */
const MAX_UNWRITTEN = 2;

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
   * (clients hung until their own timeout). An entry is removed once the next one is written (Node writes a
   * handle only when the one before was acknowledged and closed here), or when Node could not write it.
   */
  handing: Set<Handing>;
  /**
   * Connections for this worker not yet given to Node (at most MAX_UNWRITTEN are): `soon` those whose first bytes
   * were read, `late` those given up on after FIRST_BYTES_MS (a flood of silent connections, handed over all at
   * once 10 s after it came, must not hold up an API request behind it, nor the calls and datagrams behind that)
   */
  waiting: { soon: Handing[]; late: Handing[] };
  /** handles given to Node for this worker and not yet written */
  unwritten: number;
  /** the last handle written to this worker (still in `handing` until its acknowledgement) */
  lastWritten?: Handing;
}

/** a new slot's hand-over state */
export function idleSlot(index: number, restartMs: number): Slot {
  return { index, ready: false, restartMs, startedAt: 0, handing: new Set(), waiting: { soon: [], late: [] }, unwritten: 0 };
}

/** a routed port the primary bound for the workers */
export interface Listener {
  name: string;
  /** a connection whose terminal no worker owns is placed, and its worker claims it (a plugin's router: terminals) */
  places: boolean;
  proto: 'tcp' | 'udp';
  router: ConnectionRouter;
  bound: Promise<number>;
  server?: net.Server;
  udp?: dgram.Socket;
  batches?: UdpBatches<Slot>;
  /** the per-address cap across workers (TCP) */
  caps?: AddressCaps;
  /**
   * the primary's own per-listener cap and descriptor reserve (TCP; the primary's ConnectionGuard): connections it
   * holds, from accept until they are handed over, count against them
   */
  gate?: ListenerGate;
  /** connections refused here not yet told to a worker (which counts and logs them), by reason */
  refused?: Map<RefusalReason, { remotes: string[]; more: number }>;
}

/** libuv's TCP handle under a net.Socket (Node internals: `_handle`, and `fd` -1 once closed) */
interface TcpWrap {
  fd: number;
  close(): void;
}

function wrapOf(sock: net.Socket): TcpWrap | undefined {
  return (sock as unknown as { _handle?: TcpWrap | null })._handle ?? undefined;
}

/**
 * A connection the primary holds: its place in the address's count across workers, and its place in the listener's
 * count of what the primary holds (`release` ends it: once handed over, or closed; idempotent)
 */
interface Held {
  counted: CountedConnection | undefined;
  release: () => void;
}

interface Handing {
  l: Listener;
  sock: net.Socket;
  head: Buffer;
  key: string | undefined;
  wrap: TcpWrap;
  held: Held;
  /** its first try: a connection for any worker whose hand-over failed is offered once more */
  firstTry: boolean;
  /** routed when FIRST_BYTES_MS ran out, not by its first bytes: handed over after those that were */
  late: boolean;
  /** `head` is what a worker read and answered before giving it back (routeAgain) */
  replayed: boolean;
}

const NOTHING_HELD = (): void => undefined;

/** what the hand-over needs of the primary */
export interface HandOverHost {
  readonly slots: readonly Slot[];
  readonly log: Logger;
  /** every worker has booted once (connections before that are held) */
  booted(): boolean;
  hold(go: () => void): void;
  nextReady(): Slot | undefined;
  /**
   * The worker of a routing key: its terminal's owner; one that owns none is placed now (`place`: a terminal's link,
   * whose worker claims it) or left to any worker (a player: undefined)
   */
  ownerSlot(key: string, place: boolean): Slot | undefined;
  /** `written`: with a handle, called once its message was written (err null) or could not be (the worker is gone) */
  send(w: Worker, m: ToWorker, handle?: net.Socket, written?: (err: Error | null) => void): boolean;
}

/**
 * The primary's part in a routed TCP connection: it reads the first bytes, finds the worker, hands the socket over,
 * and copes with that worker dying meanwhile; counts the connection against its address's cap across workers; and
 * against the caps of what the primary itself holds (its listener's cap and its descriptor reserve), from accept
 * until the socket is handed over: a flood of connections that never send anything is refused there, before the
 * primary runs out of descriptors, as a single process refuses it (core/connection-guard.ts).
 */
export class HandOver {
  constructor(private readonly h: HandOverHost) {}

  /**
   * Reads a connection's first bytes until its router knows the stream, then hands the socket, and the bytes read,
   * to that stream's worker. Reading stops at the socket itself (readStop), so nothing more is read here: what the
   * peer sends next waits in the kernel for the worker.
   */
  route(l: Listener, sock: net.Socket): void {
    // counted from accept (the gate resets and reports what it refuses)
    let release = NOTHING_HELD;
    if (l.gate) {
      const r = l.gate.hold(sock);
      if (!r) return;
      release = r;
    }
    this.routeHeld(l, sock, release);
  }

  /**
   * A connection a worker gives back once its protocol said whose it is (a 'late' listener): to the worker of `key`
   * (placed now with `place`), which parses `replay` again without answering. Counted against its address's cap
   * again (the first worker reported its close).
   */
  routeAgain(l: Listener | undefined, handle: unknown, m: { key: string; place: boolean; replay: Uint8Array }): void {
    const sock = handle instanceof net.Socket ? handle : undefined;
    if (!l || !sock) {
      sock?.destroy();
      return;
    }
    const replay = Buffer.from(m.replay.buffer, m.replay.byteOffset, m.replay.byteLength);
    const { key, place } = m;
    let counted: CountedConnection | undefined;
    if (l.caps) {
      counted = l.caps.admit(sock.remoteAddress ?? '');
      if (!counted) {
        this.refuse(l, sock, 'address');
        return;
      }
    }
    sock.on('error', () => undefined);
    // a socket received from a worker starts reading here: what came since goes along, after the replay
    sock.pause();
    (sock as unknown as { _handle?: { readStop?: () => void } })._handle?.readStop?.();
    let head = replay;
    let more: Buffer | null;
    while ((more = sock.read() as Buffer | null) !== null) head = Buffer.concat([head, more]);
    this.handOver(l, sock, head, key, true, { counted, release: NOTHING_HELD }, false, place, true);
  }

  private routeHeld(l: Listener, sock: net.Socket, release: () => void): void {
    // a port is bound while the first worker boots: its connections wait (paused) until every worker can take one
    if (!this.h.booted()) {
      this.h.hold(() => this.routeHeld(l, sock, release));
      return;
    }
    let counted: CountedConnection | undefined;
    if (l.caps) {
      counted = l.caps.admit(sock.remoteAddress ?? '');
      if (!counted) {
        this.refuse(l, sock, 'address');
        release();
        return;
      }
    }
    const held: Held = { counted, release };
    let head: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (d: RouteDecision, late = false) => {
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
      this.handOver(l, sock, head, typeof d === 'object' ? d.key : undefined, true, held, late);
    };
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const complete = head.length >= MAX_HEAD;
      let d: RouteDecision;
      try {
        d = l.router(head, complete);
      } catch {
        d = 'any';
      }
      if (d === 'more' && !complete) return;
      finish(d === 'more' ? 'any' : d);
    };
    // an error or an end before the router decided: the primary still holds the socket, and closes it
    const abandon = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.drop(l, sock, held);
    };
    // a peer that goes quiet before its router could decide: a last, final guess on what came
    const timer = setTimeout(() => {
      let d: RouteDecision = 'any';
      if (head.length)
        try {
          d = l.router(head, true);
        } catch {
          /* any */
        }
      finish(d === 'more' ? 'any' : d, true);
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
  private handOver(
    l: Listener,
    sock: net.Socket,
    head: Buffer,
    key: string | undefined,
    firstTry: boolean,
    held: Held,
    late: boolean,
    place = l.places,
    replayed = false,
  ): void {
    const slot = (key !== undefined ? this.h.ownerSlot(key, place) : undefined) ?? this.h.nextReady();
    if (!slot?.ready || !slot.worker) {
      this.h.log.warn({ listener: l.name, key }, 'connection refused: its worker is restarting');
      this.drop(l, sock, held);
      return;
    }
    const wrap = wrapOf(sock);
    if (!wrap) {
      // closed by its peer while it was being routed
      this.drop(l, sock, held);
      return;
    }
    const h: Handing = { l, sock, head, key, wrap, held, firstTry, late, replayed };
    slot.handing.add(h);
    // counted in the worker from now: it reports the close (or dies, and its counts with it)
    if (held.counted) l.caps?.move(held.counted, slot.index);
    (late ? slot.waiting.late : slot.waiting.soon).push(h);
    this.pump(slot);
  }

  /** gives Node the connections waiting for a worker, those that showed their stream first, MAX_UNWRITTEN at a time */
  private pump(slot: Slot): void {
    const w = slot.worker;
    while (w && slot.unwritten < MAX_UNWRITTEN) {
      const h = slot.waiting.soon.shift() ?? slot.waiting.late.shift();
      if (!h) return;
      this.sendTo(slot, w, h);
    }
  }

  private sendTo(slot: Slot, w: Worker, h: Handing): void {
    const { l, sock, head, key, held } = h;
    slot.unwritten++;
    const sent = this.h.send(w, { t: 'conn', listener: l.name, head, ...(h.replayed ? { replayed: true } : {}) }, sock, (err) => {
      // a worker that died since is no longer this slot's (rehome() started its count again)
      const current = slot.worker === w;
      if (current) slot.unwritten--;
      if (!err) {
        // written: the worker has it (the primary's descriptor closes at its acknowledgement, Node's doing) and its
        // gate counts it from now; until then it was the primary's. The one written before was acknowledged.
        held.release();
        if (current) {
          if (slot.lastWritten) slot.handing.delete(slot.lastWritten);
          slot.lastWritten = h;
          this.pump(slot);
        }
        return;
      }
      if (current) this.pump(slot);
      if (!slot.handing.delete(h)) return;
      const retry = key === undefined && h.firstTry && !sock.destroyed;
      this.h.log.warn({ listener: l.name, key, worker: slot.index, err: err.message, retried: retry }, 'connection not handed over: its worker is gone');
      if (retry) this.handOver(l, sock, head, key, false, held, h.late);
      else this.drop(l, sock, held);
    });
    if (!sent) {
      slot.unwritten--;
      slot.handing.delete(h);
      this.drop(l, sock, held);
    }
  }

  /** closes a connection the primary still holds, and stops counting it against its address and its listener */
  private drop(l: Listener, sock: net.Socket, held: Held): void {
    sock.destroy();
    held.release();
    if (held.counted) l.caps?.move(held.counted, 'gone');
  }

  /**
   * A dead worker's connections still waiting to be handed over: one for any worker goes to another; one for the
   * dead worker's streams is closed (the terminal or player reconnects once the worker is back).
   */
  rehome(slot: Slot): void {
    const stuck = [...slot.handing].filter((h) => h.wrap.fd >= 0);
    slot.handing.clear();
    slot.waiting = { soon: [], late: [] };
    slot.unwritten = 0;
    slot.lastWritten = undefined;
    if (stuck.length) this.h.log.warn({ worker: slot.index, connections: stuck.length }, 'connections waiting for a dead worker: handed to another, or closed');
    for (const h of stuck) {
      // still queued (its handle never left the socket): it can go elsewhere; in flight: only closing is left
      const queued = wrapOf(h.sock) === h.wrap;
      if (queued && h.key === undefined) {
        this.handOver(h.l, h.sock, h.head, undefined, false, h.held, h.late);
      } else if (queued) {
        h.sock.destroy();
        h.held.release();
      } else {
        h.wrap.close();
        h.held.release();
      }
    }
  }

  /** a connection over its address's cap across workers: reset at once (no descriptor held, no TIME_WAIT), and told */
  private refuse(l: Listener, sock: net.Socket, reason: RefusalReason): void {
    const remote = sock.remoteAddress ?? '';
    sock.on('error', () => undefined);
    sock.resetAndDestroy();
    this.refused(l, reason, remote);
  }

  /**
   * A connection the primary refused (its address's cap here, its listener's cap or the descriptor reserve in its
   * gate): told to a worker in batches, whose connection guard counts it (gw_core_connections_refused_total) and logs
   * it rate-limited, as it does its own refusals. A batch waits for a worker while none is up.
   */
  refused(l: Listener, reason: RefusalReason, remote: string): void {
    const batches = (l.refused ??= new Map<RefusalReason, { remotes: string[]; more: number }>());
    let batch = batches.get(reason);
    if (!batch) {
      const b = { remotes: [] as string[], more: 0 };
      batch = b;
      batches.set(reason, b);
      const tell = () => {
        const w = this.h.nextReady()?.worker;
        if (!w) {
          setTimeout(tell, REFUSED_BATCH_MS).unref();
          return;
        }
        batches.delete(reason);
        this.h.send(w, { t: 'refused', listener: l.name, reason, ...b });
      };
      setTimeout(tell, REFUSED_BATCH_MS).unref();
    }
    // a flood's addresses are itemised up to a bound, the rest counted (as the worker's own log summarises them)
    if (batch.remotes.length < MAX_REFUSED_ITEMS) batch.remotes.push(remote);
    else batch.more++;
  }
}

/** the site's caps on what the primary itself holds (PrimaryOptions.connections) */
export interface HoldingCaps {
  maxConnectionsPerListener: number;
  fdReserve: number;
  listenerLimits: ReadonlyMap<string, ListenerLimits>;
  probe?: FdProbe;
}

/** gateway.fdReserve's default, for a primary started without the site's (tests) */
const FD_RESERVE_DEFAULT = 256;

/**
 * The caps a single process applies to its own connections (core/connection-guard.ts), on the connections the primary
 * holds while it reads their first bytes: per listener, and the descriptor reserve (the per-address caps are counted
 * across workers, in each listener's AddressCaps). What it refuses goes to `refused`, which tells a worker.
 */
export function holdingGuard(
  c: HoldingCaps | undefined,
  log: Logger,
  refused: (listener: string, reason: RefusalReason, remote: string) => void,
): ConnectionGuard {
  // listenerLimits' per-address caps are the workers' (and AddressCaps'): the primary's gates have none
  const overrides = new Map<string, ListenerLimits>();
  for (const [name, lim] of c?.listenerLimits ?? []) overrides.set(name, { maxConnections: lim.maxConnections });
  return new ConnectionGuard({
    maxHttpConnectionsPerAddress: 0,
    maxTcpConnectionsPerAddress: 0,
    perAddressExempt: new net.BlockList(),
    overrides,
    maxConnectionsPerListener: c?.maxConnectionsPerListener ?? 0,
    fdReserve: c?.fdReserve ?? FD_RESERVE_DEFAULT,
    probe: c?.probe,
    log: log.child({ part: 'net' }),
    logRefusals: false,
    onRefused: refused,
  });
}
