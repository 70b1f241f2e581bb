import type { TimedToken } from './token-store';

export type TimedTokenBodyResult =
  | { ok: true; tokens: TimedToken[] }
  /** field: the first bad field, e.g. `tokens[1].expiredAt`; message: `Invalid parameter \`<field>\`: <why>.` */
  | { ok: false; field: string; message: string };

/** One token now, or old and new during a rotation: the timedToken field itself carries at most two. */
export const MAX_TOKENS = 2;
export const MAX_TOKEN_LENGTH = 256;
// yyyy-mm-ddTHH:mm:ss then Z or a numeric offset (the spec's responses carry one, so clients may echo it).
export const EXPIRED_AT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(Z|[+-]\d{2}:?\d{2})$/;

/** Validates the admin body `{"tokens":[{"token":"..","expiredAt":"yyyy-mm-ddTHH:mm:ssZ"}]}`. */
export function parseTimedTokenBody(body: unknown): TimedTokenBodyResult {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return bad('tokens', 'the body must be an object with a tokens array');
  const list = (body as { tokens?: unknown }).tokens;
  if (!Array.isArray(list)) return bad('tokens', 'must be an array');
  if (list.length === 0 || list.length > MAX_TOKENS) return bad('tokens', `must hold 1 to ${MAX_TOKENS} tokens`);
  const tokens: TimedToken[] = [];
  for (let i = 0; i < list.length; i++) {
    const item = list[i] as { token?: unknown; expiredAt?: unknown } | null;
    const at = `tokens[${i}]`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return bad(at, 'must be an object with token and expiredAt');
    const { token, expiredAt } = item;
    if (typeof token !== 'string' || token.length === 0) return bad(`${at}.token`, 'must be a non-empty string');
    if (token.length > MAX_TOKEN_LENGTH) return bad(`${at}.token`, `must be at most ${MAX_TOKEN_LENGTH} characters`);
    // A comma separates the two tokens of a rotation in the request field; blanks are trimmed there.
    if (!/^[\x21-\x7e]+$/.test(token) || token.includes(',')) return bad(`${at}.token`, 'must be printable ASCII without spaces or commas');
    if (tokens.some((t) => t.token === token)) return bad(`${at}.token`, 'is given twice');
    const when = typeof expiredAt === 'string' ? parseExpiredAt(expiredAt) : undefined;
    if (!when) return bad(`${at}.expiredAt`, 'must be a date-time yyyy-mm-ddTHH:mm:ssZ');
    tokens.push({ token, expiredAt: when });
  }
  return { ok: true, tokens };
}

/** `yyyy-mm-ddTHH:mm:ssZ` (or with a ±HH:MM offset) as a Date; undefined when malformed or not a real instant. */
export function parseExpiredAt(text: string): Date | undefined {
  const m = EXPIRED_AT.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number);
  // Date.parse rolls 2025-02-30 over into March; rebuilding the fields catches it.
  const check = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  if (check.getUTCFullYear() !== y || check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) return undefined;
  const at = Date.parse(m[7] === 'Z' ? text : text.replace(/([+-]\d{2})(\d{2})$/, '$1:$2'));
  return Number.isNaN(at) ? undefined : new Date(at);
}

function bad(field: string, why: string): TimedTokenBodyResult {
  return { ok: false, field, message: `Invalid parameter \`${field}\`: ${why}.` };
}
