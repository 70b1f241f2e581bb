import type { Server as HttpServer } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type { RemoteInfo } from 'node:dgram';
import type { Logger } from 'pino';
import type { Routes } from './http';
import type { MediaBus } from './bus';
import type { Sessions } from './sessions';
import type { Notices } from './notices';
import type { Metrics } from './metrics';
import type { Clock } from './clock';
import type { ServiceToken, Services } from './services';

export interface SiteInfo {
  /** site folder name, e.g. 'default' */
  name: string;
  /** path of the site file, for messages */
  file: string;
  /** host written into play URLs and push addresses */
  publicHost: string;
  /** interface the listeners bind to */
  listenHost: string;
  dataDir: string;
  instId: string;
  /** e.g. http://127.0.0.1:7080 (what clients use to reach the API) */
  apiBase: string;
  /** the port clients reach the API at: apiBase's (the bound one unless the site sets apiBase) */
  apiPort: number;
  /**
   * the site serves TLS (gateway tlsCertFile/tlsKeyFile): the API port and plugins' HTTP listeners speak HTTPS/WSS
   * only, so URLs a plugin writes for them say https/wss
   */
  tls: boolean;
}

export interface ListenOptions {
  port: number;
  host?: string;
  /** the config key that holds the port, so a bind failure names it */
  key: string;
  /**
   * TCP and HTTP: connections one address (an IPv6 /64) may hold open on this listener, where the site's gateway
   * `listenerLimits` does not say; default the gateway's maxTcpConnectionsPerAddress (listenTcp: devices, many
   * behind one NAT) or maxHttpConnectionsPerAddress (listenHttp: players and API clients); 0: no cap. UDP: unused.
   */
  maxConnectionsPerAddress?: number;
  /**
   * With several workers: how the primary finds which worker a connection (TCP, HTTP) or datagram (UDP) belongs to:
   * a router this plugin declares in `routers`, or 'stream-path' (HTTP/WebSocket/RTSP URLs that carry a session stream
   * name), or 'late' (TCP: any worker first, and the plugin moves the connection with `Net.routeLate` once its protocol
   * says whose it is). Without one, any worker takes it (UDP without a router: one socket shared by all workers). See
   * cluster.ts.
   */
  route?: string;
}

export interface HttpListenOptions extends ListenOptions {
  /** a request's headers must arrive within this (default 15 s) */
  headersTimeoutMs?: number;
  /** a whole request (not its response) must arrive within this (default 30 s) */
  requestTimeoutMs?: number;
  /** bytes a JSON body may have (default: the gateway's bodyLimit) */
  bodyLimit?: number;
  /** false: plain HTTP even when the site serves TLS (e.g. behind a TLS front of its own); default: as the site */
  tls?: boolean;
}

/** An HTTP server on a port of the plugin's own, with the same routes, auth and reply envelope as the API port. */
export interface HttpListener {
  readonly routes: Routes;
  readonly port: number;
  readonly server: HttpServer;
  /** it speaks HTTPS/WSS */
  readonly tls: boolean;
}

/**
 * A UDP port a plugin listens on (Net.listenUdp): what it may do with it is answer peers and read its address. With
 * several workers the port is the primary's and datagrams travel to the worker that owns their peer, so this is not
 * a dgram.Socket: the kernel closes it at stop.
 */
export interface UdpPort {
  address(): { port: number; address: string; family: string };
  send(msg: Buffer | readonly Buffer[], port: number, address: string, callback?: (err: Error | null, bytes: number) => void): void;
  /** datagrams handed to send and not yet sent: a sender without backpressure drops past its own limit */
  getSendQueueSize(): number;
}

/** A source's reads, handled in the event loop's slices (Net.readSliced, Net.sliceReader). */
export interface SliceReader {
  /** a read, handled now or set aside for the turn's end; `owned`: the caller gives the buffer away (a datagram) */
  deliver(chunk: Buffer, owned?: boolean): void;
  /** handle what is set aside now: call it before acting on the source's end or close */
  flush(): void;
}

export interface Net {
  listenTcp(opts: ListenOptions, onConnection: (socket: Socket) => void): Promise<NetServer>;
  listenUdp(opts: ListenOptions, onMessage: (msg: Buffer, rinfo: RemoteInfo, socket: UdpPort) => void): Promise<UdpPort>;
  /** HTTP (and WebSocket upgrades through `routes.upgrade`) on its own port; closed with its connections at stop */
  listenHttp(opts: HttpListenOptions): Promise<HttpListener>;
  /**
   * A busy socket's bytes (media from a terminal or camera), read into one buffer shared by all such sockets
   * (borrowed-reads.ts) and in the event loop's slices (read-slices.ts, gateway.readSliceMs), so that a thousand of
   * them do not keep an API call waiting. `onChunk` gets borrowed views, in order: it copies what it keeps. A read set
   * aside that throws goes to `onError` (the caller should destroy the socket). Call the reader's `flush()` before
   * acting on the socket's end or close, so bytes set aside are handled first.
   */
  readSliced(socket: Socket, onChunk: (chunk: Buffer) => void, onError: (err: unknown) => void): SliceReader;
  /**
   * The same slices for one peer's datagrams (or any source that hands its buffers over): `reader.deliver(msg, true)`
   * handles a datagram now or sets it aside as it is (no copy) for the turn's end. There is nothing to pause: past
   * the set-aside limits a datagram is handled at once. `flush()` before acting on the peer's end.
   */
  sliceReader(onChunk: (chunk: Buffer) => void, onError: (err: unknown) => void): SliceReader;
  /**
   * For a listener with `route: 'late'`: a protocol that says whose a connection is only after an exchange (RTMP's
   * play and publish come after its handshake and connect). With several workers, 'here' when this worker owns the
   * terminal of routing key `key` (channelKey/streamKey) or nobody does; else the socket goes to the worker that
   * does, with `replay` (every byte read from it so far), and the answer is 'moved': forget the socket, read nothing
   * more. One process: always 'here'.
   */
  routeLate(socket: Socket, key: string, replay: Buffer): 'here' | 'moved';
  /**
   * A connection another worker moved here (routeLate): the bytes it read and answered. Parse them first, answering
   * nothing up to where that worker stopped (the exchange that made it move the connection), then go on.
   */
  replayOf(socket: Socket): Buffer | undefined;
  /**
   * This process serves the terminal of routing key `key` (`{sim}_{chan}`) until the returned function is called
   * (e.g. an RTMP encoder publishing a channel no request has opened yet): with several workers this worker owns it,
   * and in a fleet this node claims the channel, so its opens, on any worker or node, are routed here.
   */
  hold(key: string): () => void;
}

