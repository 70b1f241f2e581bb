/**
 * What a JSON route's body must be before the route sees it: a JSON content type (a browser sends a cross-origin
 * text/plain or form POST without a preflight, with the credentials it has cached for this host, while
 * application/json needs the preflight this API never grants), at most bodyLimit bytes (refused as soon as the
 * declared length or the bytes read pass it), one JSON object, and well-formed Unicode throughout.
 */
import type * as http from 'node:http';
import { ErrCode, GatewayError, invalidParam } from '../../plugin-sdk/errors';

/** the body is over the limit: the server answers 413 and stops reading */
export class BodyTooLarge extends Error {}

/** a JSON content type: application/json or a +json subtype, parameters (charset) allowed */
export function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false;
  const type = header.split(';')[0].trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(type);
}

/** a lone UTF-16 surrogate: what JSON's \u escapes can carry but no URL, header or UTF-8 log line can */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/**
 * The path (`user.token`, `reqIds[1]`) of the first string in document order, key or value, that is not well-formed
 * Unicode. Iterative: a 64 KiB body can nest deeper than the call stack.
 */
export function firstIllFormed(root: unknown): string | undefined {
  const stack: Array<{ v: unknown; path: string }> = [{ v: root, path: '' }];
  while (stack.length) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      if (!isWellFormed(v)) return path;
      continue;
    }
    if (!v || typeof v !== 'object') continue;
    const children: Array<{ v: unknown; path: string }> = [];
    if (Array.isArray(v)) {
      v.forEach((x, i) => children.push({ v: x, path: `${path}[${i}]` }));
    } else {
      for (const [k, x] of Object.entries(v)) {
        // the name is shown to the caller and logged: make it printable first
        const name = k.replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
        const p = path ? `${path}.${name}` : name;
        if (!isWellFormed(k)) return p;
        children.push({ v: x, path: p });
      }
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
  return undefined;
}

/** The request's body as a JSON object; throws BodyTooLarge, or a GatewayError (400) saying what is wrong with it. */
export async function readJsonBody(req: http.IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new GatewayError(ErrCode.BAD_REQUEST, 'Body is not valid JSON.', 400);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new GatewayError(ErrCode.BAD_REQUEST, 'Body must be a JSON object.', 400);
  }
  // JSON can escape a lone surrogate; it would throw in encodeURIComponent (a play URL) or turn into U+FFFD in a
  // header or log line, so no route sees one
  const bad = firstIllFormed(parsed);
  if (bad !== undefined) throw invalidParam(bad, 'It is not valid Unicode (lone surrogate).');
  return parsed as Record<string, unknown>;
}
