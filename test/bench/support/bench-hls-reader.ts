/**
 * Low-latency HLS readers for the ingest-hls benchmark: what hls.js does in LL mode, without decoding. Each reader
 * holds two keep-alive HTTP/1.1 connections on raw sockets (as a browser would use two of its six: one blocked on the
 * playlist, one fetching media):
 * 1. GET the playlist, GET its EXT-X-MAP init segment, start at the latest INDEPENDENT part at or before the live edge
 *    minus PART-HOLD-BACK (hls.js's start for LL streams) and fetch every part from there on, in order.
 * 2. Reload the playlist with the delivery directives `_HLS_msn`/`_HLS_part` of the part after the last one listed
 *    (a blocking reload, answered when that part exists), at once after each answer, and fetch the parts it adds. A
 *    segment whose parts are no longer listed (the reader fell behind) is fetched whole, as hls.js would.
 * Every part is checked: HTTP 200, one moof + mdat filling the body exactly, its decode time following the previous
 * part's end (no media missing), an INDEPENDENT part starting with a sync sample. How far behind live a reader is:
 * the time from the terminal's write of the newest video frame in a part to the reader having the whole part
 * ("part age"). The part exists only once the frame after it came (its duration needs the next frame's time), so the
 * age includes about one frame interval by construction.
 */
import * as net from 'node:net';
import { Reservoir, f1, f2, sharedReads } from './gateway-harness';
import { quantile, sumOf, type Sample } from './process-probe';
import { SENT_RING, type SynthTerminal } from './synth-terminals';
import type { ReaderFleet, ReaderFigures } from '../ingest-flv';

const REQUEST_TIMEOUT_MS = 15_000;
const MAX_HEAD = 16 * 1024;
const MAX_TEXT_BODY = 1024 * 1024;
/** a reader that gets no part for this long in the window counts a stall */
export const HLS_STALL_MS = 2000;
/** after an error, a reader waits this long and starts over with a plain playlist load (as a player retries) */
const RETRY_MS = 1000;

// ------------------------------------------------------------------------------------------------------------
// HTTP/1.1 responses, read incrementally off a socket

export interface HttpResponse {
  status: number;
  /** header names lower-cased; a repeated header keeps the last value */
  headers: Map<string, string>;
  /** the body's first bytes, up to the limit the request asked to keep, copied out of the reads they came in */
  body: Buffer[];
  /** the whole body's length, kept or not */
  bodyBytes: number;
}

const enum Rs {
  Head,
  Body,
  ChunkSize,
  ChunkData,
  ChunkCrlf,
  Trailer,
  UntilClose,
}

/**
 * Responses of a keep-alive connection, however TCP cuts them: a Content-Length body, a chunked body (trailers
 * skipped), or a body up to the end of the connection (`end()`). After an error (bad status line, header too long,
 * bad chunk size) further input is ignored. Nothing of a chunk passed to `push` is kept past the call (the chunks
 * may be a buffer every socket reads into), and of a body only the first `keep` bytes: a reader checks a part by its
 * moof, and keeping every part's mdat until it is checked drove the reader fleet into mark-compacts at 300 readers.
 */
export class HttpResponseReader {
  error: string | undefined;
  private state = Rs.Head;
  private headBuf: Buffer | undefined;
  private headBytes = 0;
  private left = 0;
  private line = '';
  private cur: HttpResponse | undefined;
  private keepLeft = 0;
  /** how many bytes of the next response's body to keep (set before sending its request) */
  keep = Infinity;

