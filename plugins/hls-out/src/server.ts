/**
 * HLS over the API port: `/hls/{stream}/index.m3u8?reqId&token[&via]` and the init segments, segments and parts it
 * names, each with the same query. Served only for an open fmt 1 request of that stream with its token (401
 * otherwise; 404 for a stream that is not open or a name this server never makes); a `via` names a stage on this
 * gateway (400 otherwise), whose form of the stream the fetch reads. Blocking playlist reloads (`_HLS_msn`,
 * `_HLS_part`) and fetches of the hinted next part wait for it, as RFC 8216bis asks: parked (parking.ts) and
 * answered with the playlist prepared once for all readers (prepared-playlist.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { playQuery, playVia, type Clock, type MediaBus, type RouteRequest, type Routes, type Sessions } from '../../../plugin-sdk';
import type { HlsOutConfig } from './config';
import type { HlsForm, HlsForms } from './forms';
import { Parking, type Parked } from './parking';
import { HlsPlayers, type HlsPlayer } from './players';
import { PlayVerdicts } from './play-verdicts';
import { nextPart } from './playlist';
import { PreparedPlaylists } from './prepared-playlist';
import type { HlsPart, Segmenter } from './segmenter';

export const HLS_PREFIX = '/hls';

const FILE = /^([A-Za-z0-9_.~-]{1,128})\/(index\.m3u8|init-(\d{1,9})\.mp4|seg-(\d{1,9})\.(m4s|ts)|part-(\d{1,9})\.(\d{1,4})\.m4s)$/;
/*
 * Header sets made once (writeHead takes name, value pairs): a fetch adds only its Content-Length. Every answer
 * allows any origin (CORS).
 */
const ORIGIN = ['Access-Control-Allow-Origin', '*'] as const;
const NO_CACHE = ['Cache-Control', 'no-cache'] as const;
const OK: Readonly<Record<'m3u8' | 'mp4' | 'ts', string[]>> = {
  m3u8: [...ORIGIN, 'Content-Type', 'application/vnd.apple.mpegurl', ...NO_CACHE],
  mp4: [...ORIGIN, 'Content-Type', 'video/mp4', ...NO_CACHE],
  ts: [...ORIGIN, 'Content-Type', 'video/mp2t', ...NO_CACHE],
};
const TEXT = [...ORIGIN, 'Content-Type', 'text/plain', ...NO_CACHE];
const NOT_ALLOWED = [...ORIGIN, 'Allow', 'GET, HEAD, OPTIONS', 'Content-Type', 'text/plain'];

export interface HlsServerStats {
  fetched(kind: 'playlist' | 'init' | 'segment' | 'part'): void;
  refused(): void;
  blockTimeouts(): void;
  /** a fetch authorised by its connection's earlier verdict, without the token's digests */
  verdictKept(): void;
  /** a playlist text made (once per change of a segmenter that is read) */
  playlistPrepared(): void;
}

/** what a parked fetch waits for: the first segment (an early player), a blocking reload, a segment, a part */
type Wait = 'media' | 'reload' | 'segment' | 'part';

/** One fetch: what its answer needs, and while parked, what it waits for. */
class Fetch implements Parked {
  parked = false;
  wait: Wait = 'media';
  msn = 0;
  /** part index (-1: a whole segment) */
  part = -1;
  deadline = 0;

  constructor(
    readonly req: RouteRequest,
    readonly res: ServerResponse,
    readonly form: HlsForm,
    readonly player: HlsPlayer,
    /** `?reqId=…&token=…[&via=…]`, on every URI of its playlist */
    readonly query: string,
  ) {}

  get seg(): Segmenter {
    return this.form.segmenter;
  }
}

export class HlsServer {
  readonly players: HlsPlayers;
  readonly verdicts: PlayVerdicts;
  /** the fetches waiting (answered with what there is at stop, so none outlives the server) */
  readonly parking: Parking<Fetch>;
  private readonly playlists: PreparedPlaylists;
  private stopped = false;

  constructor(
    private readonly c: HlsOutConfig,
    private readonly sessions: Sessions,
    /** the stages a fetch's `via` may name */
    private readonly bus: Pick<MediaBus, 'stages'>,
    private readonly forms: HlsForms,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly stats: HlsServerStats,
  ) {
    this.players = new HlsPlayers(sessions, clock, c.playerIdleSec * 1000);
    this.verdicts = new PlayVerdicts(sessions, () => stats.verdictKept());
    this.parking = new Parking<Fetch>(
      clock,
      (f) => this.ready(f),
      (f, ok) => {
        // (from a microtask or the timer: nothing above would catch it)
        try {
          this.resume(f, ok);
        } catch (err) {
          this.log.warn({ err: (err as Error).message }, 'HLS held fetch could not be answered');
          f.res.destroy();
        }
      },
    );
    this.playlists = new PreparedPlaylists(() => stats.playlistPrepared());
  }

