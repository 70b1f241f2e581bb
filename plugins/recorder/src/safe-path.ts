/**
 * Maps the `{path}` of GET /strm/record/file/{path} to a file under the store root, refusing anything that
 * could name a file elsewhere. The route answers 404 for null and never touches what was asked for.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Characters catalog paths are made of (reqId and simNo charsets); everything else is refused. */
const SEGMENT_PATTERN = /^[0-9A-Za-z._~$-]+$/;
/** Encoded '.', '/', '\', NUL, and '%' itself: the last stops double encoding such as %252e. */
const ENCODED_TRICK = /%(2e|2f|5c|00|25)/i;
const MAX_PATH_LENGTH = 1024;

export interface SafePathOptions {
  /** File extensions that may be served, without the dot; default ['flv'], so a catalog database or any
   * other file kept under the root is never downloadable. */
  extensions?: readonly string[];
}

/**
 * The validated relative path (`/`-separated, percent-decoded) or null. Pure: no file system access.
 * Refuses `.`/`..`/empty segments, absolute paths, backslashes, NUL, encoded dots, slashes, backslashes
 * and percent signs in any case, characters outside the catalog's path charset, and other extensions.
 */
export function decodeStoredPath(requested: string, opts: SafePathOptions = {}): string | null {
  if (typeof requested !== 'string' || requested.length === 0 || requested.length > MAX_PATH_LENGTH) return null;
  if (requested.startsWith('/') || requested.includes('\\') || requested.includes('\0')) return null;
  if (ENCODED_TRICK.test(requested)) return null;
  const segments: string[] = [];
  for (const raw of requested.split('/')) {
    let seg: string;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      return null; // malformed escape
    }
    if (seg === '.' || seg === '..' || !SEGMENT_PATTERN.test(seg)) return null;
    segments.push(seg);
  }
  const last = segments[segments.length - 1]!;
  const exts = opts.extensions ?? ['flv'];
  if (!exts.some((e) => last.length > e.length + 1 && last.endsWith('.' + e))) return null;
  return segments.join('/');
}

/** The reqId a catalog path names (`…/{reqId}.flv`), for the route's ownership check; null if none. */
export function reqIdOfPath(relPath: string): string | null {
  const base = relPath.slice(relPath.lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(0, dot) : null;
}

function isInside(realRoot: string, real: string): boolean {
  const prefix = realRoot.endsWith(path.sep) ? realRoot : realRoot + path.sep;
  return real.startsWith(prefix) && real.length > prefix.length;
}

/**
 * Absolute real path of the requested regular file, or null when the request is refused by
 * decodeStoredPath, the file is missing or not a regular file, or its real path (symlinks followed, at
 * any level) is outside the real path of the root.
 */
export async function resolveStoredFile(root: string, requested: string, opts: SafePathOptions = {}): Promise<string | null> {
  const rel = decodeStoredPath(requested, opts);
  if (rel === null) return null;
  let realRoot: string;
  let real: string;
  try {
    realRoot = await fs.promises.realpath(root);
    real = await fs.promises.realpath(path.join(realRoot, ...rel.split('/')));
  } catch {
    return null;
  }
  if (!isInside(realRoot, real)) return null;
  try {
    const st = await fs.promises.stat(real);
    return st.isFile() ? real : null;
  } catch {
    return null;
  }
}
