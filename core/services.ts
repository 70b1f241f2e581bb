import type { DependencyContainer } from 'tsyringe';
import type { PluginDefinition } from '../plugin-sdk/plugin';
import type { ServiceToken, Services } from '../plugin-sdk/services';
import { BootError } from './config';

/** The container key of a service (a symbol per id, shared by every kernel of the process). */
const keyOf = (id: string): symbol => Symbol.for(`jt1078-gateway.service.${id}`);

/**
 * Which plugin of the site provides which service, checked before anything starts; the services themselves live
 * in the kernel's tsyringe container (a provider registers there, a user resolves from its own child container).
 */
export class ServiceRegistry {
  /** service id -> providing plugin */
  private readonly providers = new Map<string, string>();
  private container: DependencyContainer | undefined;
  private readonly provided = new Set<string>();

  constructor(
    private readonly siteFile: string,
    defs: ReadonlyArray<PluginDefinition<object>>,
  ) {
    for (const d of defs) {
      for (const t of d.provides ?? []) {
        const other = this.providers.get(t.id);
        if (other)
          throw new BootError(`${siteFile}: plugin ${d.name}: provides service ${t.id}, which plugin ${other} provides too (keep one of them on the site)`);
        this.providers.set(t.id, d.name);
      }
    }
    for (const d of defs) {
      for (const t of d.needs ?? []) {
        if (this.providers.has(t.id)) continue;
        const from = t.providedBy ? ` (plugin ${t.providedBy} provides it; add it to the site's plugins)` : '';
        throw new BootError(`${siteFile}: plugin ${d.name}: needs service ${t.id}${from}, which no plugin on this site provides`);
      }
    }
  }

  attach(container: DependencyContainer): void {
    this.container = container;
  }

  /** plugins that must start before this one because it needs or uses what they provide */
  providersFor(def: PluginDefinition<object>): string[] {
    const out: string[] = [];
    for (const t of [...(def.needs ?? []), ...(def.uses ?? [])]) {
      const p = this.providers.get(t.id);
      if (p && p !== def.name && !out.includes(p)) out.push(p);
    }
    return out;
  }

  /** After a provider's setup: everything it declared must be there, or its users would fail later. */
  checkProvided(def: PluginDefinition<object>): void {
    for (const t of def.provides ?? []) {
      if (!this.provided.has(t.id)) {
        throw new BootError(
          `${this.siteFile}: plugin ${def.name}: declares it provides service ${t.id}, but its setup did not call ctx.services.provide for it`,
        );
      }
    }
  }

  viewFor(def: PluginDefinition<object>, child: DependencyContainer): Services {
    const name = def.name;
    const declared = (list: ReadonlyArray<ServiceToken<unknown>> | undefined, t: ServiceToken<unknown>) => (list ?? []).some((x) => x.id === t.id);
    const mayUse = (t: ServiceToken<unknown>) => declared(def.needs, t) || declared(def.uses, t) || declared(def.provides, t);
    const lookup = <T>(t: ServiceToken<T>): T | undefined => {
      const key = keyOf(t.id);
      return child.isRegistered(key, true) ? child.resolve<T>(key) : undefined;
    };
    return {
      provide: <T>(t: ServiceToken<T>, impl: T) => {
        if (!declared(def.provides, t)) throw new Error(`plugin ${name}: provide(${t.id}): add it to the plugin's provides`);
        if (this.provided.has(t.id)) throw new Error(`plugin ${name}: service ${t.id} is provided already`);
        if (impl === undefined || impl === null) throw new Error(`plugin ${name}: provide(${t.id}): no implementation given`);
        this.container!.registerInstance(keyOf(t.id), impl);
        this.provided.add(t.id);
      },
      get: <T>(t: ServiceToken<T>): T => {
        if (!mayUse(t)) throw new Error(`plugin ${name}: get(${t.id}): add it to the plugin's needs (or uses)`);
        const impl = lookup(t);
        if (impl === undefined) {
          const p = this.providers.get(t.id);
          throw new Error(
            `plugin ${name}: service ${t.id} is not available${p ? ` (plugin ${p} has not provided it yet)` : ' (no plugin on this site provides it)'}`,
          );
        }
        return impl;
      },
      find: <T>(t: ServiceToken<T>): T | undefined => {
        if (!mayUse(t)) throw new Error(`plugin ${name}: find(${t.id}): add it to the plugin's uses (or needs)`);
        return lookup(t);
      },
    };
  }
}
