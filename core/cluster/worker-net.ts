import * as dgram from 'node:dgram';
import * as net from 'node:net';
import type { Logger } from 'pino';
import type { Metrics } from '../../plugin-sdk/metrics';
import type { ConnectionGuard, ListenerKind } from '../connection-guard';
import type { ApiServer } from '../http/api-server';
import { addressKey } from '../http/login-guard';
import { ClusterForwarder, internalSocketPath, listenInternal } from './forwarder';
import type { RouteSpec } from './messages';
import { loadRouter } from './shard';
import { UDP_PEER_IDLE_MS, UDP_PEER_SOCKETS_MAX, UdpPeerSockets, type UdpPeerEvent, type UdpPeerFds } from './udp-peers';
import type { WorkerLink } from './worker-link';

/** the listener name of the gateway's API port (gateway.httpPort), as the kernel adopts it */
const API_LISTENER = 'gateway.httpPort';

/** what a worker's kernel knows of its cluster */
export interface ClusterContext {
  link: WorkerLink;
  /** names this gateway's internal sockets (the primary's pid) */
  id: string;
  /** proves a forwarded request came from a sibling worker */
  secret: string;
  /** counts requests and upgrades passed to the worker that owns them (set by the kernel) */
  forwarded?: (kind: 'request' | 'upgrade') => void;
  /**
   * A listener's per-address cap, for the primary to count across workers (set by the kernel: its gate's cap and
   * gateway.perAddressExempt); undefined: no cap
   */
  perAddress?: (listener: string) => { max: number; exempt: string[] } | undefined;
  /** UDP peers' own sockets in their worker (gateway.udpPeerSockets, set by the kernel); unset: every datagram crosses the primary */
  udpPeers?: { max: number; idleMs: number; fds: UdpPeerFds; counts: { datagrams: number }; onEvent(e: UdpPeerEvent): void };
}

/** UDP peer sockets of this worker (gateway.udpPeerSockets): counted as the guard's descriptors, and in metrics */
export function udpPeerSettings(metrics: Metrics, guard: ConnectionGuard): NonNullable<ClusterContext['udpPeers']> {
  let open = 0;
  const counts = { datagrams: 0 };
  const events = metrics.counter(
    'udp_peer_socket_events_total',
    "UDP peers' own sockets in this worker (gateway.udpPeerSockets), by event: opened, closed (idle, shared: the peer sends other workers' channels, failed), not opened (full, fds)",
    ['event'],
  );
  metrics.gauge('udp_peer_sockets', 'UDP peers with a socket of their own in this worker (their datagrams skip the primary)', [], (g) => g.set(open));
  metrics.gauge('udp_peer_socket_datagrams', "datagrams this worker's UDP peer sockets took since start (they did not cross the primary)", [], (g) =>
    g.set(counts.datagrams),
  );
  return {
    max: UDP_PEER_SOCKETS_MAX,
    idleMs: UDP_PEER_IDLE_MS,
    counts,
    onEvent: (event) => events.inc({ event }),
    fds: {
      mayOpen: () => guard.fdsFree(),
      opened: () => {
        open++;
        guard.fdOpened();
      },
      closed: () => {
        open--;
        guard.fdClosed();
      },
    },
  };
}

/**
 * The route of a listener, or undefined when it has none (then Node's cluster shares the port among workers).
 * `routers`: the plugin's router modules by name, resolved (plugin-sdk/plugin.ts).
 */
export function routeSpec(route: string | undefined, plugin: string, routers: Record<string, string> | undefined): RouteSpec | undefined {
  if (!route) return undefined;
  if (route === 'stream-path' || route === 'late') return { builtin: route };
  // an in-process plugin (the test kit's) has no module the primary could load its router from
  const module = routers?.[route];
  if (!module) return undefined;
  return { module, plugin, name: route };
}

/**
 * Rerouted connections of 'late' listeners: what the worker that took them first read (and answered). The plugin
 * parses it again without answering (Net.replayOf), then goes on with the socket's own bytes.
 */
export const REPLAYED = new WeakMap<net.Socket, Buffer>();

/** a server that listens nowhere: the primary accepts its connections and passes them here; it reports the primary's port */
function adoptingServer(srv: net.Server, port: number, host: string): void {
  Object.defineProperty(srv, 'address', { value: () => ({ port, address: host, family: host.includes(':') ? 'IPv6' : 'IPv4' }), configurable: true });
}

/**
 * A routed TCP listener in a worker: `srv` gets 'connection' for each socket the primary hands over. A per-address
 * cap is counted by the primary across workers: each connection's close is reported to it.
 */
