import 'reflect-metadata';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { container as rootContainer, type DependencyContainer } from 'tsyringe';
import pino, { type Logger, type DestinationStream } from 'pino';
import type { Registry } from 'prom-client';
import { BootError, buildConfig, checkEnvNames, envNameFor, freePortOverrides } from './config';
import { GatewayConfig, parseAllowList, parseApplications, parseListenerLimits, requestLimits, type ApplicationEntry, type ListenerLimits } from './gateway-config';
import { ConnectionGuard } from './connection-guard';
import type { FdProbe } from './fd-probe';
import { HealthState } from './health';
import { loadTlsFiles, type TlsFiles } from './tls-files';
import { requestLogFor } from './request-log';
import { loadSite, type SiteSpec } from './site';
import { ApplicationRegistry } from './apps';
import { ApiServer, type ApiServerOptions } from './http/api-server';
import { LoginGuard } from './http/login-guard';
import { apiAddress, apiPortOf } from './http/route-url';
import { BatchedBroadcast } from '../plugin-sdk/batched-broadcast';
import { CoreMediaBus, type PluginBus } from './bus/media-bus';
import { NoticeHub } from './notices';
import { SessionManager } from './sessions/session-manager';
import { createRegistry, metricsFor } from './metrics';
import { registerCoreRoutes } from './api-routes';
import { StoreFactory } from './stores';
import { systemClock, type Clock } from '../plugin-sdk/clock';
import type { PluginContext, PluginDefinition, PluginInstance, SiteInfo } from '../plugin-sdk/plugin';
import { TOKENS } from './tokens';
import { ServiceRegistry } from './services';
import { describeListenError, pluginNet, type PluginResources } from './plugin-net';
import { ReadSlices } from '../plugin-sdk/read-slices';
import { adoptHttp, udpPeerSettings, type ClusterContext } from './cluster/worker-net';
import { registerClusterCalls } from './cluster/session-calls';
import { WorkerBroadcasts } from './cluster/worker-broadcasts';
import { startFleet, type Fleet } from './fleet/fleet-node';
import { NodeForwarder } from './fleet/node-forwarder';

export const repoRoot: string = (() => {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) return process.cwd();
    dir = up;
  }
  return dir;
})();

export interface KernelOptions {
  /** site name, folder or site.json path; or a site object (tests) */
  site?: string | SiteSpec;
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  logDestination?: DestinationStream;
  /** extra plugin definitions by name (the test kit's in-process plugins) */
  pluginDefs?: Record<string, PluginDefinition<object>>;
  /**
   * Port-like plugin keys the site leaves out bind a free port instead of their default (the test kit's), so a
   * test never collides with a gateway running on the same machine. The environment still wins.
   */
  freePorts?: boolean;
  /** where the descriptor count and limit come from (tests fake a process near its limit); default /proc/self */
  fdProbe?: FdProbe;
  /** set in a worker of a multi-worker gateway (core/main.ts) */
  cluster?: ClusterContext;
}

interface Loaded extends PluginResources {
  def: PluginDefinition<object>;
  config: object;
  instance?: PluginInstance | void;
  /** its view of the bus: streams it made and stages it registered go when it stops */
  bus?: PluginBus;
}

