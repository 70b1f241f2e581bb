import 'reflect-metadata';
import type * as net from 'node:net';
import type { DependencyContainer } from 'tsyringe';
import pino, { type Logger, type DestinationStream } from 'pino';
import type { Registry } from 'prom-client';
import { BootError } from './config';
import { requestLimits } from './gateway-applications';
import type { GatewayConfig } from './gateway-config';
import type { ConnectionGuard } from './connection-guard';
import type { FdProbe } from './fd-probe';
import { HealthState } from './health';
import type { TlsFiles } from './tls-files';
import { requestLogFor } from './request-log';
import type { SiteSpec } from './site';
import { ApplicationRegistry } from './apps';
import { ApiServer } from './http/api-server';
import { loginBrake, type AuthHooks } from './http/login-brake';
import type { BatchedBroadcast } from '../plugin-sdk/batched-broadcast';
import { CoreMediaBus } from './bus/media-bus';
import { apiPortOf } from './http/route-url';
import { NoticeHub } from './notices';
import { SessionManager } from './sessions/session-manager';
import { createRegistry, metricsFor } from './metrics';
import { registerCoreRoutes } from './api-routes';
import { StoreFactory } from './stores';
import { systemClock, type Clock } from '../plugin-sdk/clock';
import type { PluginDefinition, SiteInfo } from '../plugin-sdk/plugin';
import { ReadSlices } from './net/read-slices';
import type { ClusterContext } from './cluster/worker-net';
import { registerClusterCalls } from './cluster/session-calls';
import { WorkerBroadcasts } from './cluster/worker-broadcasts';
import { startFleet, type Fleet } from './fleet/fleet-node';
import { NodeForwarder } from './fleet/node-forwarder';
import { repoRoot } from './repo-root';
import { checkSite } from './boot-checks';
import { busGauges, readSliceGauges, sessionGauges } from './core-gauges';
import { connectionGuard, joinWorkerNet, listenApi } from './gateway-net';
import { kernelContainer, pluginContext, stopPlugin, type LoadedPlugin, type PluginHost } from './plugin-context';

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