  constructor(private readonly onResponse: (r: HttpResponse) => void) {}

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length && this.error === undefined) {
      switch (this.state) {
        case Rs.Head:
          off = this.readHead(chunk, off);
          break;
        case Rs.Body: {
          const n = Math.min(this.left, chunk.length - off);
          this.take(chunk, off, n);
          off += n;
          this.left -= n;
          if (this.left === 0) this.finish();
          break;
        }
        case Rs.UntilClose:
          this.take(chunk, off, chunk.length - off);
          off = chunk.length;
          break;
        case Rs.ChunkSize:
        case Rs.Trailer: {
          const nl = chunk.indexOf(10, off);
          const end = nl < 0 ? chunk.length : nl;
          this.line += chunk.toString('latin1', off, end);
          off = nl < 0 ? chunk.length : nl + 1;
          if (this.line.length > 1024) return this.fail('chunk line too long');
          if (nl < 0) break;
          const line = this.line.replace(/\r$/, '');
          this.line = '';
          if (this.state === Rs.Trailer) {
            if (line === '') this.finish();
            break;
          }
          const size = parseInt(line.split(';')[0].trim(), 16);
          if (!Number.isFinite(size) || size < 0 || !/^[0-9a-fA-F]+$/.test(line.split(';')[0].trim()))
            return this.fail(`bad chunk size line '${line.slice(0, 40)}'`);
          if (size === 0) this.state = Rs.Trailer;
          else {
            this.left = size;
            this.state = Rs.ChunkData;
          }
          break;
        }
        case Rs.ChunkData: {
          const n = Math.min(this.left, chunk.length - off);
          this.take(chunk, off, n);
          off += n;
          this.left -= n;
          if (this.left === 0) {
            this.state = Rs.ChunkCrlf;
            this.left = 2;
          }
          break;
        }
        case Rs.ChunkCrlf: {
          const n = Math.min(this.left, chunk.length - off);
          off += n;
          this.left -= n;
          if (this.left === 0) this.state = Rs.ChunkSize;
          break;
        }
      }
    }
  }

  /** the connection ended: completes a body that runs to the close; anything else unfinished is an error */
  end(): void {
    if (this.error !== undefined) return;
    if (this.state === Rs.UntilClose) this.finish();
    else if (this.state !== Rs.Head || this.headBytes > 0) this.fail('connection closed in the middle of a response');
  }

  private fail(why: string): void {
    this.error = why;
  }

  private take(chunk: Buffer, off: number, n: number): void {
    if (n <= 0 || !this.cur) return;
    this.cur.bodyBytes += n;
    const k = Math.min(n, this.keepLeft);
    if (k <= 0) return;
    this.cur.body.push(Buffer.from(chunk.subarray(off, off + k)));
    this.keepLeft -= k;
  }

  private readHead(chunk: Buffer, off: number): number {
    // the header block is small and arrives once per response: join what came so far and look for its end
    const part = chunk.subarray(off);
    const had = this.headBytes;
    const joined = this.headBuf ? Buffer.concat([this.headBuf, part]) : part;
    const end = joined.indexOf('\r\n\r\n');
    if (end < 0) {
      if (joined.length > MAX_HEAD) {
        this.fail('response header block too long');
        return chunk.length;
      }
      this.headBuf = joined === part ? Buffer.from(part) : joined;
      this.headBytes = joined.length;
      return chunk.length;
    }
    // (end + 4 > had: the block's end was not in what came before, or it would have been found then)
    const consumedOfPart = end + 4 - had;
    const text = joined.toString('latin1', 0, end);
    this.headBuf = undefined;
    this.headBytes = 0;
    const lines = text.split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
    if (!m) {
      this.fail(`bad status line '${lines[0].slice(0, 60)}'`);
      return chunk.length;
    }
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const c = lines[i].indexOf(':');
      if (c > 0) headers.set(lines[i].slice(0, c).trim().toLowerCase(), lines[i].slice(c + 1).trim());
    }
    const status = Number(m[1]);
    this.cur = { status, headers, body: [], bodyBytes: 0 };
    this.keepLeft = this.keep;
    if (status >= 100 && status < 200) {
      this.cur = undefined; // an interim response: the real one follows
      return off + consumedOfPart;
    }
    const te = headers.get('transfer-encoding');
    const cl = headers.get('content-length');
    if (te !== undefined && /chunked/i.test(te)) this.state = Rs.ChunkSize;
    else if (cl !== undefined) {
      const n = Number(cl);
      if (!Number.isInteger(n) || n < 0) {
        this.fail(`bad Content-Length '${cl}'`);
        return chunk.length;
      }
      this.left = n;
      if (n === 0 || status === 204 || status === 304) this.finish();
      else this.state = Rs.Body;
    } else if (status === 204 || status === 304) this.finish();
    else this.state = Rs.UntilClose;
    return off + consumedOfPart;
  }

  private finish(): void {
    const r = this.cur;
    this.cur = undefined;
    this.state = Rs.Head;
    this.left = 0;
    if (r) this.onResponse(r);
  }
}

/** the body as kept (all of it unless the request asked to keep less: then shorter than bodyBytes) */
export function keptBody(r: HttpResponse): Buffer {
  return r.body.length === 1 ? r.body[0] : Buffer.concat(r.body);
}

export function bodyText(r: HttpResponse): string {
  return keptBody(r).toString('utf8');
}

/**
 * One keep-alive HTTP/1.1 connection to 127.0.0.1, one request at a time (a browser does not pipeline), reconnecting
 * when the server closed it. A request not answered within REQUEST_TIMEOUT_MS fails and the connection is dropped.
 */
export class HttpConn {
  private sock: net.Socket | undefined;
  private reader: HttpResponseReader | undefined;
  private pending: { sock: net.Socket; resolve(r: HttpResponse): void; reject(e: Error): void; timer: NodeJS.Timeout } | undefined;
  closed = false;
  /** bytes read off the socket, HTTP framing included */
  bytes = 0;

  constructor(
    private readonly port: number,
    private readonly hostHeader: string,
  ) {}