/** Loads a site, validates every config, starts plugins in dependency order and stops them in reverse. */
export class Kernel {
  readonly env: NodeJS.ProcessEnv;
  readonly clock: Clock;
  site!: SiteSpec;
  gateway!: GatewayConfig;
  log!: Logger;
  registry!: Registry;
  api!: ApiServer;
  bus!: CoreMediaBus;
  /** media socket reads in slices of the loop (gateway.readSliceMs), one scheduler for all plugins */
  slices!: ReadSlices;
  notices!: NoticeHub;
  sessions!: SessionManager;
  apps!: ApplicationRegistry;
  /** metricsAllow, checked by the /metrics and /healthz routes */
  metricsAllow!: net.BlockList;
  /** the site's certificate and key when it serves TLS */
  tls: TlsFiles | undefined;
  /** what /healthz says beyond started: plugins' degraded parts */
  health!: HealthState;
  /** connection caps and the descriptor reserve of every TCP and HTTP listener */
  connections!: ConnectionGuard;
  /** the directory and the session API over every node of the fleet (one node: this one) */
  fleet: Fleet | undefined;
  container!: DependencyContainer;
  siteInfo!: SiteInfo;
  /** bound ports by "<plugin>.<key>" (and "gateway.httpPort"); useful with port 0 */
  readonly ports: Record<string, number> = {};
  started = false;
  private loaded: Loaded[] = [];
  private loginGuard!: LoginGuard;
  /** ctx.workers of each plugin, and sibling workers' broadcasts to them (set at boot) */
  broadcasts!: WorkerBroadcasts;
  /** with several workers: the failed logins counted here, told to the other workers' guards (set at boot) */
  private loginShare?: BatchedBroadcast;
  /** what every API server of this gateway (the kernel's and plugins' own ports) shares for credential checks */
  private authHooks!: Pick<ApiServerOptions, 'loginGuard' | 'onAuthFailure' | 'onAuthThrottled'>;
  private stores!: StoreFactory;
  private services!: ServiceRegistry;
  private stopping: Promise<void> | undefined;
  /** the plugin module files by plugin name (their router modules are found beside them) */
  private readonly modules = new Map<string, string>();
  private internalApi: net.Server | undefined;

  /** set in a worker of a multi-worker gateway */
  get cluster(): ClusterContext | undefined {
    return this.opts.cluster;
  }

  constructor(private readonly opts: KernelOptions = {}) {
    this.env = opts.env ?? process.env;
    this.clock = opts.clock ?? systemClock;
  }

  async start(): Promise<void> {
    try {
      await this.boot();
    } catch (err) {
      await this.stop().catch(() => undefined);
      throw err;
    }
  }

