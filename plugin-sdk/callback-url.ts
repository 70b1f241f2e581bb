/**
 * A request's `cb`: the base address of the application's callback interface, possibly carrying Basic
 * credentials in its authority (`https://user:pwd@host/base`). Notices go to `<cb>/strm_notif`.
 *
 * Here rather than in callback-notifier because the kernel's open validation uses the same parser: an open must
 * refuse every cb the notifier could not deliver to, or the application would wait for notices that never come.
 */
import { Buffer } from 'node:buffer';
export interface ParsedCallback {
  /** `<cb>/strm_notif` without credentials: what is requested */
  target: string;
  /** scheme, host and port: the unit of per-host queueing */
  origin: string;
  /** host name or IP literal, without IPv6 brackets: what the host policy vets */
  hostname: string;
  /** `Basic <base64>` when the cb carried credentials */
  authorization?: string;
  /** the cb for logs: `https://user:***@host/base`, or without user info when it had none */
  redacted: string;
}

export type CallbackUrlResult = { ok: true; callback: ParsedCallback } | { ok: false; reason: string };

const MAX_CB_LENGTH = 2048;

export function parseCallbackUrl(cb: unknown): CallbackUrlResult {
  if (typeof cb !== 'string' || cb.length === 0) return fail('cb must be a non-empty string');
  if (cb.length > MAX_CB_LENGTH) return fail(`cb is longer than ${MAX_CB_LENGTH} characters`);
  // The WHATWG parser silently strips surrounding blanks and embedded tabs/newlines; a cb like that is a client bug
  // better reported than guessed at.
  // eslint-disable-next-line no-control-regex -- control characters are what it rejects
  if (/[\u0000-\u0020\u007f]/.test(cb)) return fail('cb must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(cb);
  } catch {
    return fail('cb is not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return fail(`cb scheme must be http or https, not ${url.protocol.slice(0, -1)}`);
  }
  if (url.hostname === '') return fail('cb has no host');
  // `<cb>/strm_notif` is a path join; a query or fragment in the base has no place in it (and a secret in a query
  // would end up in logs).
  if (url.search !== '' || cb.includes('?')) return fail('cb must not contain a query');
  if (url.hash !== '' || cb.includes('#')) return fail('cb must not contain a fragment');

  let authorization: string | undefined;
  let userInfo = '';
  if (url.username !== '' || url.password !== '') {
    let user: string;
    let password: string;
    try {
      user = decodeURIComponent(url.username);
      password = decodeURIComponent(url.password);
    } catch {
      return fail('cb credentials are not valid percent-encoding');
    }
    // RFC 7617: the user-id cannot contain a colon, the receiver would split it at the wrong place.
    if (user.includes(':')) return fail('cb user name must not contain a colon');
    authorization = 'Basic ' + Buffer.from(`${user}:${password}`, 'utf8').toString('base64');
    userInfo = `${url.username}:***@`;
  }

  const base = url.pathname.replace(/\/+$/, '');
  const origin = `${url.protocol}//${url.host}`;
  return {
    ok: true,
    callback: {
      target: `${origin}${base}/strm_notif`,
      origin,
      hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      authorization,
      redacted: `${url.protocol}//${userInfo}${url.host}${base}`,
    },
  };
}

function fail(reason: string): CallbackUrlResult {
  return { ok: false, reason };
}