  /** `keep`: how many bytes of the body the answer holds (`bodyBytes` counts them all) */
  get(pathAndQuery: string, keep = Infinity): Promise<HttpResponse> {
    if (this.closed) return Promise.reject(new Error('reader closed'));
    if (this.pending) return Promise.reject(new Error('a request is already in flight on this connection'));
    const sock = this.sock && !this.sock.destroyed ? this.sock : this.connect();
    this.reader!.keep = keep;
    return new Promise<HttpResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(sock, new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`));
        sock.destroy();
      }, REQUEST_TIMEOUT_MS);
      this.pending = { sock, resolve, reject, timer };
      sock.write(`GET ${pathAndQuery} HTTP/1.1\r\nHost: ${this.hostHeader}\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n`);
    });
  }

  close(): void {
    this.closed = true;
    const sock = this.sock;
    sock?.destroy();
    if (this.pending) this.fail(this.pending.sock, new Error('reader closed'));
  }

  private connect(): net.Socket {
    const reader = new HttpResponseReader((r) => {
      const p = this.pending;
      if (!p || p.sock !== sock) return;
      this.pending = undefined;
      clearTimeout(p.timer);
      if (/close/i.test(r.headers.get('connection') ?? '')) sock.destroy();
      p.resolve(r);
    });
    // reads go into the buffer all sockets share: a new one a read was 64 KiB of external memory for the collector
    const sock: net.Socket = net.connect({
      host: '127.0.0.1',
      port: this.port,
      ...sharedReads((chunk, end) => {
        this.bytes += end;
        reader.push(chunk.subarray(0, end));
        if (reader.error !== undefined) {
          this.fail(sock, new Error(`bad HTTP response: ${reader.error}`));
          sock.destroy();
        }
      }),
    });
    sock.setNoDelay(true);
    this.sock = sock;
    this.reader = reader;
    sock.on('error', (err) => this.fail(sock, err));
    sock.on('close', () => {
      reader.end();
      if (this.sock === sock) this.sock = undefined;
      this.fail(sock, new Error(reader.error ? `bad HTTP response: ${reader.error}` : 'connection closed before the answer'));
    });
    return sock;
  }

  /** fails the request in flight if it was sent on `sock` (a closed connection's events must not fail the next one's) */
  private fail(sock: net.Socket, err: Error): void {
    const p = this.pending;
    if (!p || p.sock !== sock) return;
    this.pending = undefined;
    clearTimeout(p.timer);
    p.reject(err);
  }
}

// ------------------------------------------------------------------------------------------------------------
// media playlists (RFC 8216 and 8216bis's low-latency tags)

export interface PlaylistPart {
  msn: number;
  index: number;
  uri: string;
  duration: number;
  independent: boolean;
}

export interface PlaylistSegment {
  msn: number;
  /** the segment's URI; undefined for the segment being made (only parts listed) */
  uri: string | undefined;
  duration: number;
  complete: boolean;
  parts: PlaylistPart[];
  /** EXT-X-MAP URI in force for this segment */
  map: string | undefined;
  discontinuity: boolean;
  /** EXT-X-PROGRAM-DATE-TIME, ms since the epoch */
  programDateTime: number | undefined;
}

export interface MediaPlaylist {
  targetDuration: number;
  mediaSequence: number;
  partTarget: number | undefined;
  partHoldBack: number | undefined;
  canBlockReload: boolean;
  segments: PlaylistSegment[];
  preloadHint: string | undefined;
}

/** `KEY=value,KEY="quoted, value"` */
export function parseAttributes(list: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /([A-Z0-9-]+)=("([^"]*)"|[^,]*)/g;
  for (let m = re.exec(list); m; m = re.exec(list)) out.set(m[1], m[3] ?? m[2]);
  return out;
}

/** A media playlist; throws on what a player could not use (no #EXTM3U, a part or EXTINF without its values). */
export function parseMediaPlaylist(text: string): MediaPlaylist {
  const lines = text.split(/\r?\n/);
  if (lines[0] !== '#EXTM3U') throw new Error('playlist does not start with #EXTM3U');
  const pl: MediaPlaylist = {
    targetDuration: NaN,
    mediaSequence: 0,
    partTarget: undefined,
    partHoldBack: undefined,
    canBlockReload: false,
    segments: [],
    preloadHint: undefined,
  };
  let map: string | undefined;
  let cur: PlaylistSegment | undefined;
  let disc = false;
  let pdt: number | undefined;
  let awaitingUri = false;
  const open = (): PlaylistSegment => {
    if (!cur) {
      cur = {
        msn: pl.mediaSequence + pl.segments.length,
        uri: undefined,
        duration: 0,
        complete: false,
        parts: [],
        map,
        discontinuity: disc,
        programDateTime: pdt,
      };
      disc = false;
      pdt = undefined;
    }
    return cur;
  };
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '') continue;
    if (!line.startsWith('#')) {
      if (!awaitingUri || !cur) throw new Error(`URI line without #EXTINF: '${line.slice(0, 60)}'`);
      cur.uri = line;
      cur.complete = true;
      pl.segments.push(cur);
      cur = undefined;
      awaitingUri = false;
      continue;
    }
    const c = line.indexOf(':');
    const tag = c < 0 ? line : line.slice(0, c);
    const value = c < 0 ? '' : line.slice(c + 1);
    switch (tag) {
      case '#EXT-X-TARGETDURATION':
        pl.targetDuration = Number(value);
        break;
      case '#EXT-X-MEDIA-SEQUENCE':
        if (pl.segments.length || cur) throw new Error('EXT-X-MEDIA-SEQUENCE after the first segment');
        pl.mediaSequence = Number(value);
        break;
      case '#EXT-X-SERVER-CONTROL': {
        const a = parseAttributes(value);
        pl.canBlockReload = a.get('CAN-BLOCK-RELOAD') === 'YES';
        if (a.has('PART-HOLD-BACK')) pl.partHoldBack = Number(a.get('PART-HOLD-BACK'));
        break;
      }
      case '#EXT-X-PART-INF':
        pl.partTarget = Number(parseAttributes(value).get('PART-TARGET'));
        break;
      case '#EXT-X-MAP': {
        const uri = parseAttributes(value).get('URI');
        if (!uri) throw new Error('EXT-X-MAP without URI');
        map = uri;
        if (cur && cur.parts.length === 0) cur.map = map;
        break;
      }
      case '#EXT-X-DISCONTINUITY':
        disc = true;
        break;
      case '#EXT-X-PROGRAM-DATE-TIME':
        pdt = Date.parse(value);
        break;
      case '#EXT-X-PART': {
        const a = parseAttributes(value);
        const uri = a.get('URI');
        const duration = Number(a.get('DURATION'));
        if (!uri || !Number.isFinite(duration)) throw new Error(`EXT-X-PART without URI or DURATION: '${line.slice(0, 80)}'`);
        const seg = open();
        seg.parts.push({ msn: seg.msn, index: seg.parts.length, uri, duration, independent: a.get('INDEPENDENT') === 'YES' });
        break;
      }
      case '#EXTINF': {
        const d = Number(value.split(',')[0]);
        if (!Number.isFinite(d)) throw new Error(`bad #EXTINF '${value}'`);
        open().duration = d;
        awaitingUri = true;
        break;
      }
      case '#EXT-X-PRELOAD-HINT': {
        const a = parseAttributes(value);
        if (a.get('TYPE') === 'PART') pl.preloadHint = a.get('URI');
        break;
      }
      default:
        break; // EXT-X-VERSION, EXT-X-INDEPENDENT-SEGMENTS, ...
    }
  }
  if (awaitingUri) throw new Error('#EXTINF without its URI at the end');
  if (cur) pl.segments.push(cur); // the segment being made: parts only
  if (!Number.isFinite(pl.targetDuration)) throw new Error('no EXT-X-TARGETDURATION');
  return pl;
}

