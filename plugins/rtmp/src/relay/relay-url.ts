/**
 * Where a relay publishes: an `rtmp://` or `rtmps://` URL split as ffmpeg splits it. The stream key is the last path
 * segment with the query (`rtmp://a.rtmp.youtube.com/live2/KEY`, `rtmp://host/app/name?secret=…`); the `app` is
 * the path before it (it may hold slashes, e.g. `app/instance`); tcUrl is the URL up to the app.
 *
 * The key is a secret of the caller's channel on the platform: it is never logged nor shown. `redacted` is what
 * logs, status and notices say instead.
 */
import { invalidParam } from '../../../../plugin-sdk';

export const MAX_URL_LENGTH = 2048;
const DEFAULT_PORT: Record<string, number> = { 'rtmp:': 1935, 'rtmps:': 443 };
/** what the route's -7 answer says after ``Invalid parameter `url`.`` */
export const URL_DETAIL = 'Give rtmp://host[:port]/app/streamKey or rtmps://… (the stream key is the last path segment and its query).';

export interface RelayTarget {
  /** the URL as compared: one relay per (reqId, canonical) */
  readonly canonical: string;
  readonly secure: boolean;
  /** as written, without brackets for IPv6 */
  readonly host: string;
  readonly port: number;
  readonly app: string;
  readonly tcUrl: string;
  /** the secret part: never log it */
  readonly streamKey: string;
  /** `rtmp://host:port/app/***`: for logs, status and notices */
  readonly redacted: string;
}

/** Parses the route's `url`; throws the -7 answer naming `url`. */
export function parseRelayUrl(value: unknown): RelayTarget {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_URL_LENGTH) throw invalidParam('url', URL_DETAIL);
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw invalidParam('url', URL_DETAIL);
  }
  const port = u.port === '' ? DEFAULT_PORT[u.protocol] : Number(u.port);
  if (port === undefined || port < 1 || u.hostname === '') throw invalidParam('url', URL_DETAIL);
  // ffmpeg would answer an Adobe or Limelight auth challenge with these; we do not, and would only leak them
  if (u.username !== '' || u.password !== '') throw invalidParam('url', 'Credentials before the host are not supported: give the stream key in the path.');
  if (u.hash !== '') throw invalidParam('url', URL_DETAIL);
  const segments = u.pathname.split('/').slice(1);
  const last = segments.pop() ?? '';
  const app = segments.join('/');
  if (app === '' || last === '' || segments.some((s) => s === '')) throw invalidParam('url', URL_DETAIL);
  const scheme = u.protocol.slice(0, -1);
  const hostPort = `${u.hostname}:${port}`;
  return {
    canonical: `${scheme}://${hostPort}/${app}/${last}${u.search}`,
    secure: scheme === 'rtmps',
    host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    app,
    tcUrl: `${scheme}://${hostPort}/${app}`,
    streamKey: last + u.search,
    redacted: `${scheme}://${hostPort}/${app}/***`,
  };
}
