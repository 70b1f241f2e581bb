/**
 * `format=mp4` of a record file: the MP4 made on the fly from the FLV (mp4-layout.ts), with single byte ranges,
 * HEAD and If-Range. Layouts (the moov and where each sample is) are kept in a small cache, so the range requests
 * a player makes while it plays and seeks cost a read of the FLV each, not a pass over it (README: why on the fly).
 */
import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import type { Logger } from 'pino';
import { ErrCode, GatewayError, invalidParam, type RouteRequest } from '../../../plugin-sdk';
import { indexFlv } from './flv-index';
import { g711Audio, type G711Transcoder } from './g711-aac';
import { aacLayoutOf } from './mp4-aac';
import { layoutOf, mp4Stream, type Mp4Layout } from './mp4-layout';
import { parseRange } from './range';
import { downloadEnd } from './download-end';

export type RecordFormat = 'flv' | 'mp4';
/** the MP4's audio: G.711 as AAC (`aac`, the default) or as it is in the FLV (`as-is`); AAC audio is never touched */
export type RecordAudio = 'aac' | 'as-is';

/** `audio` of the query: absent `aac`; `aac` or `as-is`; anything else (or several) -7 naming it (HTTP 400) */
export function recordAudio(query: URLSearchParams): RecordAudio {
  const all = query.getAll('audio');
  if (all.length === 0) return 'aac';
  if (all.length === 1 && (all[0] === 'aac' || all[0] === 'as-is')) return all[0];
  const err = invalidParam('audio', 'Use `aac` or `as-is`.');
  throw new GatewayError(err.errCode, err.message, 400);
}

/**
 * The MP4 layout of `file`'s first `length` bytes. With `aac`, G.711 audio is encoded as AAC by `transcoder`
 * (without one, or for any other audio, the FLV's samples as they are).
 */
export async function mp4LayoutFor(
  file: string,
  length: number | undefined,
  audio: RecordAudio,
  transcoder: G711Transcoder | undefined,
  log?: Logger,
  reqId?: string,
): Promise<Mp4Layout> {
  const index = await indexFlv(file, { length });
  const g = audio === 'aac' && transcoder ? g711Audio(index) : undefined;
  let audioSamples = 0;
  if (g) for (let i = 0; i < index.samples.count; i++) audioSamples += index.samples.track[i]!;
  if (!g || audioSamples === 0) return layoutOf(index);
  const aac = await transcoder!.transcode(file, index);
  log?.info(
    { reqId, audioSeconds: Math.round(aac.samples / aac.sampleRate), aacFrames: aac.sizes.length, aacBytes: aac.bytes.length, ms: aac.ms },
    'record MP4: G.711 audio encoded as AAC',
  );
  return aacLayoutOf(index, aac, g.law);
}

/** `format` of the query: absent or `flv` the file as stored, `mp4` its MP4; anything else -7 naming it (HTTP 400) */
export function recordFormat(query: URLSearchParams): RecordFormat {
  const all = query.getAll('format');
  if (all.length === 0) return 'flv';
  if (all.length === 1 && (all[0] === 'flv' || all[0] === 'mp4')) return all[0];
  const err = invalidParam('format', 'Use `flv` or `mp4`.');
  throw new GatewayError(err.errCode, err.message, 400);
}

/** while a recording is being written, one snapshot of it answers for this long, so a player's ranges agree */
export const IN_PROGRESS_PIN_MS = 30_000;

interface Entry {
  size: number;
  mtimeMs: number;
  madeAt: number;
  layout: Promise<Mp4Layout>;
  bytes: number;
}

/**
 * Layouts by file and audio choice, least recently used first out; bounded in entries and in bytes (an AAC track
 * counts: ~1.8 MB for 10 minutes). Concurrent requests for one file share one layout, so one index pass and one
 * encode.
 */
export class Mp4LayoutCache {
  private readonly entries = new Map<string, Entry>();
  private held = 0;
  constructor(
    private readonly maxEntries = 32,
    private readonly maxBytes = 64 * 1024 * 1024,
    private readonly now: () => number = Date.now,
    private readonly transcoder?: G711Transcoder,
  ) {}