/**
 * Loads a site, validates every config, starts plugins in dependency order and stops them in reverse. What each step
 * holds lives beside it: boot-checks.ts (what is checked before anything starts), plugin-resolution.ts (modules and
 * start order), core-gauges.ts, gateway-net.ts (connection guard, API port), http/login-brake.ts, plugin-context.ts
 * (DI and each plugin's context).
 */
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
  private loaded: LoadedPlugin[] = [];
  /** ctx.workers of each plugin, and sibling workers' broadcasts to them (set at boot) */
  broadcasts!: WorkerBroadcasts;
  /** with several workers: the failed logins counted here, told to the other workers' guards (set at boot) */
  private loginShare?: BatchedBroadcast;
  /** what every API server of this gateway (the kernel's and plugins' own ports) shares for credential checks */
  private authHooks!: AuthHooks;
  private stores!: StoreFactory;
  private stopping: Promise<void> | undefined;
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

  private async boot(): Promise<void> {
    const checked = checkSite({ site: this.opts.site, env: this.env, repoRoot, pluginDefs: this.opts.pluginDefs, freePorts: this.opts.freePorts });
    const { site, gateway, appEntries, ordered, dataDir } = checked;
    this.site = site;
    this.gateway = gateway;
    this.metricsAllow = checked.metricsAllow;
    this.tls = checked.tls;

    this.log = pino(
      { level: gateway.logLevel, base: { site: site.name, ...(this.opts.cluster ? { worker: this.opts.cluster.link.index } : {}) } },
      this.opts.logDestination ?? pino.destination({ fd: 1, sync: false }),
    );
    this.broadcasts = new WorkerBroadcasts(this.opts.cluster?.link, this.log);
    // with several workers the first one says what is the site's (they all read the same site and environment)
    const firstWorker = !this.opts.cluster || this.opts.cluster.link.index === 0;
    if (firstWorker) for (const stray of checked.strayEnv) this.log.warn({ env: stray.name }, stray.message);
    this.registry = createRegistry();
    this.apps = new ApplicationRegistry(appEntries);
    if (this.apps.size === 0) this.log.warn('no applications configured: every API call will answer 401');
    if (firstWorker && this.apps.usesDemoCredentials())
      this.log.warn('demo credentials (demo:demo) are in use: configure real applications before exposing this gateway');
    this.bus = new CoreMediaBus(
      {
        maxGopBytes: gateway.maxGopBytes,
        maxQueueBytes: gateway.maxQueueBytes,
        maxStreamBytes: gateway.maxStreamBytes,
        readerDropAfterMs: gateway.readerDropAfterSec * 1000,
        reusePayloads: gateway.reusePayloads,
      },
      this.log.child({ part: 'bus' }),
      () => this.clock.now(),
    );
    this.health = new HealthState(this.log.child({ part: 'health' }), () => this.clock.now());
    const noticesLog = this.log.child({ part: 'notices' });
    this.notices = new NoticeHub(noticesLog, requestLogFor(noticesLog, gateway.requestLogLevel));
    this.sessions = new SessionManager(
      {
        keepIntvDefault: gateway.keepIntvDefault,
        openTimeoutSec: gateway.openTimeoutSec,
        consumptionTimeoutSec: gateway.consumptionTimeoutSec,
        instId: gateway.instId,
        publicHost: gateway.publicHost,
        publicHosts: gateway.publicHosts,
        maxRequestsPerApp: gateway.maxRequestsPerApp,
        requestLimits: requestLimits(appEntries),
      },
      this.bus,
      this.notices,
      this.clock,
      this.log.child({ part: 'sessions' }),
      requestLogFor(this.log.child({ part: 'sessions' }), gateway.requestLogLevel),
    );
    this.stores = new StoreFactory(gateway.store, dataDir, `${site.file}: gateway: key store`);
    await this.stores.open();
    const coreMetrics = metricsFor(this.registry, 'core');
    busGauges(coreMetrics, this.bus);
    this.slices = new ReadSlices(gateway.readSliceMs);
    readSliceGauges(coreMetrics, this.slices);
    const brake = loginBrake(gateway, this.clock, this.broadcasts.for(''), coreMetrics);
    this.loginShare = brake.share;
    this.authHooks = brake.hooks;
    this.connections = connectionGuard(coreMetrics, {
      gateway,
      perAddressExempt: checked.perAddressExempt,
      overrides: checked.listenerLimits,
      log: this.log.child({ part: 'net' }),
      fdProbe: this.opts.fdProbe,
    });
    if (this.opts.cluster) joinWorkerNet(this.opts.cluster, coreMetrics, this.connections, gateway);
    this.api = new ApiServer({
      bodyLimit: gateway.bodyLimit,
      keepAliveTimeoutMs: gateway.httpKeepAliveSec * 1000,
      apps: this.apps,
      log: this.log.child({ part: 'http' }),
      ...this.authHooks,
      tls: this.tls,
    });
    this.connections.guardServer(this.api.server, this.connections.gate('gateway.httpPort', 'api'));

    this.container = kernelContainer(
      {
        kernel: this,
        log: this.log,
        clock: this.clock,
        sessions: this.sessions,
        bus: this.bus,
        notices: this.notices,
        registry: this.registry,
      },
      checked.services,
    );

    const listened = await listenApi({ siteFile: site.file, gateway, api: this.api, connections: this.connections, cluster: this.opts.cluster, log: this.log });
    this.internalApi = listened.internal;
    const httpPort = listened.port;
    this.ports['gateway.httpPort'] = httpPort;
    const apiBase = (gateway.apiBase ?? `${this.tls ? 'https' : 'http'}://${gateway.publicHost}:${httpPort}`).replace(/\/+$/, '');
    this.siteInfo = {
      name: site.name,
      file: site.file,
      publicHost: gateway.publicHost,
      listenHost: gateway.listenHost,
      dataDir,
      instId: gateway.instId,
      apiBase,
      apiPort: apiPortOf(apiBase),
      tls: this.tls !== undefined,
    };
    this.fleet = await startFleet(this, apiBase);
    this.api.nodeForwarder = new NodeForwarder(this.fleet.dir, this.log.child({ part: 'fleet' }));
    registerCoreRoutes(this);
    if (this.opts.cluster) registerClusterCalls(this, this.opts.cluster.link);
    sessionGauges(coreMetrics, this.sessions);
    this.sessions.start();

    const host: PluginHost = {
      gateway,
      site: this.siteInfo,
      ports: this.ports,
      apps: this.apps,
      auth: this.authHooks,
      connections: this.connections,
      tls: this.tls,
      cluster: this.opts.cluster,
      slices: this.slices,
      holdChannel: (key) => this.fleet?.holdChannel(key) ?? (() => undefined),
      container: this.container,
      api: this.api,
      health: this.health,
      stores: this.stores,
      services: checked.services,
      broadcasts: this.broadcasts,
    };
    for (const { def, config } of ordered) {
      const loaded: LoadedPlugin = {
        def,
        config,
        servers: [],
        sockets: new Set(),
        http: [],
        log: this.log.child({ plugin: def.name }),
        routers: checked.plugins.routerModules(def),
      };
      this.loaded.push(loaded);
      const ctx = pluginContext(loaded, host);
      try {
        loaded.instance = await def.setup(ctx);
      } catch (err) {
        if (err instanceof BootError) throw err;
        throw new BootError(`${site.file}: plugin ${def.name}: setup failed: ${(err as Error | undefined)?.message ?? String(err)}`);
      }
      checked.services.checkProvided(def);
      loaded.log.info('plugin started');
    }
    const unknown = this.connections.unknownOverrides();
    if (unknown.length) {
      throw new BootError(
        `${site.file}: gateway: key listenerLimits.${unknown[0]}: no such listener on this site (its listeners: ${this.connections.listenerNames().join(', ')})`,
      );
    }
    this.started = true;
    // lost nodes' closed notices go through the plugins that deliver notices, which have all started by this line
    this.fleet.dir.ready();
    this.log.info({ httpPort, plugins: ordered.map((o) => o.def.name), ports: this.ports, connections: this.connections.describe() }, 'gateway started');
  }

  /** Stops plugins in reverse order, then closes every listener, the API server and the stores. */
  stop(): Promise<void> {
    if (!this.stopping) this.stopping = this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    /* eslint-disable @typescript-eslint/no-unnecessary-condition -- a boot that failed part-way leaves the later
       fields unset, though typed as set: stop closes what exists */
    this.started = false;
    this.loginShare?.stop();
    this.sessions?.stopAll();
    for (const l of [...this.loaded].reverse()) await stopPlugin(l, this.health);
    // after the plugins: the requests they closed have left the directory (stop waits for what is under way)
    await this.fleet?.dir.stop().catch((err: Error) => this.log.warn({ err: err.message }, 'directory stop failed'));
    await this.api?.close();
    this.internalApi?.close();
    this.connections?.stop();
    await this.stores?.close();
    this.registry?.clear();
    this.log?.info('gateway stopped');
    this.log?.flush?.();
    /* eslint-enable @typescript-eslint/no-unnecessary-condition */
  }
}
