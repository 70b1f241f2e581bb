/**
 * GET/HEAD /strm/record/file/{path}: a record's FLV file for the application that owns it, with single byte
 * ranges for seeking. Anything else (bad path, another application's record, a file outside the store) is the
 * same 404, decided before the file system is asked about the requested name. A record of the caller's that
 * another gateway node recorded (its row names that node's apiBase) and that this node's store does not hold
 * answers 307 to the same path on that node. `?format=mp4` answers the file as MP4 (mp4-route.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { ErrCode, GatewayError, type RouteRequest } from '../../../plugin-sdk';
import { normaliseApiBase, type RecordCatalog, type StoredRecord } from './catalog';
import { recordAudio, recordFormat, serveMp4, type Mp4LayoutCache, type RecordAudio, type RecordFormat } from './mp4-route';
import { parseRange } from './range';
import { decodeStoredPath, reqIdOfPath, resolveStoredFile } from './safe-path';
import { storedRecordUrl } from './stored-av';
import { downloadEnd } from './download-end';

export interface FileRouteOptions {
  /** undefined while the catalog cannot be opened (a degraded recorder): every download answers -3 then */
  catalog: () => RecordCatalog | undefined;
  storeRoot: string;
  /** this node's apiBase: a row naming another one is redirected there when its file is not in this store */
  apiBase: string;
  log: Logger;
  /** layouts of the MP4 form (format=mp4) */
  mp4Cache: Mp4LayoutCache;
  /** downloads in progress, for the metric */
  onStart?: () => void;
  onEnd?: () => void;
}

const openAsync = promisify(fs.open);
const fstatAsync = promisify(fs.fstat);
const closeAsync = promisify(fs.close);

const notFound = (): GatewayError => new GatewayError(ErrCode.RECORD_NOT_FOUND, 'Not found.');

/** true when the store has nothing at all at the record's path (not a refused name: that stays a 404 here) */
async function absent(storeRoot: string, rel: string): Promise<boolean> {
  try {
    await fs.promises.lstat(path.join(storeRoot, ...rel.split('/')));
    return false;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR';
  }
}

/**
 * Where the record's file is, when another node recorded it: its url there, with the request's query string.
 * undefined for rows of this node and rows from before rows named their node.
 */
function elsewhere(rec: StoredRecord, ownApiBase: string, rawUrl: string | undefined): string | undefined {
  if (rec.apiBase === null || normaliseApiBase(rec.apiBase) === normaliseApiBase(ownApiBase)) return undefined;
  const q = rawUrl?.indexOf('?') ?? -1;
  return storedRecordUrl(rec, ownApiBase) + (q >= 0 ? rawUrl!.slice(q) : '');
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(307, { Location: location, 'Cache-Control': 'private, no-cache', 'Content-Length': 0 });
  res.end();
}

/** Where a route's path starts: the Basic-auth route, or the signed one (signed-link.ts) of the same files. */
export const FILE_PREFIX = '/strm/record/file/';
export const SIGNED_PREFIX = '/strm/record/signed/';

export function recordFileHandler(opts: FileRouteOptions): (req: RouteRequest, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    // a bad format or audio says nothing about any record: checked before anything is looked up
    const format = recordFormat(req.query);
    const audio = recordAudio(req.query);
    await serveRecordFile(opts, req, res, req.app!.appId, format, FILE_PREFIX, audio);
  };
}

/**
 * The record file at `req.rest` for application `appId`, as `format` (the MP4's audio as `audio`; the FLV is always
 * the file as stored). `prefix`: the route's own, for a redirect to the node that holds the file.
 */
export async function serveRecordFile(
  opts: FileRouteOptions,
  req: RouteRequest,
  res: ServerResponse,
  appId: string,
  format: RecordFormat,
  prefix: string,
  audio: RecordAudio,
): Promise<void> {
  const rel = decodeStoredPath(req.rest);
  if (rel === null) throw notFound();
  const reqId = reqIdOfPath(rel);
  const catalog = opts.catalog();
  if (!catalog) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record catalog is not available.');
  const rec = reqId ? await catalog.getByReqId(appId, reqId) : null;
  // The owner check comes first, so a name that is not one of the caller's records never reaches the disk.
  if (!rec || rec.path !== rel) throw notFound();
  const real = await resolveStoredFile(opts.storeRoot, req.rest);
  if (!real) {
    // recorded by another node of the fleet (the catalog is shared, the stores are not): send the owner there
    const there = elsewhere(rec, opts.apiBase, req.raw.url);
    if (there !== undefined && (await absent(opts.storeRoot, rel))) {
      redirect(res, there.replace(FILE_PREFIX, prefix));
      return;
    }
    throw notFound();
  }
  // A plain descriptor rather than a FileHandle: nothing but this code closes it, so a leak would show.
  let fd: number;
  try {
    fd = await openAsync(real, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch {
    throw notFound();
  }
  let handedOver = false;
  try {
    const st = await fstatAsync(fd);
    if (!st.isFile()) throw notFound();
    if (format === 'mp4') {
      const close = (): void => {
        fs.close(fd, () => undefined);
      };
      const open = { real, fd, size: st.size, mtime: st.mtime, reqId: reqId!, growing: rec.state === 'recording', audio, close };
      handedOver = await serveMp4(req, res, open, { cache: opts.mp4Cache, log: opts.log, onStart: opts.onStart, onEnd: opts.onEnd });
      return;
    }
    handedOver = serveFlv(opts, req, res, fd, st, reqId!);
  } finally {
    if (!handedOver) await closeAsync(fd).catch(() => undefined);
  }
}

/** the FLV as stored; true when the descriptor went to the response */
function serveFlv(opts: FileRouteOptions, req: RouteRequest, res: ServerResponse, fd: number, st: fs.Stats, reqId: string): boolean {
  // A recording in progress keeps growing: this response serves the bytes there are now.
  const size = st.size;
  const range = parseRange(typeof req.headers.range === 'string' ? req.headers.range : undefined, size);
  const headers: Record<string, string | number> = {
    'Content-Type': 'video/x-flv',
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'private, no-cache',
    'Last-Modified': st.mtime.toUTCString(),
    'Content-Disposition': `inline; filename="${reqId}.flv"`,
  };
  if (range.status === 416) {
    res.writeHead(416, { ...headers, 'Content-Range': range.contentRange, 'Content-Length': 0 });
    res.end();
    return false;
  }
  const start = range.status === 206 ? range.start : 0;
  const end = range.status === 206 ? range.end : size - 1;
  const length = size === 0 ? 0 : end - start + 1;
  if (range.status === 206) headers['Content-Range'] = range.contentRange;
  headers['Content-Length'] = length;
  res.writeHead(range.status, headers);
  if (req.method === 'HEAD' || length === 0) {
    res.end();
    return false;
  }
  const body = fs.createReadStream('', { fd, start, end, autoClose: true });
  opts.onStart?.();
  // pipeline destroys the file stream (closing the fd) when the client goes away mid-transfer
  const ended = downloadEnd(body, opts.onEnd);
  pipeline(body, res, (err) => {
    ended();
    if (err && (err as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') {
      opts.log.warn({ reqId, err: err.message }, 'record download ended early');
    }
  });
  return true;
}
