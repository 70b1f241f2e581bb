/**
 * Plugin services: what one plugin offers others (a terminal's link, an RTSP stack), typed and declared.
 *
 * A service is named by a token made once, in the SDK or in a module both plugins import:
 *   export const TERMINAL_LINKS = defineService<TerminalLinks>('terminal-links', { providedBy: 'jt1078-ingest' });
 * The provider lists it in `provides` and calls `ctx.services.provide(TERMINAL_LINKS, impl)` in its setup; a user
 * lists it in `needs` (boot stops if no plugin on the site provides it) or `uses` (optional) and calls
 * `ctx.services.get(TERMINAL_LINKS)` (or `find`). Either implies start order: providers start first.
 */

export interface ServiceToken<T> {
  /** lower-case letters, digits and dashes: what boot errors and logs call it */
  readonly id: string;
  /** the plugin that usually provides it, named when a site lacks it */
  readonly providedBy?: string;
  /** (type only) what the service is */
  readonly __type?: T;
}

export function defineService<T>(id: string, opts: { providedBy?: string } = {}): ServiceToken<T> {
  if (!/^[a-z][a-z0-9-]*$/.test(id)) throw new Error(`service id '${id}' must be lower-case letters, digits and dashes`);
  return Object.freeze({ id, providedBy: opts.providedBy });
}

export interface Services {
  /** offers a service this plugin declared in `provides` (once per token) */
  provide<T>(token: ServiceToken<T>, impl: T): void;
  /** a service this plugin declared in `needs` (or in `uses`, and provided): throws otherwise */
  get<T>(token: ServiceToken<T>): T;
  /** a service declared in `uses` (or `needs`), or undefined when no plugin on the site provides it */
  find<T>(token: ServiceToken<T>): T | undefined;
}
