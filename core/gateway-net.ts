/**
 * The gateway's own side of the network: the connection guard every TCP and HTTP listener goes through (with its
 * counters), a worker's part of it in a multi-worker gateway, and the API port's listener.
 *
 * With several workers the primary binds the public ports and deals connections: the worker's guard counts what it
 * serves, its per-address caps go with each listener to the primary (which refuses connections over them), and the
 * refusals the primary reports are counted and logged by the worker's guard like its own.
 */
import type * as net from 'node:net';
import type { Logger } from 'pino';
import type { Metrics } from '../plugin-sdk/metrics';
import { BootError } from './config';
import { ConnectionGuard } from './connection-guard';
import type { FdProbe } from './fd-probe';
import type { GatewayConfig } from './gateway-config';
import type { ListenerLimits } from './listener-limits';
import type { ApiServer } from './http/api-server';
import { describeListenError } from './plugin-net';
import { adoptHttp, udpPeerSettings, type ClusterContext } from './cluster/worker-net';

export interface GuardSettings {
  gateway: GatewayConfig;
  perAddressExempt: net.BlockList;
  overrides: Map<string, ListenerLimits>;
  log: Logger;
  fdProbe?: FdProbe;
}

/** The connection caps and descriptor reserve of the gateway.max*Connections* keys, counted in `m`. */
export function connectionGuard(m: Metrics, s: GuardSettings): ConnectionGuard {
  const refused = m.counter(
    'connections_refused_total',
    'connections closed at once: over a per-address (address) or per-listener (listener) cap, or descriptors near the process limit (fds)',
    ['listener', 'reason'],
  );
  const errors = m.counter('listener_errors_total', 'errors listeners reported after binding (accept failures), by code', ['listener', 'code']);
  const g = s.gateway;
  const guard = new ConnectionGuard({
    maxHttpConnectionsPerAddress: g.maxHttpConnectionsPerAddress,
    maxTcpConnectionsPerAddress: g.maxTcpConnectionsPerAddress,
    maxConnectionsPerListener: g.maxConnectionsPerListener,
    fdReserve: g.fdReserve,
    perAddressExempt: s.perAddressExempt,
    overrides: s.overrides,
    log: s.log,
    probe: s.fdProbe,
    onRefused: (listener, reason) => refused.inc({ listener, reason }),
    onListenerError: (listener, code) => errors.inc({ listener, code }),
  });
  m.gauge('connections_open', 'open TCP and HTTP connections, by listener', ['listener'], (gauge) => {
    gauge.reset();
    for (const [listener, n] of guard.openByListener()) gauge.set({ listener }, n);
  });
  return guard;
}

/** A worker's hooks into its cluster link: forwarded requests counted, per-address caps given, refusals counted. */
export function joinWorkerNet(cluster: ClusterContext, m: Metrics, guard: ConnectionGuard, gateway: GatewayConfig): void {
  const forwarded = m.counter('forwarded_total', 'requests and WebSocket upgrades this worker passed to the worker that owns their stream', ['kind']);
  cluster.forwarded = (kind) => forwarded.inc({ kind });
  if (gateway.udpPeerSockets) cluster.udpPeers = udpPeerSettings(m, guard);
  cluster.perAddress = (listener) => {
    const max = guard.maxPerAddressOf(listener);
    return max > 0 ? { max, exempt: gateway.perAddressExempt } : undefined;
  };
  cluster.link.onRefused = (listener, remotes, more, reason) => {
    for (const r of remotes) guard.refusedAt(listener, reason, r);
    for (let i = 0; i < more; i++) guard.refusedAt(listener, reason, remotes[remotes.length - 1]);
  };
}

export interface ApiListen {
  siteFile: string;
  gateway: GatewayConfig;
  api: ApiServer;
  connections: ConnectionGuard;
  cluster?: ClusterContext;
  log: Logger;
}

/**
 * The API server on gateway.httpPort (listenHost). A worker adopts the port from the primary and gets, besides, the
 * internal server its siblings forward requests to. A bind failure is a BootError naming the key.
 */
export async function listenApi(o: ApiListen): Promise<{ port: number; internal?: net.Server }> {
  const { gateway, api } = o;
  const host = gateway.listenHost;
  if (o.cluster) {
    try {
      return await adoptHttp(o.cluster, 'gateway.httpPort', gateway.httpPort, host, { builtin: 'stream-path' }, api, o.log.child({ part: 'cluster' }));
    } catch (err) {
      throw new BootError(`${o.siteFile}: gateway: key httpPort: ${(err as Error).message}`);
    }
  }
  await new Promise<void>((resolve, reject) => {
    const onErr = (err: NodeJS.ErrnoException) =>
      reject(new BootError(`${o.siteFile}: gateway: key httpPort: ${describeListenError(err, gateway.httpPort, host)}`));
    api.server.once('error', onErr);
    api.server.listen(gateway.httpPort, host, () => {
      api.server.off('error', onErr);
      // without a listener an 'error' after binding would be thrown as an uncaught exception
      o.connections.watchErrors(api.server, 'gateway.httpPort');
      resolve();
    });
  });
  return { port: (api.server.address() as net.AddressInfo).port };
}