  private resolvePlugin(entry: SiteSpec['plugins'][number]): PluginDefinition<object> {
    const where = `${this.site.file}: plugin ${entry.name}`;
    const inline = this.opts.pluginDefs?.[entry.name];
    if (inline) return inline;
    const file = entry.module ? path.resolve(this.site.dir, entry.module) : path.join(__dirname, '..', 'plugins', entry.name, 'index.js');
    if (!entry.module && !fs.existsSync(file)) throw new BootError(`${where}: unknown plugin (no module at plugins/${entry.name})`);
    this.modules.set(entry.name, require.resolve(file));
    let mod: { default?: PluginDefinition<object> };
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      mod = require(file);
    } catch (err) {
      throw new BootError(`${where}: cannot load module ${file}: ${(err as Error).message.split('\n')[0]}`);
    }
    const def = mod.default;
    if (!def || typeof def.setup !== 'function' || typeof def.name !== 'string') throw new BootError(`${where}: module does not export a plugin (default export of definePlugin)`);
    if (def.name !== entry.name) throw new BootError(`${where}: module declares plugin '${def.name}'`);
    return def;
  }

  /** a plugin's router modules (plugin-sdk/plugin.ts `routers`), resolved beside its module file */
  private routerModules(def: PluginDefinition<object>): Record<string, string> | undefined {
    const file = this.modules.get(def.name);
    if (!file || !def.routers) return undefined;
    const out: Record<string, string> = {};
    for (const [name, rel] of Object.entries(def.routers)) {
      try {
        out[name] = require.resolve(path.resolve(path.dirname(file), rel));
      } catch {
        throw new BootError(`${this.site.file}: plugin ${def.name}: router '${name}': no module at ${rel} (beside ${file})`);
      }
    }
    return out;
  }

  private order(entries: Array<{ def: PluginDefinition<object>; config: object }>): Array<{ def: PluginDefinition<object>; config: object }> {
    const byName = new Map(entries.map((e) => [e.def.name, e]));
    const out: typeof entries = [];
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (e: (typeof entries)[number], chain: string[]) => {
      const s = state.get(e.def.name);
      if (s === 'done') return;
      if (s === 'visiting') throw new BootError(`${this.site.file}: plugin ${e.def.name}: circular requires (${[...chain, e.def.name].join(' -> ')})`);
      state.set(e.def.name, 'visiting');
      for (const dep of e.def.requires ?? []) {
        const d = byName.get(dep);
        if (!d) throw new BootError(`${this.site.file}: plugin ${e.def.name}: requires plugin ${dep}, which the site does not list`);
        visit(d, [...chain, e.def.name]);
      }
      // a plugin that needs or uses a service starts after the plugin that provides it
      for (const provider of this.services.providersFor(e.def)) visit(byName.get(provider)!, [...chain, e.def.name]);
      state.set(e.def.name, 'done');
      out.push(e);
    };
    for (const e of entries) visit(e, []);
    return out;
  }

  private async boot(): Promise<void> {
    this.site = typeof this.opts.site === 'object' ? this.opts.site : loadSite(this.opts.site ?? this.env.GW_SITE, repoRoot);
    this.gateway = buildConfig(GatewayConfig, this.site.gateway, { where: `${this.site.file}: gateway`, envPrefix: 'GW', env: this.env });
    const appEntries = parseApplications(this.gateway.applications, `${this.site.file}: gateway`);
    this.metricsAllow = parseAllowList(this.gateway.metricsAllow, `${this.site.file}: gateway`);
    const perAddressExempt = parseAllowList(this.gateway.perAddressExempt, `${this.site.file}: gateway`, 'perAddressExempt');
    const listenerLimits = parseListenerLimits(this.gateway.listenerLimits, `${this.site.file}: gateway`);
    this.tls = loadTlsFiles(this.gateway.tlsCertFile, this.gateway.tlsKeyFile, `${this.site.file}: gateway`);
    // Every plugin's config is checked before anything starts, so a typo never leaves half a gateway running.
    const resolved = this.site.plugins.map((entry) => {
      const def = this.resolvePlugin(entry);
      const prefix = envNameFor('GW', def.name);
      const given = entry.config;
      // a non-object config is left as it is, for buildConfig to refuse with its usual message
      const fileValues = this.opts.freePorts && given !== null && typeof given === 'object' && !Array.isArray(given)
        ? { ...freePortOverrides(def.config), ...given }
        : given;
      const config = def.config
        ? buildConfig(def.config, fileValues, { where: `${this.site.file}: plugin ${def.name}`, envPrefix: prefix, envAliases: def.env as Record<string, string>, env: this.env })
        : {};
      return { def, config };
    });
    this.services = new ServiceRegistry(this.site.file, resolved.map((r) => r.def));
    const ordered = this.order(resolved);
    this.checkGovApplications(appEntries, resolved.map((r) => r.def.name));
    // a misspelt plugin variable stops boot here, before anything is written; strays are warned about below
    const strayEnv = checkEnvNames(this.env, this.site.file, GatewayConfig, resolved.map((r) => r.def));

    const dataDir = path.resolve(this.gateway.dataDir);
    try {
      fs.mkdirSync(dataDir, { recursive: true });
      fs.accessSync(dataDir, fs.constants.W_OK);
    } catch (err) {
      throw new BootError(`${this.site.file}: gateway: key dataDir: cannot write to ${dataDir} (${(err as NodeJS.ErrnoException).code})`);
    }
    this.log = pino({ level: this.gateway.logLevel, base: { site: this.site.name, ...(this.opts.cluster ? { worker: this.opts.cluster.link.index } : {}) } }, this.opts.logDestination ?? pino.destination({ fd: 1, sync: false }));
    this.broadcasts = new WorkerBroadcasts(this.opts.cluster?.link, this.log);
    // with several workers the first one says what is the site's (they all read the same site and environment)
    const firstWorker = !this.opts.cluster || this.opts.cluster.link.index === 0;
    if (firstWorker) for (const stray of strayEnv) this.log.warn({ env: stray.name }, stray.message);
    this.registry = createRegistry();
    this.apps = new ApplicationRegistry(appEntries);
    if (this.apps.size === 0) this.log.warn('no applications configured: every API call will answer 401');
    if (firstWorker && this.apps.usesDemoCredentials()) this.log.warn('demo credentials (demo:demo) are in use: configure real applications before exposing this gateway');
    this.bus = new CoreMediaBus({
      maxGopBytes: this.gateway.maxGopBytes, maxQueueBytes: this.gateway.maxQueueBytes, maxStreamBytes: this.gateway.maxStreamBytes,
      readerDropAfterMs: this.gateway.readerDropAfterSec * 1000, reusePayloads: this.gateway.reusePayloads,
    }, this.log.child({ part: 'bus' }), () => this.clock.now());
    this.health = new HealthState(this.log.child({ part: 'health' }), () => this.clock.now());
    const noticesLog = this.log.child({ part: 'notices' });
    this.notices = new NoticeHub(noticesLog, requestLogFor(noticesLog, this.gateway.requestLogLevel));
    this.sessions = new SessionManager(
      { keepIntvDefault: this.gateway.keepIntvDefault, openTimeoutSec: this.gateway.openTimeoutSec, consumptionTimeoutSec: this.gateway.consumptionTimeoutSec, instId: this.gateway.instId, publicHost: this.gateway.publicHost, publicHosts: this.gateway.publicHosts,
        maxRequestsPerApp: this.gateway.maxRequestsPerApp, requestLimits: requestLimits(appEntries) },
      this.bus, this.notices, this.clock, this.log.child({ part: 'sessions' }),
      requestLogFor(this.log.child({ part: 'sessions' }), this.gateway.requestLogLevel),
    );
    this.stores = new StoreFactory(this.gateway.store, dataDir, `${this.site.file}: gateway: key store`);
    await this.stores.open();
    const coreMetrics = metricsFor(this.registry, 'core');
    coreMetrics.gauge('bus_streams', 'streams on the bus (derived ones included)', [], (g) => g.set(this.bus.size));
    // what the media memory is, next to gw_process_nodejs_external_memory_bytes: payloads the bus holds
    coreMetrics.gauge('bus_held_bytes', 'payload bytes the bus keeps alive, by holder: GOP caches, readers\' queues', ['holder'], (g) => {
      let gop = 0;
      let queued = 0;
      for (const s of this.bus.list()) {
        const h = s.heldBytes();
        gop += h.gop;
        queued += h.queued;
      }
      g.set({ holder: 'gop' }, gop);
      g.set({ holder: 'queue' }, queued);
    });
    const arena = this.bus.chunks.counts;
    coreMetrics.gauge('bus_payload_chunks', 'payload chunks of Publisher.alloc since start, by what became of them: allocated, reused, escaped (left to the collector: a reader could not say when it was done), released (done, let go by the pool after 10 s unused)', ['event'], (g) => {
      g.set({ event: 'allocated' }, arena.allocated);
      g.set({ event: 'reused' }, arena.reused);
      g.set({ event: 'escaped' }, arena.escaped);
      g.set({ event: 'released' }, arena.released);
    });
    coreMetrics.gauge('bus_payload_chunk_bytes', 'bytes of payload chunks: held by streams (carved, or waiting until no reader can read them), free in the pool', ['state'], (g) => {
      const b = this.bus.chunks.bytes;
      g.set({ state: 'held' }, b.held);
      g.set({ state: 'free' }, b.free);
    });
    this.slices = new ReadSlices(this.gateway.readSliceMs);
    const sliced = this.slices.stats;
    coreMetrics.gauge('read_slice_reads', 'media socket reads since start (ctx.net.readSliced, gateway.readSliceMs), by how they were handled: at once, set aside past the slice (copied, handled at the turn\'s end), at once past the slice as every copy slab was taken', ['how'], (g) => {
      g.set({ how: 'at_once' }, sliced.direct - sliced.full);
      g.set({ how: 'set_aside' }, sliced.deferred);
      g.set({ how: 'slabs_full' }, sliced.full);
    });
    coreMetrics.gauge('read_slice_events', 'read slices since start that ended with reads still set aside (overrun: the loop was more than a slice behind), and readers paused for their set-aside bytes', ['event'], (g) => {
      g.set({ event: 'overrun' }, sliced.overrun);
      g.set({ event: 'paused' }, sliced.paused);
    });
    coreMetrics.gauge('read_slice_slab_bytes', 'bytes of the slabs set-aside reads are copied into (in use or spare; spares a burst made are let go 10-20 s after it)', [], (g) => g.set(this.slices.slabBytes));
    const authFailures = coreMetrics.counter('auth_failures_total', 'failed Basic logins, by reason', ['reason']);
    const authThrottled = coreMetrics.counter('auth_throttled_total', 'requests refused (429) from addresses blocked after too many failed logins');
    // the primary deals API connections to the workers in turn: an address's guesses add up across workers, or the
    // brake would allow authFailLimit per worker
    // (in a single process BatchedBroadcast sends and receives nothing)
    const loginShare = new BatchedBroadcast({
      workers: this.broadcasts.for(''), topic: 'login-failures', clock: this.clock, batchMs: 10, maxBatch: 4096, maxItemLength: 128,
      received: (keys) => { for (const k of keys) this.loginGuard.failureElsewhere(k); },
    });
    this.loginShare = loginShare;
    this.loginGuard = new LoginGuard({
      failLimit: this.gateway.authFailLimit, windowMs: this.gateway.authFailWindowSec * 1000, blockMs: this.gateway.authBlockSec * 1000,
      logIntervalMs: 10_000, now: () => this.clock.now(), shared: (key) => loginShare.add(key),
    });
    this.authHooks = { loginGuard: this.loginGuard, onAuthFailure: (reason: string) => authFailures.inc({ reason }), onAuthThrottled: () => authThrottled.inc() };
    this.connections = this.connectionGuard(coreMetrics, perAddressExempt, listenerLimits);
    if (this.opts.cluster) {
      const forwarded = coreMetrics.counter('forwarded_total', 'requests and WebSocket upgrades this worker passed to the worker that owns their stream', ['kind']);
      this.opts.cluster.forwarded = (kind) => forwarded.inc({ kind });
      if (this.gateway.udpPeerSockets) this.opts.cluster.udpPeers = udpPeerSettings(coreMetrics, this.connections);
      const guard = this.connections;
      this.opts.cluster.perAddress = (listener) => {
        const max = guard.maxPerAddressOf(listener);
        return max > 0 ? { max, exempt: this.gateway.perAddressExempt } : undefined;
      };
      this.opts.cluster.link.onRefused = (listener, remotes, more, reason) => {
        for (const r of remotes) guard.refusedAt(listener, reason, r);
        for (let i = 0; i < more; i++) guard.refusedAt(listener, reason, remotes[remotes.length - 1]);
      };
    }
    this.api = new ApiServer({ bodyLimit: this.gateway.bodyLimit, keepAliveTimeoutMs: this.gateway.httpKeepAliveSec * 1000, apps: this.apps, log: this.log.child({ part: 'http' }), ...this.authHooks, tls: this.tls });
    this.connections.guardServer(this.api.server, this.connections.gate('gateway.httpPort', 'api'));

    this.container = rootContainer.createChildContainer();
    this.container.registerInstance(TOKENS.Kernel, this);
    this.container.registerInstance(TOKENS.Logger, this.log);
    this.container.registerInstance(TOKENS.Clock, this.clock);
    this.container.registerInstance(TOKENS.Sessions, this.sessions);
    this.container.registerInstance(TOKENS.Bus, this.bus);
    this.container.registerInstance(TOKENS.Notices, this.notices);
    this.container.registerInstance(TOKENS.Registry, this.registry);
    this.services.attach(this.container);

    const httpPort = await this.listenHttp();
    const apiBase = (this.gateway.apiBase ?? `${this.tls ? 'https' : 'http'}://${this.gateway.publicHost}:${httpPort}`).replace(/\/+$/, '');
    this.siteInfo = {
      name: this.site.name, file: this.site.file, publicHost: this.gateway.publicHost, listenHost: this.gateway.listenHost, dataDir, instId: this.gateway.instId, apiBase,
      apiPort: apiPortOf(apiBase), tls: this.tls !== undefined,
    };
    this.fleet = await startFleet(this, apiBase);
    this.api.nodeForwarder = new NodeForwarder(this.fleet.dir, this.log.child({ part: 'fleet' }));
    registerCoreRoutes(this);
    if (this.opts.cluster) registerClusterCalls(this, this.opts.cluster.link);
    coreMetrics.gauge('requests_open', 'open stream requests', [], (g) => g.set(this.sessions.requestCount));
    coreMetrics.gauge('streams_open', 'open channel streams', [], (g) => g.set(this.sessions.streamCount));
    this.sessions.start();

    for (const { def, config } of ordered) {
      const loaded: Loaded = { def, config, servers: [], sockets: new Set(), http: [], log: this.log.child({ plugin: def.name }), routers: this.routerModules(def) };
      this.loaded.push(loaded);
      const ctx = this.contextFor(loaded);
      try {
        loaded.instance = await def.setup(ctx);
      } catch (err) {
        if (err instanceof BootError) throw err;
        throw new BootError(`${this.site.file}: plugin ${def.name}: setup failed: ${(err as Error)?.message ?? String(err)}`);
      }
      this.services.checkProvided(def);
      loaded.log.info('plugin started');
    }
    const unknown = this.connections.unknownOverrides();
    if (unknown.length) {
      throw new BootError(`${this.site.file}: gateway: key listenerLimits.${unknown[0]}: no such listener on this site (its listeners: ${this.connections.listenerNames().join(', ')})`);
    }
    this.started = true;
    // lost nodes' closed notices go through the plugins that deliver notices, now started
    this.fleet?.dir.ready();
    this.log.info({ httpPort, plugins: ordered.map((o) => o.def.name), ports: this.ports, connections: this.connections.describe() }, 'gateway started');
  }

  private connectionGuard(coreMetrics: ReturnType<typeof metricsFor>, perAddressExempt: net.BlockList, overrides: Map<string, ListenerLimits>): ConnectionGuard {
    const refused = coreMetrics.counter(
      'connections_refused_total',
      'connections closed at once: over a per-address (address) or per-listener (listener) cap, or descriptors near the process limit (fds)',
      ['listener', 'reason'],
    );
    const errors = coreMetrics.counter('listener_errors_total', 'errors listeners reported after binding (accept failures), by code', ['listener', 'code']);
    const g = this.gateway;
    const guard = new ConnectionGuard({
      maxHttpConnectionsPerAddress: g.maxHttpConnectionsPerAddress, maxTcpConnectionsPerAddress: g.maxTcpConnectionsPerAddress,
      maxConnectionsPerListener: g.maxConnectionsPerListener, fdReserve: g.fdReserve, perAddressExempt, overrides,
      log: this.log.child({ part: 'net' }), probe: this.opts.fdProbe,
      onRefused: (listener, reason) => refused.inc({ listener, reason }),
      onListenerError: (listener, code) => errors.inc({ listener, code }),
    });
    coreMetrics.gauge('connections_open', 'open TCP and HTTP connections, by listener', ['listener'], (gauge) => {
      gauge.reset();
      for (const [listener, n] of guard.openByListener()) gauge.set({ listener }, n);
    });
    return guard;
  }

  /**
   * `gov` is only a mark: gov-timed-token's open guard is what demands the timedToken. Without that plugin a gov
   * application would open with no token check at all, which is worse than not booting. (`admin` needs no such
   * check: it only unlocks admin routes, and a site without plugins that serve any simply has none to unlock.)
   */
  private checkGovApplications(apps: ApplicationEntry[], plugins: string[]): void {
    if (plugins.includes('gov-timed-token')) return;
    const i = apps.findIndex((a) => a.gov);
    if (i < 0) return;
    throw new BootError(
      `${this.site.file}: gateway: key applications[${i}].gov: application '${apps[i].appId}' is marked gov, but the site does not run ` +
      'the gov-timed-token plugin that checks its timedToken (add {"name": "gov-timed-token"} to plugins, or drop gov)',
    );
  }

  private async listenHttp(): Promise<number> {
    const host = this.gateway.listenHost;
    if (this.opts.cluster) {
      let adopted: { port: number; internal: net.Server };
      try {
        adopted = await adoptHttp(this.opts.cluster, 'gateway.httpPort', this.gateway.httpPort, host, { builtin: 'stream-path' }, this.api, this.log.child({ part: 'cluster' }));
      } catch (err) {
        throw new BootError(`${this.site.file}: gateway: key httpPort: ${(err as Error).message}`);
      }
      this.internalApi = adopted.internal;
      this.ports['gateway.httpPort'] = adopted.port;
      return adopted.port;
    }
    await new Promise<void>((resolve, reject) => {
      const onErr = (err: NodeJS.ErrnoException) => reject(new BootError(`${this.site.file}: gateway: key httpPort: ${describeListenError(err, this.gateway.httpPort, host)}`));
      this.api.server.once('error', onErr);
      this.api.server.listen(this.gateway.httpPort, host, () => {
        this.api.server.off('error', onErr);
        // without a listener an 'error' after binding would be thrown as an uncaught exception
        this.connections.watchErrors(this.api.server, 'gateway.httpPort');
        resolve();
      });
    });
    const port = (this.api.server.address() as net.AddressInfo).port;
    this.ports['gateway.httpPort'] = port;
    return port;
  }

  private contextFor(l: Loaded): PluginContext<object> {
    const name = l.def.name;
    const where = `${this.site.file}: plugin ${name}`;
    const netApi = pluginNet(l, {
      plugin: name, where, defaultHost: this.gateway.listenHost, publicHost: this.gateway.publicHost,
      ports: this.ports, bodyLimit: this.gateway.bodyLimit, keepAliveTimeoutMs: this.gateway.httpKeepAliveSec * 1000, apps: this.apps,
      auth: this.authHooks, connections: this.connections, tls: this.tls, cluster: this.opts.cluster, slices: this.slices,
      holdChannel: (key) => this.fleet?.holdChannel(key) ?? (() => undefined),
    });
    const stores = this.stores;
    const dataDir = this.siteInfo.dataDir;
    // The shared services come from the container, so what is registered there is what every plugin sees. Each
    // plugin resolves from a child container of its own: services other plugins provided are found in the kernel's,
    // and the plugin's own registrations stay in its child.
    const c = this.container.createChildContainer();
    c.registerInstance(TOKENS.PluginName, name);
    l.bus = c.resolve<CoreMediaBus>(TOKENS.Bus).viewFor(name, l.log);
    return {
      name,
      config: l.config,
      log: l.log,
      requestLog: requestLogFor(l.log, this.gateway.requestLogLevel),
      health: this.health.forPlugin(name),
      site: this.siteInfo,
      routes: this.api.routesFor(name, apiAddress(this.siteInfo.apiBase)),
      net: netApi,
      bus: l.bus,
      sessions: c.resolve<SessionManager>(TOKENS.Sessions),
      notices: c.resolve<NoticeHub>(TOKENS.Notices),
      stores: {
        keyv: (ns: string) => stores.keyv(`${name}.${ns}`),
        dir: () => {
          const d = path.join(dataDir, name);
          fs.mkdirSync(d, { recursive: true });
          return d;
        },
      },
      metrics: metricsFor(c.resolve<Registry>(TOKENS.Registry), name),
      clock: c.resolve<Clock>(TOKENS.Clock),
      services: this.services.viewFor(l.def, c),
      workers: this.broadcasts.for(name),
    };
  }

  /** Stops plugins in reverse order, then closes every listener, the API server and the stores. */
  stop(): Promise<void> {
    if (!this.stopping) this.stopping = this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    this.started = false;
    this.loginShare?.stop();
    this.sessions?.stopAll();
    for (const l of [...this.loaded].reverse()) {
      try {
        await l.instance?.stop?.();
      } catch (err) {
        l.log.error({ err }, 'plugin stop failed');
      }
      l.bus?.release();
      for (const api of l.http) await api.close().catch(() => undefined);
      for (const sock of l.sockets) sock.destroy();
      for (const s of l.servers) {
        await new Promise<void>((resolve) => {
          if (s instanceof net.Server) s.close(() => resolve());
          else s.close(() => resolve());
        }).catch(() => undefined);
      }
      this.health?.clearPlugin(l.def.name);
      l.log.debug('plugin stopped');
    }
    // after the plugins: the requests they closed have left the directory (stop waits for what is under way)
    await this.fleet?.dir.stop().catch((err: Error) => this.log.warn({ err: err.message }, 'directory stop failed'));
    await this.api?.close();
    this.internalApi?.close();
    this.connections?.stop();
    await this.stores?.close();
    this.registry?.clear();
    this.log?.info('gateway stopped');
    this.log?.flush?.();
  }
}
