/**
 * Finding a site's plugins and the order they start in.
 *
 * A plugin entry names a module (relative to the site) or a plugin under plugins/<name>; the test kit's in-process
 * definitions come before both. Every config is built here, before anything starts, so a typo never leaves half a
 * gateway running. Plugins start after what they require and after the providers of the services they need or use;
 * a cycle is a boot error that shows the chain.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BootError, buildConfig, envNameFor, freePortOverrides } from './config';
import type { SiteSpec } from './site';
import type { ServiceRegistry } from './services';
import type { PluginDefinition } from '../plugin-sdk/plugin';

/** A plugin's definition and its config, built and checked. */
export interface ResolvedPlugin {
  def: PluginDefinition<object>;
  config: object;
}

export interface ResolverOptions {
  /** extra plugin definitions by name (the test kit's in-process plugins) */
  pluginDefs?: Record<string, PluginDefinition<object>>;
  /** port-like keys the site leaves out bind a free port (the test kit's); the environment still wins */
  freePorts?: boolean;
  env: NodeJS.ProcessEnv;
}

/** Loads the plugin modules a site lists and builds their configs; remembers each module's file for its routers. */
export class PluginResolver {
  /** the plugin module files by plugin name (their router modules are found beside them) */
  private readonly modules = new Map<string, string>();

  constructor(
    private readonly site: SiteSpec,
    private readonly opts: ResolverOptions,
  ) {}

  /** Every plugin of the site with its config: the first bad module or value throws a BootError naming it. */
  resolveAll(): ResolvedPlugin[] {
    return this.site.plugins.map((entry) => {
      const def = this.definition(entry);
      const prefix = envNameFor('GW', def.name);
      const given = entry.config;
      // a non-object config is left as it is, for buildConfig to refuse with its usual message
      const fileValues =
        this.opts.freePorts && given !== null && typeof given === 'object' && !Array.isArray(given) ? { ...freePortOverrides(def.config), ...given } : given;
      const config = def.config
        ? buildConfig(def.config, fileValues, {
            where: `${this.site.file}: plugin ${def.name}`,
            envPrefix: prefix,
            envAliases: def.env as Record<string, string>,
            env: this.opts.env,
          })
        : {};
      return { def, config };
    });
  }

  private definition(entry: SiteSpec['plugins'][number]): PluginDefinition<object> {
    const where = `${this.site.file}: plugin ${entry.name}`;
    const inline = this.opts.pluginDefs?.[entry.name];
    if (inline) return inline;
    const file = entry.module ? path.resolve(this.site.dir, entry.module) : path.join(__dirname, '..', 'plugins', entry.name, 'index.js');
    if (!entry.module && !fs.existsSync(file)) throw new BootError(`${where}: unknown plugin (no module at plugins/${entry.name})`);
    this.modules.set(entry.name, require.resolve(file));
    let mod: { default?: PluginDefinition<object> };
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- the plugin's module is known only at run time, and boot loads it synchronously
      mod = require(file) as typeof mod;
    } catch (err) {
      throw new BootError(`${where}: cannot load module ${file}: ${(err as Error).message.split('\n')[0]}`);
    }
    const def = mod.default;
    if (!def || typeof def.setup !== 'function' || typeof def.name !== 'string')
      throw new BootError(`${where}: module does not export a plugin (default export of definePlugin)`);
    if (def.name !== entry.name) throw new BootError(`${where}: module declares plugin '${def.name}'`);
    return def;
  }

  /** a plugin's router modules (plugin-sdk/plugin.ts `routers`), resolved beside its module file */
  routerModules(def: PluginDefinition<object>): Record<string, string> | undefined {
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
}

/** The plugins in the order they start: each after the plugins it requires and the providers of its services. */
export function startOrder(siteFile: string, entries: ResolvedPlugin[], services: ServiceRegistry): ResolvedPlugin[] {
  const byName = new Map(entries.map((e) => [e.def.name, e]));
  const out: ResolvedPlugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (e: ResolvedPlugin, chain: string[]) => {
    const s = state.get(e.def.name);
    if (s === 'done') return;
    if (s === 'visiting') throw new BootError(`${siteFile}: plugin ${e.def.name}: circular requires (${[...chain, e.def.name].join(' -> ')})`);
    state.set(e.def.name, 'visiting');
    for (const dep of e.def.requires ?? []) {
      const d = byName.get(dep);
      if (!d) throw new BootError(`${siteFile}: plugin ${e.def.name}: requires plugin ${dep}, which the site does not list`);
      visit(d, [...chain, e.def.name]);
    }
    // a plugin that needs or uses a service starts after the plugin that provides it
    for (const provider of services.providersFor(e.def)) visit(byName.get(provider)!, [...chain, e.def.name]);
    state.set(e.def.name, 'done');
    out.push(e);
  };
  for (const e of entries) visit(e, []);
  return out;
}