/**
 * The delivery directives of the next blocking reload, as hls.js computes them: the part after the last one listed
 * (the next segment's first when the last listed segment is complete).
 */
export function nextDirective(pl: MediaPlaylist): { msn: number; part: number } {
  const last = pl.segments[pl.segments.length - 1];
  if (!last) return { msn: pl.mediaSequence, part: 0 };
  return last.complete ? { msn: last.msn + 1, part: 0 } : { msn: last.msn, part: last.parts.length };
}

/**
 * Where a player joining now starts: the latest INDEPENDENT part starting at or before the live edge minus
 * PART-HOLD-BACK (hls.js: the part at its target latency, which must be independent to start decoding); without one,
 * the first independent part listed; without any, the first part.
 */
export function pickStart(pl: MediaPlaylist): PlaylistPart | undefined {
  const parts = pl.segments.flatMap((s) => s.parts);
  if (parts.length === 0) return undefined;
  // times from the first listed part (parts of one listed run are contiguous: they are the last segments')
  let end = 0;
  const starts = parts.map((p) => {
    const s = end;
    end += p.duration;
    return s;
  });
  const hold = pl.partHoldBack ?? 3 * (pl.partTarget ?? 1);
  const target = end - hold;
  let pick: PlaylistPart | undefined;
  for (let i = 0; i < parts.length; i++) if (parts[i].independent && starts[i] <= target + 1e-6) pick = parts[i];
  return pick ?? parts.find((p) => p.independent) ?? parts[0];
}

/** A playlist URI against the playlist's path: absolute-path and relative references (absolute URLs keep their path). */
export function resolveUri(playlistPath: string, uri: string): string {
  const abs = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*(.*)$/i.exec(uri);
  if (abs) return abs[1] || '/';
  if (uri.startsWith('/')) return uri;
  const q = playlistPath.indexOf('?');
  const p = q < 0 ? playlistPath : playlistPath.slice(0, q);
  return p.slice(0, p.lastIndexOf('/') + 1) + uri;
}

// ------------------------------------------------------------------------------------------------------------
// fMP4: the init segment's tracks and a fragment's timing

export interface InitTrack {
  id: number;
  timescale: number;
  handler: string;
}

function boxes(b: Buffer, from: number, to: number, fn: (type: string, start: number, end: number) => void): void {
  let at = from;
  while (at + 8 <= to) {
    let size = b.readUInt32BE(at);
    const type = b.toString('latin1', at + 4, at + 8);
    let head = 8;
    if (size === 1) {
      if (at + 16 > to) throw new Error(`box ${type}: truncated 64-bit size`);
      size = Number(b.readBigUInt64BE(at + 8));
      head = 16;
    } else if (size === 0) size = to - at;
    if (size < head || at + size > to) throw new Error(`box '${type}' of ${size} bytes runs past its parent`);
    fn(type, at + head, at + size);
    at += size;
  }
  if (at !== to) throw new Error(`${to - at} stray bytes after the last box`);
}

