/**
 * listenerLimits is a free-form object keyed by listener name, which class-validator cannot check entry by entry, so
 * its shape and its parse live here, shared by boot, the connection guards and the cluster's listeners.
 */
import { BootError } from './config';

/** One listener's caps from the site's listenerLimits; a key left out takes the gateway's (or the plugin's) default. */
export interface ListenerLimits {
  /** 0: the automatic cap of maxConnectionsPerListener */
  maxConnections?: number;
  /** 0: no per-address cap */
  maxConnectionsPerAddress?: number;
}

const LISTENER_NAME = /^[a-z][a-z0-9-]*\.[A-Za-z][A-Za-z0-9]*$/;

/**
 * Checks listenerLimits by hand so a bad entry is named as listenerLimits.<listener>.<key>. Whether each listener
 * exists is known only once the plugins have bound theirs (ConnectionGuard.unknownOverrides).
 */
export function parseListenerLimits(raw: Record<string, unknown>, where: string): Map<string, ListenerLimits> {
  const out = new Map<string, ListenerLimits>();
  for (const [name, v] of Object.entries(raw)) {
    const at = `${where}: key listenerLimits.${name}`;
    if (!LISTENER_NAME.test(name)) throw new BootError(`${at}: a listener is named "<plugin>.<port key>" (e.g. flv-out.port) or gateway.httpPort`);
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new BootError(`${at}: must be an object like {"maxConnectionsPerAddress": 64}`);
    const limits: ListenerLimits = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (k !== 'maxConnections' && k !== 'maxConnectionsPerAddress')
        throw new BootError(`${at}.${k}: unknown key (known: maxConnections, maxConnectionsPerAddress)`);
      if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 10_000_000) throw new BootError(`${at}.${k}: must be an integer from 0 to 10000000`);
      limits[k] = x;
    }
    out.set(name, limits);
  }
  return out;
}
