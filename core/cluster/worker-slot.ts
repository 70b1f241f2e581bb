/**
 * One worker's place in the primary, and its queue of connections on their way to that worker. Node writes a worker's
 * handles one at a time and keeps the primary's copy of each open until the worker acknowledges it, so the queue
 * decides which connection goes next, and what becomes of those in flight when the worker dies. The routing that
 * fills it (hand-over.ts) decides only which worker a connection is for.
 */
import type { Worker } from 'node:cluster';
import type * as net from 'node:net';
import type { CountedConnection } from './address-caps';
import type { HandOverHost } from './hand-over';
import { wrapOf, type Listener, type TcpWrap } from './listener';

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
   * were read, `late` those given up on after FIRST_BYTES_MS (hand-over.ts; a flood of silent connections, handed
   * over all at once 10 s after it came, must not hold up an API request behind it, nor the calls and datagrams
   * behind that)
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

/**
 * A connection the primary holds: its place in the address's count across workers, and its place in the listener's
 * count of what the primary holds (`release` ends it: once handed over, or closed; idempotent)
 */
export interface Held {
  counted: CountedConnection | undefined;
  release: () => void;
}

export interface Handing {
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

/** closes a connection the primary still holds, and stops counting it against its address and its listener */
export function dropHeld(l: Listener, sock: net.Socket, held: Held): void {
  sock.destroy();
  held.release();
  if (held.counted) l.caps?.move(held.counted, 'gone');
}

/** what the handle queue needs of the primary */
export type HandleQueueHost = Pick<HandOverHost, 'log' | 'send'>;

/**
 * Gives Node the connections waiting in each slot, and copes with a worker that dies while some are on their way.
 * A connection for any worker that cannot go to this one is passed to `offerAgain` (the routing, once more).
 */
export class HandleQueue {
  constructor(
    private readonly h: HandleQueueHost,
    private readonly offerAgain: (h: Handing) => void,
  ) {}

  /** gives Node the connections waiting for a worker, those that showed their stream first, MAX_UNWRITTEN at a time */
  pump(slot: Slot): void {
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
      if (retry) this.offerAgain(h);
      else dropHeld(l, sock, held);
    });
    if (!sent) {
      slot.unwritten--;
      slot.handing.delete(h);
      dropHeld(l, sock, held);
    }
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
        this.offerAgain(h);
      } else if (queued) {
        h.sock.destroy();
        h.held.release();
      } else {
        h.wrap.close();
        h.held.release();
      }
    }
  }
}
