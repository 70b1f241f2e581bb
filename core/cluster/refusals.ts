/**
 * Connections the primary refuses, told to a worker in batches. The primary's own guard neither counts nor logs them
 * (holding-guard.ts: logRefusals false): a worker's connection guard does, beside its own refusals, and a flood's
 * refusals travel as one message per listener and reason every REFUSED_BATCH_MS, not one each.
 */
import type * as net from 'node:net';
import type { RefusalReason } from '../connection-guard';
import type { HandOverHost } from './hand-over';
import type { Listener } from './listener';

/** refusals are told to a worker at most this often */
const REFUSED_BATCH_MS = 100;
/** addresses named in one batch of refusals; more are counted */
const MAX_REFUSED_ITEMS = 1024;

/** what telling refusals needs of the primary */
export type RefusalHost = Pick<HandOverHost, 'nextReady' | 'send'>;

/** a connection over its address's cap across workers: reset at once (no descriptor held, no TIME_WAIT), and told */
export function refuse(h: RefusalHost, l: Listener, sock: net.Socket, reason: RefusalReason): void {
  const remote = sock.remoteAddress ?? '';
  sock.on('error', () => undefined);
  sock.resetAndDestroy();
  refused(h, l, reason, remote);
}

/**
 * A connection the primary refused (its address's cap here, its listener's cap or the descriptor reserve in its
 * gate): told to a worker in batches, whose connection guard counts it (gw_core_connections_refused_total) and logs
 * it rate-limited, as it does its own refusals. A batch waits for a worker while none is up.
 */
export function refused(h: RefusalHost, l: Listener, reason: RefusalReason, remote: string): void {
  const batches = (l.refused ??= new Map<RefusalReason, { remotes: string[]; more: number }>());
  let batch = batches.get(reason);
  if (!batch) {
    const b = { remotes: [] as string[], more: 0 };
    batch = b;
    batches.set(reason, b);
    const tell = () => {
      const w = h.nextReady()?.worker;
      if (!w) {
        setTimeout(tell, REFUSED_BATCH_MS).unref();
        return;
      }
      batches.delete(reason);
      h.send(w, { t: 'refused', listener: l.name, reason, ...b });
    };
    setTimeout(tell, REFUSED_BATCH_MS).unref();
  }
  // a flood's addresses are itemised up to a bound, the rest counted (as the worker's own log summarises them)
  if (batch.remotes.length < MAX_REFUSED_ITEMS) batch.remotes.push(remote);
  else batch.more++;
}
