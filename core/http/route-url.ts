import type { UrlOptions } from '../../plugin-sdk/http';

/** Where clients reach a listener: what `Routes.url` writes when the caller gives no host or scheme. */
export interface PublicAddress {
  host: string;
  port: number;
  tls: boolean;
}

const DEFAULT_PORT: Readonly<Record<string, number>> = { http: 80, ws: 80, https: 443, wss: 443 };

/** The port clients reach the API at: the one apiBase names, or its scheme's default. */
export function apiPortOf(apiBase: string): number {
  const u = new URL(apiBase);
  return Number(u.port) || (u.protocol === 'https:' ? 443 : 80);
}

/** Where clients reach the API: apiBase's host, port and scheme (a front of the site's own may answer there). */
export function apiAddress(apiBase: string): PublicAddress {
  const u = new URL(apiBase);
  return { host: u.hostname, port: apiPortOf(apiBase), tls: u.protocol === 'https:' };
}

/** A URL of a route on a listener reached at `at`: the port is left out when it is the scheme's default. */
export function routeUrl(at: PublicAddress, path: string, opts: UrlOptions = {}): string {
  if (!path.startsWith('/')) throw new TypeError(`routes.url: the path '${path}' must start with /`);
  const scheme = opts.scheme ?? (at.tls ? 'https' : 'http');
  const raw = opts.host ?? at.host;
  // an IPv6 literal goes in brackets
  const host = raw.includes(':') && !raw.startsWith('[') ? `[${raw}]` : raw;
  const port = DEFAULT_PORT[scheme] === at.port ? '' : `:${at.port}`;
  const query = Object.entries(opts.query ?? {})
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  return `${scheme}://${host}${port}${path}${query ? `?${query}` : ''}`;
}