  /**
   * The layout of `file` as it is now (`size`, `mtimeMs` from the open descriptor). A finished record's layout is
   * reused while the file is unchanged; a recording's (`growing`) for IN_PROGRESS_PIN_MS whatever it grew since.
   */
  get(file: string, size: number, mtimeMs: number, growing: boolean, log: Logger, reqId: string, audio: RecordAudio = 'as-is'): Promise<Mp4Layout> {
    const key = `${audio}\n${file}`;
    const e = this.entries.get(key);
    if (e) {
      const same = e.size === size && e.mtimeMs === mtimeMs;
      const pinned = growing && size >= e.size && this.now() - e.madeAt < IN_PROGRESS_PIN_MS;
      if (same || pinned) {
        this.entries.delete(key);
        this.entries.set(key, e);
        return e.layout;
      }
      this.dropKey(key);
    }
    // the snapshot's length: bytes appended after the fstat are left to the next snapshot
    const layout = mp4LayoutFor(file, size, audio, this.transcoder, log, reqId);
    const entry: Entry = { size, mtimeMs, madeAt: this.now(), layout, bytes: 0 };
    this.entries.set(key, entry);
    layout.then(
      (l) => {
        if (l.stopped)
          log.warn({ reqId, stopped: l.stopped, flvBytes: l.flvLength, fileBytes: size }, 'record file has a tag that does not parse: its MP4 ends before it');
        if (this.entries.get(key) !== entry) return;
        entry.bytes = l.bytes;
        this.held += l.bytes;
        this.trim();
      },
      () => {
        if (this.entries.get(key) === entry) this.dropKey(key);
      },
    );
    return layout;
  }

  /** forget a file, every audio choice of it (removed by retention, or found changed) */
  drop(file: string): void {
    for (const audio of ['aac', 'as-is'] as const) this.dropKey(`${audio}\n${file}`);
  }

  private dropKey(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.held -= e.bytes;
  }

  get size(): number {
    return this.entries.size;
  }

  private trim(): void {
    for (const key of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries && this.held <= this.maxBytes) return;
      if (this.entries.size === 1) return;
      this.dropKey(key);
    }
  }
}

export interface Mp4ServeOptions {
  cache: Mp4LayoutCache;
  log: Logger;
  onStart?(): void;
  onEnd?(): void;
}

/** the file: what the route has opened and checked */
export interface OpenRecord {
  real: string;
  fd: number;
  size: number;
  mtime: Date;
  reqId: string;
  /** the catalog says it is still being recorded */
  growing: boolean;
  /** what the query asked for the audio */
  audio: RecordAudio;
  /** closes fd */
  close: () => void;
}

/** Answers with the MP4; true when the descriptor was handed to the response (which closes it). */
export async function serveMp4(req: RouteRequest, res: ServerResponse, f: OpenRecord, o: Mp4ServeOptions): Promise<boolean> {
  const mtimeMs = f.mtime.getTime();
  let layout: Mp4Layout;
  try {
    layout = await o.cache.get(f.real, f.size, mtimeMs, f.growing, o.log, f.reqId, f.audio);
  } catch (err) {
    o.log.warn({ reqId: f.reqId, err: (err as Error).message }, 'record file could not be indexed for MP4');
    throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record could not be read.', 500);
  }
  if (layout.samples.count === 0) {
    throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record holds no video or audio an MP4 can carry (yet).', 409);
  }
  // the AAC form is another file of the same snapshot: its own tag, so If-Range never splices the two
  const etag = `"mp4-${layout.flvLength.toString(36)}-${Math.trunc(mtimeMs).toString(36)}${layout.audioFrom ? '-aac' : ''}"`;
  const lastModified = f.mtime.toUTCString();
  const ifRange = req.headers['if-range'];
  // a Range made against another snapshot of this MP4 would splice two files: send the whole one instead
  const rangeHeader = ifRange === undefined || ifRange === etag || ifRange === lastModified ? req.headers.range : undefined;
  const range = parseRange(typeof rangeHeader === 'string' ? rangeHeader : undefined, layout.total);
  const headers: Record<string, string | number> = {
    'Content-Type': 'video/mp4',
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'private, no-cache',
    'Last-Modified': lastModified,
    ETag: etag,
    'Content-Disposition': `inline; filename="${f.reqId}.mp4"`,
  };
  if (range.status === 416) {
    res.writeHead(416, { ...headers, 'Content-Range': range.contentRange, 'Content-Length': 0 });
    res.end();
    return false;
  }
  const start = range.status === 206 ? range.start : 0;
  const end = range.status === 206 ? range.end : layout.total - 1;
  if (range.status === 206) headers['Content-Range'] = range.contentRange;
  headers['Content-Length'] = end - start + 1;
  res.writeHead(range.status, headers);
  if (req.method === 'HEAD') {
    res.end();
    return false;
  }
  const body = mp4Stream(layout, f.fd, start, end, f.close);
  o.onStart?.();
  const ended = downloadEnd(body, () => o.onEnd?.());
  pipeline(body, res, (err) => {
    ended();
    if (!err || (err as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE') return;
    if ((err as { code?: string }).code === 'FLV_CHANGED') o.cache.drop(f.real);
    o.log.warn({ reqId: f.reqId, err: err.message }, 'record MP4 download ended early');
  });
  return true;
}