export interface KeyValueStore {
  get<T = unknown>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown, ttlMs?: number): Promise<unknown>;
  delete(key: string): Promise<boolean>;
}

export interface Stores {
  /** a keyv namespace on the site's store (embedded SQLite by default, Redis when the site says so) */
  keyv(namespace: string): KeyValueStore;
  /** a directory of the plugin's own under the data directory (created) */
  dir(): string;
}

/** A line written once per request or player; at the level the site's requestLogLevel chooses (default info). */
export type RequestLog = (obj: Record<string, unknown>, msg: string) => void;

/**
 * What /healthz says about this plugin. A plugin that runs but cannot do part of its job (a recorder on a full disk)
 * says so here; /healthz answers 200 with status "degraded" and, to readers allowed the details (metricsAccess),
 * each part's reason. Degraded is not down: live media still flows. Cleared at the plugin's stop.
 */
export interface Health {
  /** `part` names one of several things the plugin does (default: the plugin as a whole); repeating is a no-op */
  degraded(reason: string, part?: string): void;
  ok(part?: string): void;
}

/**
 * The gateway's worker processes (see cluster.ts). A plugin runs in every worker; each holds only its own channels'
 * streams and requests. In a single process: count 1, index 0, and broadcast reaches nobody.
 */
export interface Workers {
  readonly count: number;
  /** this worker's, 0..count-1 */
  readonly index: number;
  /**
   * Sends `payload` (structured-cloneable) to this plugin in every other worker, for state an admin call changes
   * (e.g. gov-timed-token's tokens). Best effort: a worker that is restarting misses it, so such state must also be
   * in the store the plugin reads at start.
   */
  broadcast(topic: string, payload: unknown): void;
  /** what this plugin does with another worker's broadcast on `topic` */
  on(topic: string, fn: (payload: unknown) => void): void;
}

export interface PluginContext<C> {
  readonly name: string;
  readonly config: C;
  readonly log: Logger;
  /** for per-request lines (request or player started and ended), at the operator's chosen level */
  readonly requestLog: RequestLog;
  readonly health: Health;
  readonly site: SiteInfo;
  readonly routes: Routes;
  readonly net: Net;
  readonly bus: MediaBus;
  readonly sessions: Sessions;
  readonly notices: Notices;
  readonly stores: Stores;
  readonly metrics: Metrics;
  readonly clock: Clock;
  /** services other plugins provide, and this plugin's own (see services.ts) */
  readonly services: Services;
  /** the other worker processes of this gateway */
  readonly workers: Workers;
}

export interface PluginInstance {
  /** close everything the plugin opened; listeners made through ctx.net, and streams and stages made through ctx.bus, are closed by the kernel anyway */
  stop?(): Promise<void> | void;
}

export interface PluginDefinition<C extends object = Record<string, never>> {
  name: string;
  /** a class-validator class whose property initialisers are the defaults */
  config?: new () => C;
  /** extra environment names for keys, besides GW_<PLUGIN>_<KEY> (e.g. { port: 'GW_FLV_PORT' }) */
  env?: Partial<Record<keyof C & string, string>>;
  /** plugins that must start before this one */
  requires?: string[];
  /** services this plugin provides (it must call ctx.services.provide for each in setup) */
  provides?: ReadonlyArray<ServiceToken<unknown>>;
  /** services this plugin cannot run without: boot stops when no plugin on the site provides one */
  needs?: ReadonlyArray<ServiceToken<unknown>>;
  /** services this plugin uses when the site has them (ctx.services.find) */
  uses?: ReadonlyArray<ServiceToken<unknown>>;
  /**
   * Connection routers by name, for listeners that say `route: name` (see cluster.ts): each is the path of a module,
   * relative to this plugin's own module file, whose export `router` is a ConnectionRouter. The primary of a
   * multi-worker gateway loads that module alone, never the plugin: it may import Node's built-ins and plugin-sdk's
   * dependency-free files (cluster, sim, formats/byte-order) and nothing else.
   */
  routers?: Record<string, string>;
  setup(ctx: PluginContext<C>): Promise<PluginInstance | void> | PluginInstance | void;
}

/** Declares a plugin. A plugin is a value; the kernel validates its config and calls setup in dependency order. */
export function definePlugin<C extends object = Record<string, never>>(def: PluginDefinition<C>): PluginDefinition<C> {
  if (!/^[a-z][a-z0-9-]*$/.test(def.name)) throw new Error(`plugin name '${def.name}' must be lower-case letters, digits and dashes`);
  return def;
}
