/**
 * The routing of the connections the primary holds: from accept until its router knows a connection's stream, then
 * to that stream's worker. The caps on what it holds (holding-guard.ts), the batching of what it refuses
 * (refusals.ts) and the queue of handles on their way to each worker (worker-slot.ts) live apart: this file decides
 * which worker a connection is for.
 */
import type { Worker } from 'node:cluster';
import * as net from 'node:net';
import type { Logger } from 'pino';
import type { RouteDecision } from '../../plugin-sdk/cluster';
import type { RefusalReason } from '../connection-guard';
import type { CountedConnection } from './address-caps';
import { wrapOf, type Listener } from './listener';
import type { ToWorker } from './messages';
import { refuse, refused } from './refusals';
import { dropHeld, HandleQueue, type Handing, type Held, type Slot } from './worker-slot';

/** a connection that has not shown its stream within this is handed to any worker, whose own timeouts then apply */
const FIRST_BYTES_MS = 10_000;
/** routers get at most this many bytes to decide */
const MAX_HEAD = 4096;

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
  /** the handles on their way to each worker; a connection for any worker that cannot go to its first comes back */
  private readonly queue: HandleQueue;

  constructor(private readonly h: HandOverHost) {
    this.queue = new HandleQueue(h, (g: Handing) => this.handOver(g.l, g.sock, g.head, undefined, false, g.held, g.late));
  }

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
        refuse(this.h, l, sock, 'address');
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
        refuse(this.h, l, sock, 'address');
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
      dropHeld(l, sock, held);
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
      dropHeld(l, sock, held);
      return;
    }
    const wrap = wrapOf(sock);
    if (!wrap) {
      // closed by its peer while it was being routed
      dropHeld(l, sock, held);
      return;
    }
    const h: Handing = { l, sock, head, key, wrap, held, firstTry, late, replayed };
    slot.handing.add(h);
    // counted in the worker from now: it reports the close (or dies, and its counts with it)
    if (held.counted) l.caps?.move(held.counted, slot.index);
    (late ? slot.waiting.late : slot.waiting.soon).push(h);
    this.queue.pump(slot);
  }

  /** A dead worker's connections still waiting to be handed over (worker-slot.ts HandleQueue.rehome) */
  rehome(slot: Slot): void {
    this.queue.rehome(slot);
  }

  /** a connection the primary refused, told to a worker in batches (refusals.ts) */
  refused(l: Listener, reason: RefusalReason, remote: string): void {
    refused(this.h, l, reason, remote);
  }
}