  mount(routes: Routes): void {
    const none = { auth: 'none' } as const;
    routes.raw('GET', `${HLS_PREFIX}/*`, (req, res) => this.onGet(req, res), none);
    routes.raw('OPTIONS', `${HLS_PREFIX}/*`, (req, res) => preflight(req.raw, res), none);
    routes.raw(
      '*',
      `${HLS_PREFIX}/*`,
      (req, res) => {
        req.raw.resume();
        res.writeHead(405, NOT_ALLOWED).end('method not allowed\n');
      },
      none,
    );
  }

  stop(): void {
    this.stopped = true;
    this.parking.stop();
    this.players.stop();
  }

  private onGet(req: RouteRequest, res: ServerResponse): void {
    req.raw.resume();
    let path: string;
    try {
      path = decodeURIComponent(req.rest);
    } catch {
      return text(res, 404, 'not found');
    }
    const m = FILE.exec(path);
    if (!m) return text(res, 404, 'not found');
    if (this.stopped) return text(res, 503, 'stopping');
    const stream = m[1];
    const reqId = req.query.get('reqId') ?? '';
    const r = this.verdicts.authorize(req.raw.socket, stream, reqId, req.query.get('token') ?? '');
    if (!r) {
      if (!this.sessions.getStreamByName(stream)) return text(res, 404, 'no such stream');
      this.stats.refused();
      this.log.warn({ stream, reqId, remote: req.remote }, 'HLS fetch refused: unknown request or wrong token');
      return text(res, 401, 'unauthorized');
    }
    const via = playVia(req.query, this.bus);
    if (!via.ok) {
      this.stats.refused();
      this.log.warn({ stream, reqId, remote: req.remote }, `HLS fetch refused: ${via.reason}`);
      return text(res, 400, via.reason);
    }
    if (r.params.fmt !== 1) return text(res, 404, 'this request is not an HLS request (fmt 1)');
    let form = this.forms.of(r.reqId, via.via);
    if (!form && via.via !== undefined) {
      // the first fetch through this stage starts its form
      const cs = this.sessions.getStreamByName(stream);
      if (!cs) return text(res, 404, 'stream closed');
      form = this.forms.forPlay(r, cs, via.via);
      if (!form) return text(res, 503, `stage ${via.via} cannot read this stream`);
    }
    if (!form) return text(res, 404, 'stream closed');
    const player = this.players.fetch(r.reqId, req.remote);
    if (!player) return text(res, 404, 'request closed');
    const f = new Fetch(req, res, form, player, `?${playQuery(r.reqId, r.params.user.token, via.via)}`);
    // (the one listener of the fetch: its player is busy until it ends, and a parked one leaves its list)
    res.on('close', () => {
      this.parking.remove(f);
      this.players.ended(player);
    });
    const seg = form.segmenter;
    if (m[2] === 'index.m3u8') {
      this.stats.fetched('playlist');
      return this.playlist(f);
    }
    if (m[3] !== undefined) {
      this.stats.fetched('init');
      const init = form.container === 'fmp4' ? seg.initOf(Number(m[3])) : undefined;
      return init?.data ? this.send(f, OK.mp4, init.data) : text(res, 404, 'no such init segment');
    }
    if (m[4] !== undefined) {
      this.stats.fetched('segment');
      if ((m[5] === 'ts') !== (form.container === 'mpegts')) return text(res, 404, 'no such segment');
      f.msn = Number(m[4]);
      // the segment being made is answered once complete (a player that asks a little early)
      return this.hold(f, 'segment', this.blockMs(seg));
    }
    this.stats.fetched('part');
    if (form.container !== 'fmp4' || !this.c.lowLatency) return text(res, 404, 'no parts: not a low-latency stream');
    f.wait = 'part';
    f.msn = Number(m[6]);
    f.part = Number(m[7]);
    if (!seg.part(f.msn, f.part)) {
      // the hinted part (or one a little further on in the segment being made): answered when it exists
      const next = nextPart(seg);
      if (f.msn === next.msn && f.part >= next.index && f.part < next.index + 8) return this.hold(f, 'part', this.blockMs(seg));
    }
    this.resume(f, true);
  }

  /** f is answered now when it can be, else parked until it can or `ms` have gone */
  private hold(f: Fetch, wait: Wait, ms: number): void {
    f.wait = wait;
    if (this.ready(f)) return this.resume(f, true);
    f.deadline = this.clock.now() + ms;
    this.parking.park(f);
  }

  private ready(f: Fetch): boolean {
    const seg = f.seg;
    switch (f.wait) {
      case 'media':
        return seg.hasMedia || seg.closed;
      case 'reload':
        return seg.has(f.msn, f.part < 0 ? undefined : f.part) || seg.closed;
      case 'segment':
        return !!seg.segment(f.msn) || seg.current?.msn !== f.msn;
      case 'part':
        return !!seg.part(f.msn, f.part) || seg.lastMsn > f.msn || (seg.lastMsn === f.msn && !seg.current) || seg.closed;
    }
  }