/** the tracks of an fMP4 init segment (ftyp + moov): id, timescale, handler ('vide', 'soun') */
export function parseInit(b: Buffer): InitTrack[] {
  const out: InitTrack[] = [];
  let moov = false;
  boxes(b, 0, b.length, (type, s, e) => {
    if (type !== 'moov') return;
    moov = true;
    boxes(b, s, e, (t2, s2, e2) => {
      if (t2 !== 'trak') return;
      const tr: InitTrack = { id: -1, timescale: 0, handler: '' };
      boxes(b, s2, e2, (t3, s3, e3) => {
        if (t3 === 'tkhd') tr.id = b.readUInt32BE(s3 + (b[s3] === 1 ? 20 : 12));
        if (t3 !== 'mdia') return;
        boxes(b, s3, e3, (t4, s4) => {
          if (t4 === 'mdhd') tr.timescale = b.readUInt32BE(s4 + (b[s4] === 1 ? 20 : 12));
          if (t4 === 'hdlr') tr.handler = b.toString('latin1', s4 + 8, s4 + 12);
        });
      });
      out.push(tr);
    });
  });
  if (!moov) throw new Error('init segment without moov');
  return out;
}

export interface FragmentTrackInfo {
  trackId: number;
  /** tfdt: decode time of the first sample, track timescale */
  baseTime: number;
  samples: number;
  /** decode time of the last sample (base + durations of the ones before it) */
  lastDts: number;
  /** base + every sample's duration: where the next fragment of the track must start */
  endDts: number;
  firstSync: boolean;
}

export interface FragmentInfo {
  sequence: number;
  moofBytes: number;
  mdatBytes: number;
  tracks: FragmentTrackInfo[];
}

/** sample_is_non_sync_sample in sample flags */
const NON_SYNC = 0x10000;

/**
 * A part or segment (moof + mdat, possibly several in a row): `head` holds at least every moof (the first moof and,
 * for a segment, all of them; pass the whole body when in doubt), `total` is the body's length. Checks that the
 * boxes fill the body exactly and that each mdat follows its moof; returns the first fragment's sequence and, per
 * track, the timing over all fragments.
 */
export function parseFragment(head: Buffer, total: number): FragmentInfo {
  let at = 0;
  let first: FragmentInfo | undefined;
  const byTrack = new Map<number, FragmentTrackInfo>();
  while (at < total) {
    if (at + 8 > head.length) throw new Error(`fragment head too short: need a box header at ${at}, have ${head.length} bytes`);
    const size = head.readUInt32BE(at);
    const type = head.toString('latin1', at + 4, at + 8);
    if (type !== 'moof') throw new Error(`expected moof at ${at}, found '${type}'`);
    if (size < 8 || at + size > head.length) throw new Error(`moof of ${size} bytes at ${at}: not all of it is in the ${head.length} bytes given`);
    const info: FragmentInfo = { sequence: -1, moofBytes: size, mdatBytes: 0, tracks: [] };
    boxes(head, at + 8, at + size, (type2, s, e) => {
      if (type2 === 'mfhd') info.sequence = head.readUInt32BE(s + 4);
      if (type2 !== 'traf') return;
      const t: FragmentTrackInfo = { trackId: -1, baseTime: NaN, samples: 0, lastDts: NaN, endDts: NaN, firstSync: false };
      let defaultDuration = 0;
      let defaultFlags = 0;
      const runs: Array<[number, number]> = [];
      boxes(head, s, e, (t3, s3, e3) => {
        if (t3 === 'tfhd') {
          const flags = head.readUInt32BE(s3) & 0xffffff;
          t.trackId = head.readUInt32BE(s3 + 4);
          let p = s3 + 8;
          if (flags & 0x1) p += 8;
          if (flags & 0x2) p += 4;
          if (flags & 0x8) {
            defaultDuration = head.readUInt32BE(p);
            p += 4;
          }
          if (flags & 0x10) p += 4;
          if (flags & 0x20) defaultFlags = head.readUInt32BE(p);
        } else if (t3 === 'tfdt') {
          t.baseTime = head[s3] === 1 ? Number(head.readBigUInt64BE(s3 + 4)) : head.readUInt32BE(s3 + 4);
        } else if (t3 === 'trun') runs.push([s3, e3]);
      });
      if (!Number.isFinite(t.baseTime)) throw new Error(`traf of track ${t.trackId} without tfdt`);
      let dts = t.baseTime;
      for (const [s3, e3] of runs) {
        const flags = head.readUInt32BE(s3) & 0xffffff;
        const n = head.readUInt32BE(s3 + 4);
        let p = s3 + 8;
        if (flags & 0x1) p += 4;
        let firstFlags: number | undefined;
        if (flags & 0x4) {
          firstFlags = head.readUInt32BE(p);
          p += 4;
        }
        const per = (flags & 0x100 ? 4 : 0) + (flags & 0x200 ? 4 : 0) + (flags & 0x400 ? 4 : 0) + (flags & 0x800 ? 4 : 0);
        if (p + per * n > e3) throw new Error(`trun of ${n} samples runs past its box`);
        for (let i = 0; i < n; i++) {
          let dur = defaultDuration;
          let sflags = defaultFlags;
          if (flags & 0x100) {
            dur = head.readUInt32BE(p);
            p += 4;
          }
          if (flags & 0x200) p += 4;
          if (flags & 0x400) {
            sflags = head.readUInt32BE(p);
            p += 4;
          }
          if (flags & 0x800) p += 4;
          if (i === 0 && firstFlags !== undefined) sflags = firstFlags;
          if (t.samples === 0) t.firstSync = (sflags & NON_SYNC) === 0;
          t.lastDts = dts;
          dts += dur;
          t.samples++;
        }
      }
      t.endDts = dts;
      info.tracks.push(t);
    });
    at += size;
    if (at + 8 > head.length && at + 8 <= total) {
      // the mdat's header is past the head given: trust the body length for a single fragment
      if (first === undefined) {
        info.mdatBytes = total - at;
        first = info;
        mergeTracks(byTrack, info.tracks);
        break;
      }
      throw new Error(`mdat header at ${at} not in the ${head.length} bytes given`);
    }
    if (at + 8 > total) throw new Error(`moof at ${at - size} is not followed by an mdat`);
    const mdatSize = head.readUInt32BE(at);
    if (head.toString('latin1', at + 4, at + 8) !== 'mdat') throw new Error(`expected mdat at ${at}, found '${head.toString('latin1', at + 4, at + 8)}'`);
    if (mdatSize < 8 || at + mdatSize > total) throw new Error(`mdat of ${mdatSize} bytes at ${at} runs past the ${total}-byte body`);
    info.mdatBytes = mdatSize;
    at += mdatSize;
    first ??= info;
    mergeTracks(byTrack, info.tracks);
  }
  if (!first) throw new Error('empty fragment');
  return { ...first, tracks: [...byTrack.values()] };
}

