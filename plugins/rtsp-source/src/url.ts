/**
 * The source URL of an rtspSrc open: where to connect, the credentials to answer a challenge with, and the forms
 * that may be shown (logs, errors, metrics) without the password.
 */
import { isIP } from 'node:net';

export interface SourceUrl {
  tls: boolean;
  host: string;
  port: number;
  /** the URL the requests name: no credentials in it (cameras reject or log them) */
  requestUrl: string;
  user?: string;
  pwd?: string;
  /** the URL for logs and error messages: the user kept, the password and secret-looking query values replaced */
  redacted: string;
}

/** query keys whose values some cameras take as credentials (`?user=admin&password=…`) */
const SECRET_QUERY = /pass|pwd|secret|token|key|auth|sig/i;

/**
 * Splits an rtsp:// or rtsps:// URL. strm-api 3.4.4: credentials in the URL win over `user`/`pwd`, which are then
 * ignored. Throws a plain Error (without the URL) for what open validation should have refused.
 */
export function parseSourceUrl(raw: string, user?: string, pwd?: string): SourceUrl {
  const u = new URL(raw);
  const scheme = u.protocol.toLowerCase();
  if (scheme !== 'rtsp:' && scheme !== 'rtsps:') throw new Error('not an rtsp:// or rtsps:// URL');
  const tls = scheme === 'rtsps:';
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  if (!host) throw new Error('the URL names no host');
  const port = u.port ? Number(u.port) : tls ? 322 : 554;
  let cUser = user || undefined;
  let cPwd = pwd || undefined;
  if (u.username) {
    cUser = safeDecode(u.username);
    cPwd = u.password ? safeDecode(u.password) : undefined;
  }
  u.username = '';
  u.password = '';
  const requestUrl = u.toString();
  const shown = new URL(requestUrl);
  for (const k of [...shown.searchParams.keys()]) if (SECRET_QUERY.test(k)) shown.searchParams.set(k, '***');
  if (cUser) shown.username = encodeURIComponent(cUser);
  return { tls, host, port, requestUrl, user: cUser, pwd: cPwd, redacted: shown.toString() };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** the TLS server name to send: none for an IP address (RFC 6066 forbids it) */
export function tlsServerName(host: string): string | undefined {
  return isIP(host) ? undefined : host;
}

/**
 * Replaces every occurrence of the secrets (as given and URL-encoded) in a text that may have come from the camera
 * or a library: a server that echoes the request line, an error that quotes the URL.
 */
export function redactText(text: string, secrets: ReadonlyArray<string | undefined>): string {
  let out = text;
  for (const s of secrets) {
    if (!s || s.length < 1) continue;
    for (const form of new Set([s, encodeURIComponent(s)])) out = out.split(form).join('***');
  }
  return out;
}
