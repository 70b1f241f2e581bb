/**
 * What the primary does with each message a worker sends it (messages.ts ToPrimary): the one switch over them,
 * each case handed to the part of the primary that holds what it asks about.
 *
 * Why a switch of its own: every worker message arrives on one channel, and each case touches a different part
 * (the workers, the listeners, the request directory, the node claims, the relayed calls, the hand-over). Kept
 * apart from those parts, the switch shows in one place every message the primary answers.
 */
import type { Worker } from 'node:cluster';
import type { HandOver } from './hand-over';
import type { Slot } from './worker-slot';
import type { ToPrimary } from './messages';
import type { NodeClaims } from './node-claims';
import type { RequestDirectory } from './request-directory';
import type { RoutedListeners } from './routed-listeners';
import type { WorkerCalls } from './worker-calls';
import type { WorkerPool } from './worker-pool';

/** the parts of the primary a worker's messages reach */
export interface PrimaryParts {
  pool: WorkerPool;
  listeners: RoutedListeners;
  requests: RequestDirectory;
  claims: NodeClaims;
  calls: WorkerCalls;
  handOver: HandOver;
  /** the worker that owns a key's terminal; `place`: one nobody owns gets a worker now */
  ownerSlot(key: string, place: boolean): Slot | undefined;
}

export function onWorkerMessage(p: PrimaryParts, slot: Slot, w: Worker, m: ToPrimary, _handle: unknown): void {
  switch (m.t) {
    case 'ready':
      slot.ready = true;
      p.pool.send(w, { t: 'owners', changes: p.claims.snapshot(), all: true });
      p.pool.readied(slot);
      return;
    case 'listen':
      p.listeners.listen(m).then(
        (port) => p.pool.send(w, { t: 'listened', id: m.id, port }),
        (err: Error) => p.pool.send(w, { t: 'listened', id: m.id, error: err.message }),
      );
      return;
    case 'udp-send': {
      const l = p.listeners.get(m.listener);
      l?.udp?.send(m.msg, m.port, m.address);
      return;
    }
    case 'conns-closed':
      for (const [listener, key] of m.items) p.listeners.get(listener)?.caps?.closed(slot.index, key);
      return;
    case 'udp-route': {
      const to = p.pool.slots[m.to];
      if (to?.ready && to.worker) p.listeners.get(m.listener)?.batches?.add(to, m.msg, m.address, m.port);
      return;
    }
    case 'reserve':
      p.pool.send(w, { t: 'reserved', id: m.id, result: p.requests.reserve(slot.index, m) });
      return;
    case 'release':
      p.requests.release(slot.index, m.reqId);
      return;
    case 'place': {
      const owner = p.ownerSlot(m.key, true);
      p.pool.send(w, { t: 'placed', id: m.id, worker: owner?.index ?? -1 });
      return;
    }
    case 'held':
      p.claims.held(slot.index, m.key, m.delta);
      return;
    case 'reroute':
      p.handOver.routeAgain(p.listeners.get(m.listener), _handle, m);
      return;
    case 'lookup':
      p.pool.send(w, { t: 'looked-up', id: m.id, owners: p.requests.owners(m.reqIds) });
      return;
    case 'rpc':
      p.calls.relay(slot.index, m);
      return;
    case 'rpc-out':
      p.calls.answered(slot.index, m);
      return;
  }
}