function mergeTracks(into: Map<number, FragmentTrackInfo>, tracks: FragmentTrackInfo[]): void {
  for (const t of tracks) {
    const had = into.get(t.trackId);
    if (!had) into.set(t.trackId, { ...t });
    else {
      had.samples += t.samples;
      had.lastDts = t.lastDts;
      had.endDts = t.endDts;
    }
  }
}

/** the longest moof a part could have here (16 bytes per sample, ~10 samples a part; segments are read whole) */
const PART_HEAD_BYTES = 4096;

// ------------------------------------------------------------------------------------------------------------
// the reader

interface Fetch {
  kind: 'part' | 'segment';
  msn: number;
  index: number;
  uri: string;
  independent: boolean;
  map: string | undefined;
}

/** Finds the terminal's write time of the video frame at media time `ms` (the gateway's timeline); NaN if not in its ring. */
export function sentAtOf(term: Pick<SynthTerminal, 'sentT' | 'sentAt' | 'sentCount'>, ms: number): number {
  const oldest = Math.max(0, term.sentCount - SENT_RING);
  for (let k = term.sentCount - 1; k >= oldest; k--) {
    const t = term.sentT[k % SENT_RING];
    if (Math.abs(t - ms) < 0.5) return term.sentAt[k % SENT_RING];
    if (t < ms - 0.5) break;
  }
  return NaN;
}

export class HlsReader {
  readonly playlistConn: HttpConn;
  readonly mediaConn: HttpConn;
  private readonly basePath: string;
  private closed = false;
  measuring = false;
  /** got at least one part (or segment) */
  hasMedia = false;
  // in the window
  parts = 0;
  segments = 0;
  playlists = 0;
  lastPartAt = NaN;
  stalls = 0;
  // whole run
  errors: string[] = [];
  errorCount = 0;
  /** parts whose media did not start where the previous one ended */
  gaps = 0;
  /** INDEPENDENT parts not starting with a sync sample */
  notIndependent = 0;
  /** segments fetched whole because their parts had left the playlist (the reader fell behind) */
  fellBehind = 0;
  /** parts whose newest frame was not found among the terminal's recent sends */
  unmatched = 0;
  /** video samples in the parts and segments fetched in the window */
  videoFrames = 0;
  /** the terminal's video frames sent before the window, and in it (set at its end) */
  sentBefore = 0;
  sentInWindow = 0;
  private queue: Fetch[] = [];
  private pumping = false;
  /** the last part (or whole segment: index Infinity) queued */
  private last: { msn: number; index: number } | undefined;
  private loadedMap: string | undefined;
  private videoTrack: InitTrack | undefined;
  private expectDts: number | undefined;
  /** the next fetch re-takes media already had (a whole segment after some of its parts): no continuity check */
  private expectNew = false;

  constructor(
    private readonly term: SynthTerminal,
    url: URL,
    /** part age samples (ms), in the window */
    private readonly lag: Reservoir,
  ) {
    this.basePath = url.pathname + url.search;
    this.playlistConn = new HttpConn(Number(url.port || 80), url.host);
    this.mediaConn = new HttpConn(Number(url.port || 80), url.host);
  }

  get bytes(): number {
    return this.playlistConn.bytes + this.mediaConn.bytes;
  }

  /** video frames the terminal has sent */
  get sentCount(): number {
    return this.term.sentCount;
  }

  start(): void {
    void this.loop();
  }

  close(): void {
    this.closed = true;
    this.playlistConn.close();
    this.mediaConn.close();
  }