export async function adoptTcp(
  c: ClusterContext,
  listener: string,
  port: number,
  host: string,
  spec: RouteSpec,
  srv: net.Server,
  kind: ListenerKind = 'tcp',
): Promise<number> {
  const perAddress = c.perAddress?.(listener);
  const bound = await c.link.listenTcp(
    listener,
    port,
    host,
    spec,
    perAddress,
    (sock, head, replayed) => {
      if (perAddress) {
        const key = addressKey(sock.remoteAddress ?? '');
        sock.once('close', () => c.link.connClosed(listener, key));
      }
      if (replayed) REPLAYED.set(sock, head);
      else if (head.length) sock.unshift(head);
      srv.emit('connection', sock);
    },
    kind,
  );
  adoptingServer(srv, bound, host);
  return bound;
}

/**
 * A routed HTTP listener in a worker: the public port's connections come from the primary; requests that belong to
 * another worker go there; other workers' forwarded requests arrive on an internal socket.
 */
export async function adoptHttp(
  c: ClusterContext,
  listener: string,
  port: number,
  host: string,
  spec: RouteSpec,
  api: ApiServer,
  log: Logger,
): Promise<{ port: number; internal: net.Server }> {
  // the gateway's own API port may use half of the primary's descriptor reserve, as it does a worker's
  const bound = await adoptTcp(c, listener, port, host, spec, api.server, listener === API_LISTENER ? 'api' : 'http');
  api.forwarder = new ClusterForwarder(c.link, c.id, listener, c.secret, log, (kind) => c.forwarded?.(kind));
  const internal = await listenInternal(internalSocketPath(c.id, c.link.index, listener), api.internalServer(), c.secret);
  return { port: bound, internal };
}

/**
 * A routed UDP listener in a worker: datagrams of its streams come from the primary, and what it sends leaves from
 * the primary's socket (the address the peer talks to). The socket handed to the plugin is never bound. With
 * `c.udpPeers`, a peer whose datagram the primary routed here gets a socket of its own on the same port
 * (udp-peers.ts): its next datagrams, and what is sent to it, skip the primary.
 */
export async function adoptUdp(
  c: ClusterContext,
  listener: string,
  port: number,
  host: string,
  spec: RouteSpec,
  onMsg: (m: Buffer, r: dgram.RemoteInfo, s: dgram.Socket) => void,
  log: Logger,
): Promise<{ port: number; socket: dgram.Socket }> {
  const type = host.includes(':') ? 'udp6' : 'udp4';
  const socket = dgram.createSocket(type);
  let peers: UdpPeerSockets | undefined;
  const bound = await c.link.listenUdp(listener, port, host, spec, c.udpPeers !== undefined, (m, r) => {
    onMsg(m, r, socket);
    peers?.seen(r.address, r.port);
  });
  if (c.udpPeers) {
    const { link } = c;
    peers = new UdpPeerSockets({
      type,
      host,
      port: bound,
      router: loadRouter(spec),
      ...c.udpPeers,
      log,
      // a terminal no worker owns yet is this one's to take (it came to this worker's socket)
      owns: (key) => (link.ownerOf(key) ?? link.index) === link.index,
      deliver: (m, r) => onMsg(m, r, socket),
      reroute: (m, r, key) => link.udpReroute(listener, link.ownerOf(key) ?? link.index, m, r.address, r.port),
    });
  }
  Object.defineProperty(socket, 'address', { value: () => ({ port: bound, address: host, family: type === 'udp6' ? 'IPv6' : 'IPv4' }), configurable: true });
  Object.defineProperty(socket, 'send', {
    configurable: true,
    value: (msg: Uint8Array | string, ...rest: unknown[]) => {
      // send(msg, port, address[, cb]) or send(msg, offset, length, port, address[, cb])
      let data = typeof msg === 'string' ? Buffer.from(msg) : msg;
      let p = rest[0];
      let a = rest[1];
      if (typeof rest[1] === 'number') {
        data = data.subarray(rest[0] as number, (rest[0] as number) + (rest[1] as number));
        p = rest[2];
        a = rest[3];
      }
      const last = rest[rest.length - 1];
      const cb = typeof last === 'function' ? (last as (err: Error | null) => void) : undefined;
      if (peers?.send(data, p as number, a as string, cb)) return;
      c.link.udpSend(listener, data, p as number, a as string);
      if (cb) process.nextTick(cb, null);
    },
  });
  Object.defineProperty(socket, 'close', {
    configurable: true,
    value: (cb?: () => void) => {
      peers?.close();
      if (cb) process.nextTick(cb);
    },
  });
  return { port: bound, socket };
}
