import * as dgram from 'node:dgram';
import * as net from 'node:net';
import type { Logger } from 'pino';
import type { HttpListener, HttpListenOptions, ListenOptions, Net } from '../plugin-sdk/plugin';
import type { ApplicationRegistry } from './apps';
import { BootError } from './config';
import type { ConnectionGuard } from './connection-guard';
import { ApiServer, type ApiServerOptions } from './http/api-server';
import type { ReadSlices } from './net/read-slices';
import { adoptHttp, adoptTcp, adoptUdp, REPLAYED, routeSpec, type ClusterContext } from './cluster/worker-net';

/** bytes asked for a UDP listener's receive buffer */
export const UDP_RECV_BUFFER = 4 * 1024 * 1024;

/** What a plugin opened through ctx.net, for the kernel to close after its stop(). */
export interface PluginResources {
  servers: Array<net.Server | dgram.Socket>;
  /** accepted TCP sockets, destroyed at stop so server.close() can finish */
  sockets: Set<net.Socket>;
  /** HTTP listeners of its own (ctx.net.listenHttp) */
  http: ApiServer[];
  /** with several workers: the plugin's router modules by name, resolved (the primary loads them alone) */
  routers?: Record<string, string>;
  log: Logger;
}

export function describeListenError(err: NodeJS.ErrnoException, port: number, host: string): string {
  if (err.code === 'EADDRINUSE') return `port ${port} on ${host} is already in use`;
  if (err.code === 'EACCES') return `no permission to listen on port ${port} on ${host}`;
  if (err.code === 'EADDRNOTAVAIL') return `address ${host} is not available on this machine`;
  return `cannot listen on ${host}:${port} (${err.code ?? err.message})`;
}

export interface PluginNetOptions {
  plugin: string;
  /** "<site file>: plugin <name>", the start of a bind failure's message */
  where: string;
  defaultHost: string;
  /** the host clients reach the gateway at (Routes.url's default) */
  publicHost: string;
  /** bound ports are published here as "<plugin>.<key>" */
  ports: Record<string, number>;
  bodyLimit: number;
  /** gateway.httpKeepAliveSec, in ms */
  keepAliveTimeoutMs: number;
  apps: ApplicationRegistry;
  /** the gateway's login brake and auth counters: a plugin's own port is no way around them */
  auth?: Pick<ApiServerOptions, 'loginGuard' | 'onAuthFailure' | 'onAuthThrottled'>;
  /** connection caps and the descriptor reserve, shared with the API port */
  connections: ConnectionGuard;
  /** the site's certificate and key: plugins' HTTP listeners serve TLS with them unless they opt out */
  tls?: { cert: Buffer; key: Buffer };
  /** set in a worker of a multi-worker gateway: routed listeners are bound by the primary */
  cluster?: ClusterContext;
  /** the process's one read scheduler (gateway.readSliceMs) */
  slices: ReadSlices;
  /** the fleet's claim of a channel a plugin serves (Net.hold): opens on other nodes come to this one */
  holdChannel?: (key: string) => () => void;
}