  private error(what: string): void {
    if (this.closed) return;
    this.errorCount++;
    if (this.errors.length < 5) this.errors.push(what);
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      try {
        let pl = await this.loadPlaylist(undefined);
        if (!this.last) {
          const start = pickStart(pl);
          if (!start) throw new Error('first playlist lists no part (is low latency on?)');
          this.last = { msn: start.msn, index: start.index - 1 };
        }
        this.enqueue(pl);
        while (!this.closed) {
          pl = await this.loadPlaylist(nextDirective(pl));
          this.enqueue(pl);
        }
      } catch (err) {
        if (this.closed) return;
        this.error(`playlist: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }

  private async loadPlaylist(directive: { msn: number; part: number } | undefined): Promise<MediaPlaylist> {
    const path = directive ? `${this.basePath}&_HLS_msn=${directive.msn}&_HLS_part=${directive.part}` : this.basePath;
    const r = await this.playlistConn.get(path);
    if (r.status !== 200)
      throw new Error(
        `HTTP ${r.status} for ${directive ? `_HLS_msn=${directive.msn}&_HLS_part=${directive.part}` : 'the playlist'}: ${bodyText(r).trim().slice(0, 80)}`,
      );
    if (r.bodyBytes > MAX_TEXT_BODY) throw new Error(`playlist of ${r.bodyBytes} bytes`);
    if (this.measuring) this.playlists++;
    const pl = parseMediaPlaylist(bodyText(r));
    if (directive && !pl.canBlockReload) throw new Error('the playlist does not allow blocking reloads (CAN-BLOCK-RELOAD)');
    return pl;
  }

  /** queues what the playlist lists after the last thing queued */
  private enqueue(pl: MediaPlaylist): void {
    const last = { ...this.last! };
    const firstMsn = pl.segments[0]?.msn ?? pl.mediaSequence;
    if (last.msn < firstMsn && last.index !== Infinity) {
      // the segment we were in left the playlist altogether: media is lost
      this.error(`fell out of the playlist window (at ${last.msn}.${last.index}, playlist starts at ${firstMsn})`);
    }
    for (const seg of pl.segments) {
      if (seg.msn < last.msn) continue;
      const parts = (from: number) => {
        for (const p of seg.parts)
          if (p.index >= from) this.push({ kind: 'part', msn: p.msn, index: p.index, uri: p.uri, independent: p.independent, map: seg.map });
      };
      if (seg.msn === this.last!.msn) {
        if (this.last!.index === Infinity) continue;
        if (seg.parts.length > 0) parts(this.last!.index + 1);
        else if (seg.complete && seg.uri) {
          // our segment's parts left the list before we had them all: take it whole, as a player would
          this.fellBehind++;
          this.expectNew = true;
          this.push({ kind: 'segment', msn: seg.msn, index: Infinity, uri: seg.uri, independent: false, map: seg.map });
        }
      } else if (seg.parts.length > 0) parts(0);
      else if (seg.complete && seg.uri) {
        this.fellBehind++;
        this.push({ kind: 'segment', msn: seg.msn, index: Infinity, uri: seg.uri, independent: false, map: seg.map });
      }
    }
    if (!this.pumping) void this.pump();
  }

  private push(f: Fetch): void {
    this.queue.push(f);
    this.last = { msn: f.msn, index: f.index };
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (!this.closed && this.queue.length) {
        const f = this.queue.shift()!;
        try {
          if (f.map !== undefined && f.map !== this.loadedMap) await this.loadInit(f.map);
          await this.fetchMedia(f);
        } catch (err) {
          this.error(`${f.kind} ${f.msn}.${f.index}: ${(err as Error).message}`);
          this.expectDts = undefined;
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  private async loadInit(uri: string): Promise<void> {
    const r = await this.mediaConn.get(resolveUri(this.basePath, uri));
    if (r.status !== 200) throw new Error(`HTTP ${r.status} for the init segment`);
    const tracks = parseInit(keptBody(r));
    this.videoTrack = tracks.find((t) => t.handler === 'vide');
    if (!this.videoTrack) throw new Error('init segment without a video track');
    this.loadedMap = uri;
    this.expectDts = undefined; // a new init comes with a discontinuity
  }

  private async fetchMedia(f: Fetch): Promise<void> {
    const r = await this.mediaConn.get(resolveUri(this.basePath, f.uri), f.kind === 'part' ? PART_HEAD_BYTES : Infinity);
    const now = performance.now();
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${bodyText(r).trim().slice(0, 80)}`);
    const info = parseFragment(keptBody(r), r.bodyBytes);
    const v = info.tracks.find((t) => t.trackId === this.videoTrack?.id);
    if (!v || v.samples === 0) throw new Error('no video samples');
    if (this.expectDts !== undefined && v.baseTime !== this.expectDts && !this.expectNew) this.gaps++;
    this.expectNew = false;
    this.expectDts = v.endDts;
    if (f.independent && !v.firstSync) this.notIndependent++;
    this.hasMedia = true;
    if (!this.measuring) return;
    if (f.kind === 'segment') this.segments++;
    else this.parts++;
    this.videoFrames += v.samples;
    if (now - this.lastPartAt > HLS_STALL_MS) this.stalls++;
    this.lastPartAt = now;
    const sentAt = sentAtOf(this.term, (v.lastDts * 1000) / this.videoTrack!.timescale);
    if (Number.isNaN(sentAt)) this.unmatched++;
    else this.lag.add(now - sentAt);
  }
}

/** ingest-hls's readers: one LL-HLS reader per terminal (fmt 1 requests, hls-out on the site at its defaults). */
export class HlsReaderFleet implements ReaderFleet {
  readonly what = 'LL-HLS reader';
  readonly plugin = { name: 'hls-out', config: {} };
  readonly openFields = { fmt: 1 };
  readonly bytesOutMetric = undefined;
  readonly readers: HlsReader[] = [];
  private readonly lag = new Reservoir();
  private windowStart = 0;

