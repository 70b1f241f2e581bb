/**
 * Everything boot reads from the site and the environment, checked before anything starts: the gateway's keys, its
 * lists (applications, allow lists, listener limits), the TLS files, every plugin's config and start order, the
 * services they need, GW_ variable names and the data folder. A mistake stops boot with one BootError naming the
 * site file and the key, while nothing is listening or written yet.
 */
import * as fs from 'node:fs';
import type * as net from 'node:net';
import * as path from 'node:path';
import { BootError, buildConfig, checkEnvNames, type StrayEnv } from './config';
import { parseAllowList } from './address-lists';
import { parseApplications, type ApplicationEntry } from './gateway-applications';
import { GatewayConfig } from './gateway-config';
import { parseListenerLimits, type ListenerLimits } from './listener-limits';
import { loadTlsFiles, type TlsFiles } from './tls-files';
import { loadSite, type SiteSpec } from './site';
import { ServiceRegistry } from './services';
import { PluginResolver, startOrder, type ResolvedPlugin } from './plugin-resolution';
import type { PluginDefinition } from '../plugin-sdk/plugin';

export interface SiteChecksOptions {
  /** site name, folder or site.json path; or a site object (tests) */
  site?: string | SiteSpec;
  env: NodeJS.ProcessEnv;
  repoRoot: string;
  pluginDefs?: Record<string, PluginDefinition<object>>;
  freePorts?: boolean;
}

/** The site as boot uses it, every part checked. */
export interface CheckedSite {
  site: SiteSpec;
  gateway: GatewayConfig;
  appEntries: ApplicationEntry[];
  metricsAllow: net.BlockList;
  perAddressExempt: net.BlockList;
  listenerLimits: Map<string, ListenerLimits>;
  tls: TlsFiles | undefined;
  plugins: PluginResolver;
  services: ServiceRegistry;
  /** the plugins in start order */
  ordered: ResolvedPlugin[];
  /** GW_ variables for nothing on this site: warned about once logging is up */
  strayEnv: StrayEnv[];
  /** gateway.dataDir, absolute, made and writable */
  dataDir: string;
}

export function checkSite(o: SiteChecksOptions): CheckedSite {
  const site = typeof o.site === 'object' ? o.site : loadSite(o.site ?? o.env.GW_SITE, o.repoRoot);
  const where = `${site.file}: gateway`;
  const gateway = buildConfig(GatewayConfig, site.gateway, { where, envPrefix: 'GW', env: o.env });
  const appEntries = parseApplications(gateway.applications, where);
  const metricsAllow = parseAllowList(gateway.metricsAllow, where);
  const perAddressExempt = parseAllowList(gateway.perAddressExempt, where, 'perAddressExempt');
  const listenerLimits = parseListenerLimits(gateway.listenerLimits, where);
  const tls = loadTlsFiles(gateway.tlsCertFile, gateway.tlsKeyFile, where);
  const plugins = new PluginResolver(site, { pluginDefs: o.pluginDefs, freePorts: o.freePorts, env: o.env });
  const resolved = plugins.resolveAll();
  const services = new ServiceRegistry(
    site.file,
    resolved.map((r) => r.def),
  );
  const ordered = startOrder(site.file, resolved, services);
  checkGovApplications(
    site.file,
    appEntries,
    resolved.map((r) => r.def.name),
  );
  // a misspelt plugin variable stops boot here, before anything is written; strays are warned about once logging is up
  const strayEnv = checkEnvNames(
    o.env,
    site.file,
    GatewayConfig,
    resolved.map((r) => r.def),
  );
  const dataDir = writableDataDir(site.file, gateway.dataDir);
  return { site, gateway, appEntries, metricsAllow, perAddressExempt, listenerLimits, tls, plugins, services, ordered, strayEnv, dataDir };
}

/**
 * `gov` is only a mark: gov-timed-token's open guard is what demands the timedToken. Without that plugin a gov
 * application would open with no token check at all, which is worse than not booting. (`admin` needs no such
 * check: it only unlocks admin routes, and a site without plugins that serve any simply has none to unlock.)
 */
function checkGovApplications(siteFile: string, apps: ApplicationEntry[], plugins: string[]): void {
  if (plugins.includes('gov-timed-token')) return;
  const i = apps.findIndex((a) => a.gov);
  if (i < 0) return;
  throw new BootError(
    `${siteFile}: gateway: key applications[${i}].gov: application '${apps[i].appId}' is marked gov, but the site does not run ` +
      'the gov-timed-token plugin that checks its timedToken (add {"name": "gov-timed-token"} to plugins, or drop gov)',
  );
}

function writableDataDir(siteFile: string, configured: string): string {
  const dataDir = path.resolve(configured);
  try {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.accessSync(dataDir, fs.constants.W_OK);
  } catch (err) {
    throw new BootError(`${siteFile}: gateway: key dataDir: cannot write to ${dataDir} (${(err as NodeJS.ErrnoException).code})`);
  }
  return dataDir;
}
