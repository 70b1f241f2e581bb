/**
 * Play URLs (decisions.md): `rtsp://{host}:{port}/live/{stream}?reqId=..&token=..[&via=..]`, and the track URLs this
 * server writes into its SDP as absolute `a=control` values: `rtsp://{host}:{port}/live/{stream}/trackID={n}?reqId=..`
 * (with the same query, `via` included: a SETUP reads what its DESCRIBE described).
 *
 * Why absolute controls: clients resolve a relative control by appending `/trackID=n` to the base URL, after its
 * query (ffmpeg, live555), which would put the track into the token. The parser still accepts that form, so a client
 * that ignores absolute controls (or builds its own) works too.
 */
import { playQuery } from '../../../plugin-sdk';

export const APP = 'live';
const STREAM = /^[A-Za-z0-9_.~-]{1,128}$/;
const TRACK_SUFFIX = /\/trackID=(\d{1,3})$/;

export interface PlayTarget {
  stream: string;
  reqId: string;
  token: string;
  /** the track a SETUP names; undefined for the aggregate (the whole presentation) */
  track?: number;
  /** host[:port] as the client wrote it, when the URI is absolute */
  host?: string;
  /** the whole query, for `via` (playVia) */
  query: URLSearchParams;
}

/** The play target of a request URI, or undefined when it is not a play URL of this server. */
export function parsePlayUri(uri: string): PlayTarget | undefined {
  let rest: string;
  let host: string | undefined;
  const abs = /^rtsps?:\/\/([^/?#]*)(.*)$/i.exec(uri);
  if (abs) {
    // credentials in the authority mean nothing here (the token is in the query): drop them
    host = abs[1].slice(abs[1].lastIndexOf('@') + 1);
    rest = abs[2] || '/';
  } else if (uri.startsWith('/')) {
    rest = uri;
  } else {
    return undefined;
  }
  let track: number | undefined;
  const trailing = TRACK_SUFFIX.exec(rest);
  if (trailing) {
    track = Number(trailing[1]);
    rest = rest.slice(0, trailing.index);
  }
  const q = rest.indexOf('?');
  let path = q < 0 ? rest : rest.slice(0, q);
  const query = q < 0 ? '' : rest.slice(q + 1);
  const inPath = TRACK_SUFFIX.exec(path);
  if (inPath) {
    if (track !== undefined) return undefined;
    track = Number(inPath[1]);
    path = path.slice(0, inPath.index);
  }
  if (path.endsWith('/')) path = path.slice(0, -1);
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return undefined;
  }
  const prefix = `/${APP}/`;
  if (!decoded.startsWith(prefix)) return undefined;
  const stream = decoded.slice(prefix.length);
  if (!STREAM.test(stream)) return undefined;
  const params = new URLSearchParams(query);
  return { stream, reqId: params.get('reqId') ?? '', token: params.get('token') ?? '', track, host, query: params };
}

/** The base URL of a presentation (aggregate PLAY, PAUSE, TEARDOWN). */
export function presentationUrl(host: string, stream: string, reqId: string, token: string, via?: string): string {
  return `rtsp://${host}/${APP}/${stream}?${playQuery(reqId, token, via)}`;
}

/** A track's URL: what the SDP gives as its `a=control` and RTP-Info names. */
export function trackUrl(host: string, stream: string, track: number, reqId: string, token: string, via?: string): string {
  return `rtsp://${host}/${APP}/${stream}/trackID=${track}?${playQuery(reqId, token, via)}`;
}