  /** answers f, once ready or not (ok: ready; false at its deadline or at stop) */
  private resume(f: Fetch, ok: boolean): void {
    const seg = f.seg;
    const res = f.res;
    if (res.destroyed) return; // (its client left while it waited)
    switch (f.wait) {
      case 'media':
        if (!seg.hasMedia) {
          res.setHeader('Retry-After', '1');
          return text(res, seg.closed ? 404 : 503, seg.closed ? 'stream closed' : 'no media yet');
        }
        return this.reload(f);
      case 'reload':
        if (!ok || seg.closed) {
          this.stats.blockTimeouts();
          return text(res, seg.closed ? 404 : 503, seg.closed ? 'stream closed' : 'the part asked for did not come in time');
        }
        return this.sendPlaylist(f);
      case 'segment': {
        const done = seg.segment(f.msn);
        return done ? this.sendParts(f, f.form.container === 'fmp4' ? OK.mp4 : OK.ts, done.parts, 0) : text(res, 404, 'no such segment');
      }
      case 'part': {
        const s = seg.current?.msn === f.msn ? seg.current : seg.segment(f.msn);
        return s && f.part < s.parts.length ? this.sendParts(f, OK.mp4, s.parts, f.part, f.part + 1) : text(res, 404, 'no such part');
      }
    }
  }

  private playlist(f: Fetch): void {
    // an early player: held until the first segment exists, as FLV players are held until the first keyframe
    if (!f.seg.hasMedia) return this.hold(f, 'media', this.c.earlyWaitSec * 1000);
    this.reload(f);
  }

  /** a blocking reload (RFC 8216bis 6.2.5.2) waits for the part or segment it names; others are answered at once */
  private reload(f: Fetch): void {
    const q = f.req.query;
    const seg = f.seg;
    const msnQ = q.get('_HLS_msn');
    if (this.lowLatency(f) && msnQ !== null) {
      const msn = Number(msnQ);
      const partQ = q.get('_HLS_part');
      const part = partQ === null ? undefined : Number(partQ);
      if (!Number.isInteger(msn) || msn < 0 || (part !== undefined && (!Number.isInteger(part) || part < 0)))
        return text(f.res, 400, 'bad _HLS_msn or _HLS_part');
      // RFC 8216bis 6.2.5.2: more than two segments ahead of the last is a 400
      if (msn > seg.lastMsn + 2) return text(f.res, 400, '_HLS_msn too far ahead of the live edge');
      f.msn = msn;
      f.part = part ?? -1;
      return this.hold(f, 'reload', this.blockMs(seg));
    } else if (q.get('_HLS_part') !== null && this.lowLatency(f)) {
      return text(f.res, 400, '_HLS_part without _HLS_msn');
    }
    this.sendPlaylist(f);
  }

  private sendPlaylist(f: Fetch): void {
    const seg = f.seg;
    if (seg.closed) return text(f.res, 404, 'stream closed');
    this.send(f, OK.m3u8, this.playlists.of(seg, f.form.container, this.lowLatency(f)).body(f.query));
  }

  private lowLatency(f: Fetch): boolean {
    return this.c.lowLatency && f.form.container === 'fmp4';
  }

  /** RFC 8216bis: a blocked request that cannot be answered within three target durations gets a 503 */
  private blockMs(seg: Segmenter): number {
    return seg.targetDuration * 3 * 1000;
  }

  private send(f: Fetch, headers: string[], body: Buffer): void {
    const res = f.res;
    if (!this.head(f, headers, body.length)) return;
    res.end(body);
    f.player.handle.sent(body.length);
  }

  /** parts [from, to) of a segment: its boxes and slices of the sample store, one writev for all of them */
  private sendParts(f: Fetch, headers: string[], parts: readonly HlsPart[], from: number, to = parts.length): void {
    const res = f.res;
    let length = 0;
    for (let i = from; i < to; i++) length += parts[i].bytes;
    if (!this.head(f, headers, length)) return;
    res.cork();
    for (let i = from; i < to; i++) for (const b of parts[i].data) res.write(b);
    res.end();
    res.uncork();
    f.player.handle.sent(length);
  }

  /** the 200 head; false when there is no body to send (HEAD, or the client left) */
  private head(f: Fetch, headers: string[], length: number): boolean {
    const res = f.res;
    if (res.destroyed) return false;
    res.setHeader('Content-Length', length);
    res.writeHead(200, headers);
    if (f.req.method !== 'HEAD') return true;
    res.end();
    return false;
  }
}

function text(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, TEXT);
  res.end(body + '\n');
}

/** A CORS preflight: players on other origins may GET. */
function preflight(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.writeHead(204, [
    ...ORIGIN,
    'Access-Control-Allow-Methods',
    'GET, HEAD, OPTIONS',
    'Access-Control-Max-Age',
    '86400',
    'Access-Control-Allow-Headers',
    req.headers['access-control-request-headers'] ?? '*',
  ]);
  res.end();
}
