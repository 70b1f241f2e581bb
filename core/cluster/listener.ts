/**
 * A routed port the primary binds for the workers, and the one Node internal its hand-over reads on a TCP socket.
 * Both are shared by the routing of held connections (hand-over.ts), the per-worker handle queue (worker-slot.ts) and
 * the primary (primary.ts), so they live apart from each.
 */
import type * as dgram from 'node:dgram';
import type * as net from 'node:net';
import type { ConnectionRouter } from '../../plugin-sdk/cluster';
import type { ListenerGate, RefusalReason } from '../connection-guard';
import type { AddressCaps } from './address-caps';
import type { UdpBatches } from './udp-batches';
import type { Slot } from './worker-slot';

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
export interface TcpWrap {
  fd: number;
  close(): void;
}

export function wrapOf(sock: net.Socket): TcpWrap | undefined {
  return (sock as unknown as { _handle?: TcpWrap | null })._handle ?? undefined;
}