/** A plugin's ctx.net: listeners that name their config key when they cannot bind, and are tracked for stop. */
export function pluginNet(l: PluginResources, o: PluginNetOptions): Net {
  const { plugin: name, where, defaultHost } = o;
  const bindError = (key: string, err: NodeJS.ErrnoException, port: number, host: string, suffix = '') =>
    new BootError(`${where}: key ${key}: ${describeListenError(err, port, host)}${suffix}`);

  /** sockets of this plugin's 'late' listeners, by the listener they came from (with workers) */
  const lateListener = new WeakMap<net.Socket, string>();

  const listenTcp = (lo: ListenOptions, onConn: (s: net.Socket) => void) =>
    new Promise<net.Server>((resolve, reject) => {
      const host = lo.host ?? defaultHost;
      const listener = `${name}.${lo.key}`;
      const gate = o.connections.gate(listener, 'tcp', lo.maxConnectionsPerAddress);
      const srv = net.createServer((sock) => {
        if (!gate.admit(sock)) return;
        l.sockets.add(sock);
        sock.once('close', () => l.sockets.delete(sock));
        if (lo.route === 'late') lateListener.set(sock, listener);
        onConn(sock);
      });
      const spec = o.cluster && routeSpec(lo.route, name, l.routers);
      if (o.cluster && spec) {
        adoptTcp(o.cluster, listener, lo.port, host, spec, srv).then(
          (port) => {
            o.connections.watchErrors(srv, listener);
            l.servers.push(srv);
            o.ports[listener] = port;
            resolve(srv);
          },
          (err: Error) => reject(new BootError(`${where}: key ${lo.key}: ${err.message}`)),
        );
        return;
      }
      srv.once('error', (err: NodeJS.ErrnoException) => reject(bindError(lo.key, err, lo.port, host)));
      srv.listen(lo.port, host, () => {
        srv.removeAllListeners('error');
        o.connections.watchErrors(srv, listener);
        l.servers.push(srv);
        o.ports[listener] = (srv.address() as net.AddressInfo).port;
        resolve(srv);
      });
    });

  const listenUdp = (lo: ListenOptions, onMsg: (m: Buffer, r: dgram.RemoteInfo, s: dgram.Socket) => void) =>
    new Promise<dgram.Socket>((resolve, reject) => {
      const host = lo.host ?? defaultHost;
      const spec = o.cluster && routeSpec(lo.route, name, l.routers);
      if (o.cluster && spec) {
        adoptUdp(o.cluster, `${name}.${lo.key}:udp`, lo.port, host, spec, onMsg, l.log).then(
          ({ port, socket }) => {
            o.ports[`${name}.${lo.key}:udp`] = port;
            l.servers.push(socket);
            resolve(socket);
          },
          (err: Error) => reject(new BootError(`${where}: key ${lo.key}: ${err.message}`)),
        );
        return;
      }
      // terminals' datagrams wait here while the event loop is busy (a GC pause, a burst): a 208 KiB default holds
      // ~6 ms of 250 UDP terminals at 1 Mbit/s; the kernel caps the request at net.core.rmem_max
      const sock = dgram.createSocket({ type: host.includes(':') ? 'udp6' : 'udp4', reuseAddr: false, recvBufferSize: UDP_RECV_BUFFER });
      sock.once('error', (err: NodeJS.ErrnoException) => reject(bindError(lo.key, err, lo.port, host, ' (UDP)')));
      sock.on('message', (m, r) => onMsg(m, r, sock));
      sock.bind(lo.port, host, () => {
        sock.removeAllListeners('error');
        o.connections.watchErrors(sock, `${name}.${lo.key}:udp`);
        l.servers.push(sock);
        o.ports[`${name}.${lo.key}:udp`] = sock.address().port;
        resolve(sock);
      });
    });

  const listenHttp = async (lo: HttpListenOptions): Promise<HttpListener> => {
    const api = new ApiServer({
      bodyLimit: lo.bodyLimit ?? o.bodyLimit,
      apps: o.apps,
      log: l.log.child({ part: 'http', key: lo.key }),
      headersTimeoutMs: lo.headersTimeoutMs,
      requestTimeoutMs: lo.requestTimeoutMs,
      keepAliveTimeoutMs: o.keepAliveTimeoutMs,
      ...o.auth,
      tls: lo.tls === false ? undefined : o.tls,
    });
    const host = lo.host ?? defaultHost;
    const listener = `${name}.${lo.key}`;
    o.connections.guardServer(api.server, o.connections.gate(listener, 'http', lo.maxConnectionsPerAddress));
    const spec = o.cluster && routeSpec(lo.route, name, l.routers);
    if (o.cluster && spec) {
      let adopted: { port: number; internal: net.Server };
      try {
        adopted = await adoptHttp(o.cluster, listener, lo.port, host, spec, api, l.log);
      } catch (err) {
        throw new BootError(`${where}: key ${lo.key}: ${(err as Error).message}`);
      }
      l.http.push(api);
      l.servers.push(adopted.internal);
      o.ports[listener] = adopted.port;
      const tls = lo.tls !== false && o.tls !== undefined;
      return { routes: api.routesFor(name, { host: o.publicHost, port: adopted.port, tls }), port: adopted.port, server: api.server, tls };
    }
    await new Promise<void>((resolve, reject) => {
      const onErr = (err: NodeJS.ErrnoException) => reject(bindError(lo.key, err, lo.port, host));
      api.server.once('error', onErr);
      api.server.listen(lo.port, host, () => {
        api.server.off('error', onErr);
        o.connections.watchErrors(api.server, listener);
        resolve();
      });
    });
    l.http.push(api);
    const port = (api.server.address() as net.AddressInfo).port;
    o.ports[listener] = port;
    const tls = lo.tls !== false && o.tls !== undefined;
    return { routes: api.routesFor(name, { host: o.publicHost, port, tls }), port, server: api.server, tls };
  };

  const readSliced = (socket: net.Socket, onChunk: (chunk: Buffer) => void, onError: (err: unknown) => void) => o.slices.readSocket(socket, onChunk, onError);

  const sliceReader = (onChunk: (chunk: Buffer) => void, onError: (err: unknown) => void) =>
    o.slices.reader(onChunk, { pause: () => undefined, resume: () => undefined, onError });

  const routeLate = (socket: net.Socket, key: string, replay: Buffer): 'here' | 'moved' => {
    const c = o.cluster;
    const listener = lateListener.get(socket);
    if (!c || !listener) return 'here';
    const owner = c.link.ownerOf(key);
    if (owner === undefined || owner === c.link.index) return 'here';
    // every byte the socket holds goes along: what this worker read, then what it had not yet
    socket.pause();
    (socket as unknown as { _handle?: { readStop?: () => void } })._handle?.readStop?.();
    let head = replay;
    let more: Buffer | null;
    while ((more = socket.read() as Buffer | null) !== null) head = Buffer.concat([head, more]);
    return c.link.reroute(listener, socket, key, false, head) ? 'moved' : 'here';
  };

  const replayOf = (socket: net.Socket): Buffer | undefined => REPLAYED.get(socket);

  const hold = (key: string): (() => void) => {
    const c = o.cluster;
    c?.link.held(key, 1);
    const fleet = o.holdChannel?.(key);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      c?.link.held(key, -1);
      fleet?.();
    };
  };

  return { listenTcp, listenUdp, listenHttp, readSliced, sliceReader, routeLate, replayOf, hold };
}
