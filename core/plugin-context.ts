/**
 * What a started plugin has from the kernel: the context its setup gets, built from the kernel's tsyringe container,
 * and what the kernel closes for it when it stops.
 *
 * The shared services (sessions, bus, notices, registry, clock, logger) are registered once in the kernel's container,
 * so what is registered there is what every plugin sees. Each plugin resolves from a child container of its own:
 * services other plugins provided are found in the kernel's, and the plugin's own registrations stay in its child.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { container as rootContainer, type DependencyContainer } from 'tsyringe';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Clock } from '../plugin-sdk/clock';
import type { PluginContext, PluginDefinition, PluginInstance, SiteInfo } from '../plugin-sdk/plugin';
import type { ReadSlices } from './net/read-slices';
import type { ApplicationRegistry } from './apps';
import type { CoreMediaBus, PluginBus } from './bus/media-bus';
import type { ClusterContext } from './cluster/worker-net';
import type { WorkerBroadcasts } from './cluster/worker-broadcasts';
import type { ConnectionGuard } from './connection-guard';
import type { GatewayConfig } from './gateway-config';
import type { HealthState } from './health';
import type { ApiServer } from './http/api-server';
import type { AuthHooks } from './http/login-brake';
import { metricsFor } from './metrics';
import type { NoticeHub } from './notices';
import { pluginNet, type PluginResources } from './plugin-net';
import { requestLogFor } from './request-log';
import type { ServiceRegistry } from './services';
import type { SessionManager } from './sessions/session-manager';
import type { StoreFactory } from './stores';
import type { TlsFiles } from './tls-files';
import { TOKENS } from './tokens';
import { apiAddress } from './http/route-url';

/** A plugin the kernel started: its definition and config, what it returned, and what it opened. */
export interface LoadedPlugin extends PluginResources {
  def: PluginDefinition<object>;
  config: object;
  instance?: PluginInstance | void;
  /** its view of the bus: streams it made and stages it registered go when it stops */
  bus?: PluginBus;
}

/** The core's shared instances, registered in the kernel's container under TOKENS. */
export interface CoreInstances {
  kernel: object;
  log: Logger;
  clock: Clock;
  sessions: SessionManager;
  bus: CoreMediaBus;
  notices: NoticeHub;
  registry: Registry;
}

/** The kernel's container: a child of tsyringe's root, so two kernels in one process keep their services apart. */
export function kernelContainer(core: CoreInstances, services: ServiceRegistry): DependencyContainer {
  const c = rootContainer.createChildContainer();
  c.registerInstance(TOKENS.Kernel, core.kernel);
  c.registerInstance(TOKENS.Logger, core.log);
  c.registerInstance(TOKENS.Clock, core.clock);
  c.registerInstance(TOKENS.Sessions, core.sessions);
  c.registerInstance(TOKENS.Bus, core.bus);
  c.registerInstance(TOKENS.Notices, core.notices);
  c.registerInstance(TOKENS.Registry, core.registry);
  services.attach(c);
  return c;
}

/** What the kernel lends every plugin's context. */
export interface PluginHost {
  gateway: GatewayConfig;
  site: SiteInfo;
  /** bound ports by "<plugin>.<key>" */
  ports: Record<string, number>;
  apps: ApplicationRegistry;
  auth: AuthHooks;
  connections: ConnectionGuard;
  tls: TlsFiles | undefined;
  cluster: ClusterContext | undefined;
  slices: ReadSlices;
  /** the fleet's claim of a channel a plugin serves (Net.hold) */
  holdChannel: (key: string) => () => void;
  container: DependencyContainer;
  api: ApiServer;
  health: HealthState;
  stores: StoreFactory;
  services: ServiceRegistry;
  broadcasts: WorkerBroadcasts;
}

/** The context `l`'s setup gets; sets `l.bus` to the plugin's view of the bus. */
export function pluginContext(l: LoadedPlugin, h: PluginHost): PluginContext<object> {
  const name = l.def.name;
  const where = `${h.site.file}: plugin ${name}`;
  const netApi = pluginNet(l, {
    plugin: name,
    where,
    defaultHost: h.gateway.listenHost,
    publicHost: h.gateway.publicHost,
    ports: h.ports,
    bodyLimit: h.gateway.bodyLimit,
    keepAliveTimeoutMs: h.gateway.httpKeepAliveSec * 1000,
    apps: h.apps,
    auth: h.auth,
    connections: h.connections,
    tls: h.tls,
    cluster: h.cluster,
    slices: h.slices,
    holdChannel: h.holdChannel,
  });
  const stores = h.stores;
  const dataDir = h.site.dataDir;
  const c = h.container.createChildContainer();
  c.registerInstance(TOKENS.PluginName, name);
  l.bus = c.resolve<CoreMediaBus>(TOKENS.Bus).viewFor(name, l.log);
  return {
    name,
    config: l.config,
    log: l.log,
    requestLog: requestLogFor(l.log, h.gateway.requestLogLevel),
    health: h.health.forPlugin(name),
    site: h.site,
    routes: h.api.routesFor(name, apiAddress(h.site.apiBase)),
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
    services: h.services.viewFor(l.def, c),
    workers: h.broadcasts.for(name),
  };
}

/**
 * Stops one plugin: its own stop() (a failure is logged, the rest goes on), then what it holds on the bus, its HTTP
 * listeners, the sockets it accepted (so server.close() can finish) and its servers, then its health marks.
 */
export async function stopPlugin(l: LoadedPlugin, health: HealthState | undefined): Promise<void> {
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
      s.close(() => resolve());
    }).catch(() => undefined);
  }
  health?.clearPlugin(l.def.name);
  l.log.debug('plugin stopped');
}