  add(term: SynthTerminal, url: URL): void {
    // (HLS matches parts to sends by decode time, which is the terminal's media time: no stream knowledge needed)
    if (!url.pathname.endsWith('/index.m3u8')) throw new Error(`not an HLS play URL: ${url.pathname}`);
    const r = new HlsReader(term, url, this.lag);
    this.readers.push(r);
    r.start();
  }

  async ready(signal: AbortSignal, timeoutMs: number): Promise<void> {
    const by = performance.now() + timeoutMs;
    while (this.readers.some((r) => !r.hasMedia)) {
      if (signal.aborted || performance.now() > by) {
        const waiting = this.readers.filter((r) => !r.hasMedia);
        const errs = [...new Set(waiting.flatMap((r) => r.errors))].slice(0, 3);
        throw new Error(`${waiting.length} HLS readers got no part within ${timeoutMs / 1000} s${errs.length ? `: ${errs.join('; ')}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  startWindow(): void {
    this.lag.reset();
    this.windowStart = performance.now();
    for (const r of this.readers) {
      r.parts = 0;
      r.segments = 0;
      r.playlists = 0;
      r.stalls = 0;
      r.unmatched = 0;
      r.videoFrames = 0;
      r.sentBefore = r.sentCount;
      r.lastPartAt = this.windowStart;
      r.measuring = true;
    }
  }

  endWindow(): void {
    const now = performance.now();
    for (const r of this.readers) {
      r.measuring = false;
      r.sentInWindow = r.sentCount - r.sentBefore;
      if (now - r.lastPartAt > HLS_STALL_MS) r.stalls++;
    }
  }

  bytesRead(): number {
    return this.readers.reduce((n, r) => n + r.bytes, 0);
  }

  figures(seconds: number): ReaderFigures {
    const lag = this.lag.values();
    const errors = this.readers.reduce((n, r) => n + r.errorCount + r.gaps + r.notIndependent, 0);
    return {
      connected: this.readers.filter((r) => r.errorCount === 0).length,
      stalled: this.readers.filter((r) => r.parts + r.segments === 0 || r.stalls > 0).length,
      errors,
      lagMs: { p50: quantile(lag, 0.5), p99: quantile(lag, 0.99), max: lag.reduce((m, x) => Math.max(m, x), 0), count: this.lag.seen },
      perReaderPerSecond: this.readers.reduce((n, r) => n + r.parts + r.segments, 0) / Math.max(1, this.readers.length) / seconds,
    };
  }

  report(seconds: number): string[] {
    const f = this.figures(seconds);
    const sum = (k: (r: HlsReader) => number) => this.readers.reduce((n, r) => n + k(r), 0);
    const errs = [...new Set(this.readers.flatMap((r) => r.errors))];
    return [
      `  HLS readers: ${this.readers.length}, ${f2(f.perReaderPerSecond)} parts and ${f2(sum((r) => r.playlists) / this.readers.length / seconds)} blocking playlist reloads ` +
        `per reader-second, ${f1(
          (100 * sum((r) => r.videoFrames)) /
            Math.max(
              1,
              sum((r) => r.sentInWindow),
            ),
        )} % of the video frames their terminals sent in the window; ` +
        `${sum((r) => r.segments)} whole segments (reader behind its parts), ${f.stalled} readers stalled (no part for ${HLS_STALL_MS / 1000} s)`,
      `  part age when fetched (terminal write of the part's newest frame -> whole part read, ${f.lagMs!.count} parts, ${sum((r) => r.unmatched)} unmatched): ` +
        `p50 ${f1(f.lagMs!.p50)} ms, p99 ${f1(f.lagMs!.p99)} ms, max ${f1(f.lagMs!.max)} ms`,
      `  reader errors (whole run): ${f.errors} (${sum((r) => r.errorCount)} failed fetches or playlists, ${sum((r) => r.gaps)} media gaps between parts, ` +
        `${sum((r) => r.notIndependent)} INDEPENDENT parts without a sync sample)${errs.length ? `: ${errs.slice(0, 3).join('; ')}` : ''}`,
    ];
  }

  metricLines(m: Map<string, Sample[]>, terminals: number): string[] {
    const held = sumOf(m, 'gw_hls_out_memory_bytes');
    return [
      `  hls-out holds ${f1(held / 1048576)} MB of media in its windows (${f1(held / Math.max(1, terminals) / 1024)} KB per stream; ` +
        `the largest ${f1(sumOf(m, 'gw_hls_out_largest_stream_bytes') / 1024)} KB), of the gateway's RSS above`,
    ];
  }

  close(): void {
    for (const r of this.readers) r.close();
  }
}
