/** What the primary and the workers say to each other over the cluster IPC channel (advanced serialization). */
import type { Notice } from '../../plugin-sdk/notices';
import type { ListenerKind, RefusalReason } from '../connection-guard';

/**
 * how a listener's connections are routed: the built-in 'stream-path', 'late' (any worker first; the plugin hands a
 * connection on once its protocol says whose it is: RTMP), or a router a plugin module exports
 */
export type RouteSpec = { builtin: 'stream-path' | 'late' } | { module: string; plugin: string; name: string };

export type ToPrimary =
  | {
      t: 'listen';
      id: number;
      listener: string;
      proto: 'tcp' | 'udp';
      port: number;
      host: string;
      route: RouteSpec;
      reuseAddr?: boolean;
      /** TCP: the listener's per-address cap (0: none), counted by the primary across workers (address-caps.ts) */
      perAddress?: { max: number; exempt: string[] };
      /** TCP: what the listener is for, for the primary's own per-listener cap and descriptor reserve (default 'tcp') */
      kind?: ListenerKind;
    }
  | { t: 'ready' }
  | { t: 'rpc'; id: number; to: number | 'all'; method: string; args: unknown }
  | { t: 'rpc-out'; id: number; ok: boolean; value?: unknown; error?: WireError }
  | { t: 'reserve'; id: number; reqId: string; appId: string; limit: number; notice: Notice }
  | { t: 'release'; reqId: string }
  /** connections of capped listeners this worker held that closed: [listener, address key] each */
  | { t: 'conns-closed'; items: Array<[string, string]> }
  | { t: 'lookup'; id: number; reqIds: string[] }
  /** the worker that owns the terminal of a routing key, placed now if nobody does (node-claims.ts) */
  | { t: 'place'; id: number; key: string }
  /** this worker opened (+1) or closed (-1) a stream of the terminal of a routing key */
  | { t: 'held'; key: string; delta: 1 | -1 }
  | { t: 'udp-send'; listener: string; msg: Uint8Array; port: number; address: string }
  /** a datagram a worker's peer socket took that worker `to` owns (udp-peers.ts) */
  | { t: 'udp-route'; listener: string; to: number; msg: Uint8Array; address: string; port: number }
  /**
   * (with the socket's handle) a connection of a 'late' listener that belongs to the terminal of `key`, which
   * another worker owns (or, `place`, nobody yet): to be handed there with `replay`, the bytes this worker read
   */
  | { t: 'reroute'; listener: string; key: string; place: boolean; replay: Uint8Array };

export type ToWorker =
  | { t: 'listened'; id: number; port?: number; error?: string }
  /** `replayed`: `head` is what another worker already read and answered (a rerouted connection), not new bytes */
  | { t: 'conn'; listener: string; head: Uint8Array; replayed?: boolean }
  /**
   * the datagrams of a routed UDP listener the primary read in one event-loop turn for this worker: `data` holds
   * them back to back, `sizes[i]` bytes each, from `addresses[i]`:`ports[i]`
   */
  | { t: 'udp'; listener: string; data: Uint8Array; sizes: Uint32Array; addresses: string[]; ports: Uint16Array }
  /**
   * connections the primary refused (one entry each, `more` past the list's bound, from its last address): over their
   * address's cap across workers, over the listener's cap on connections the primary holds (reading their first
   * bytes), or with the primary's descriptors near its limit. The worker counts and logs them.
   */
  | { t: 'refused'; listener: string; reason: RefusalReason; remotes: string[]; more: number }
  | { t: 'rpc-in'; id: number; method: string; args: unknown }
  | { t: 'rpc-reply'; id: number; ok: boolean; value?: unknown; error?: WireError }
  | { t: 'reserved'; id: number; result: 'ok' | 'self' | 'other' | 'cap' }
  | { t: 'looked-up'; id: number; owners: number[] }
  | { t: 'placed'; id: number; worker: number }
  /** terminals (SIMs) whose worker changed: [sim, worker], -1 for none; `all`: the whole table (a worker that starts) */
  | { t: 'owners'; changes: Array<[string, number]>; all?: boolean }
  | { t: 'stop' };

/** a GatewayError (or any error) as it crosses processes */
export interface WireError {
  message: string;
  errCode?: number;
  status?: number;
}
