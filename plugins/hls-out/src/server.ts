/**
 * HLS over the API port: `/hls/{stream}/index.m3u8?reqId&token[&via]` and the init segments, segments and parts it
 * names, each with the same query. Served only for an open fmt 1 request of that stream with its token (401
 * otherwise; 404 for a stream that is not open or a name this server never makes); a `via` names a stage on this
 * gateway (400 otherwise), whose form of the stream the fetch reads. Blocking playlist reloads (`_HLS_msn`,
 * `_HLS_part`) and fetches of the hinted next part wait for it, as RFC 8216bis asks.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { playQuery, playVia, type Clock, type MediaBus, type RouteRequest, type Routes, type Sessions } from '../../../plugin-sdk';
import type { HlsOutConfig } from './config';
import type { HlsForm, HlsForms } from './forms';
import { HlsPlayers } from './players';
import { PlayVerdicts } from './play-verdicts';
import { nextPart, renderPlaylist } from './playlist';
import type { HlsPart, Segmenter } from './segmenter';

export const HLS_PREFIX = '/hls';

const CORS = { 'Access-Control-Allow-Origin': '*' } as const;
const FILE = /^([A-Za-z0-9_.~-]{1,128})\/(index\.m3u8|init-(\d{1,9})\.mp4|seg-(\d{1,9})\.(m4s|ts)|part-(\d{1,9})\.(\d{1,4})\.m4s)$/;
const TYPES = { m3u8: 'application/vnd.apple.mpegurl', mp4: 'video/mp4', ts: 'video/mp2t' } as const;

export interface HlsServerStats {
  fetched(kind: 'playlist' | 'init' | 'segment' | 'part'): void;
  refused(): void;
  blockTimeouts(): void;
  /** a fetch authorised by its connection's earlier verdict, without the token's digests */
  verdictKept(): void;
}

export class HlsServer {
  readonly players: HlsPlayers;
  readonly verdicts: PlayVerdicts;
  private stopped = false;
  private readonly waiting = new Set<() => void>();

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
        res.writeHead(405, { ...CORS, Allow: 'GET, HEAD, OPTIONS', 'Content-Type': 'text/plain' }).end('method not allowed\n');
      },
      none,
    );
  }

  stop(): void {
    this.stopped = true;
    for (const wake of [...this.waiting]) wake();
    this.players.stop();
  }

  private async onGet(req: RouteRequest, res: ServerResponse): Promise<void> {
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
    const fetch = this.players.fetch(r.reqId, req.remote);
    if (!fetch) return text(res, 404, 'request closed');
    res.on('close', fetch.done);
    const query = `?${playQuery(r.reqId, r.params.user.token, via.via)}`;
    const send = (type: string, body: Buffer | readonly Buffer[]): void => {
      if (res.destroyed) return; // (the client left while its fetch waited)
      const parts = Buffer.isBuffer(body) ? [body] : body;
      const length = parts.reduce((n, b) => n + b.length, 0);
      res.writeHead(200, { ...CORS, 'Content-Type': type, 'Content-Length': length, 'Cache-Control': 'no-cache' });
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      // a part is its boxes and slices of the sample store: one writev for all of them, not a write each
      res.cork();
      for (const b of parts) res.write(b);
      res.end();
      res.uncork();
      fetch.sent(length);
    };
    const seg = form.segmenter;
    if (m[2] === 'index.m3u8') {
      this.stats.fetched('playlist');
      return this.playlist(req, res, form, query, send);
    }
    if (m[3] !== undefined) {
      this.stats.fetched('init');
      const init = form.container === 'fmp4' ? seg.initOf(Number(m[3])) : undefined;
      return init?.data ? send(TYPES.mp4, init.data) : text(res, 404, 'no such init segment');
    }
    if (m[4] !== undefined) {
      this.stats.fetched('segment');
      const msn = Number(m[4]);
      if ((m[5] === 'ts') !== (form.container === 'mpegts')) return text(res, 404, 'no such segment');
      // the segment being made is answered once complete (a player that asks a little early)
      if (!seg.segment(msn) && seg.current?.msn === msn) await this.waitFor(res, seg, () => !!seg.segment(msn) || seg.current?.msn !== msn, this.blockMs(seg));
      const done = seg.segment(msn);
      return done
        ? send(
            form.container === 'fmp4' ? TYPES.mp4 : TYPES.ts,
            done.parts.flatMap((p) => p.data),
          )
        : text(res, 404, 'no such segment');
    }
    this.stats.fetched('part');
    const msn = Number(m[6]);
    const index = Number(m[7]);
    if (form.container !== 'fmp4' || !this.c.lowLatency) return text(res, 404, 'no parts: not a low-latency stream');
    let part: HlsPart | undefined = seg.part(msn, index);
    if (!part) {
      // the hinted part (or one a little further on in the segment being made): answered when it exists
      const next = nextPart(seg);
      if (msn === next.msn && index >= next.index && index < next.index + 8) {
        await this.waitFor(res, seg, () => !!seg.part(msn, index) || seg.lastMsn > msn || (seg.lastMsn === msn && !seg.current), this.blockMs(seg));
        part = seg.part(msn, index);
      }
    }
    return part ? send(TYPES.mp4, part.data) : text(res, 404, 'no such part');
  }

  private async playlist(req: RouteRequest, res: ServerResponse, form: HlsForm, query: string, send: (type: string, body: Buffer) => void): Promise<void> {
    const seg = form.segmenter;
    const ll = this.c.lowLatency && form.container === 'fmp4';
    // an early player: held until the first segment exists, as FLV players are held until the first keyframe
    if (!seg.hasMedia) {
      await this.waitFor(res, seg, () => seg.hasMedia || seg.closed, this.c.earlyWaitSec * 1000);
      if (res.destroyed) return;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the segmenter gets its media while waitFor is awaited
      if (!seg.hasMedia) {
        res.setHeader('Retry-After', '1');
        return text(res, seg.closed ? 404 : 503, seg.closed ? 'stream closed' : 'no media yet');
      }
    }
    const msnQ = req.query.get('_HLS_msn');
    if (ll && msnQ !== null) {
      const msn = Number(msnQ);
      const partQ = req.query.get('_HLS_part');
      const part = partQ === null ? undefined : Number(partQ);
      if (!Number.isInteger(msn) || msn < 0 || (part !== undefined && (!Number.isInteger(part) || part < 0)))
        return text(res, 400, 'bad _HLS_msn or _HLS_part');
      // RFC 8216bis 6.2.5.2: more than two segments ahead of the last is a 400
      if (msn > seg.lastMsn + 2) return text(res, 400, '_HLS_msn too far ahead of the live edge');
      if (!seg.has(msn, part)) {
        const ok = await this.waitFor(res, seg, () => seg.has(msn, part) || seg.closed, this.blockMs(seg));
        if (res.destroyed) return;
        if (!ok || seg.closed) {
          this.stats.blockTimeouts();
          return text(res, seg.closed ? 404 : 503, seg.closed ? 'stream closed' : 'the part asked for did not come in time');
        }
      }
    } else if (req.query.get('_HLS_part') !== null && ll) {
      return text(res, 400, '_HLS_part without _HLS_msn');
    }
    if (seg.closed) return text(res, 404, 'stream closed');
    send(TYPES.m3u8, Buffer.from(renderPlaylist(seg, { container: form.container, lowLatency: ll, query })));
  }

  /** RFC 8216bis: a blocked request that cannot be answered within three target durations gets a 503 */
  private blockMs(seg: Segmenter): number {
    return seg.targetDuration * 3 * 1000;
  }

  /** resolves true once `ready()` holds (checked at each change of the segmenter), false at the timeout or a closed client */
  private waitFor(res: ServerResponse, seg: Segmenter, ready: () => boolean, ms: number): Promise<boolean> {
    if (ready()) return Promise.resolve(true);
    return new Promise((resolve) => {
      let settled = false;
      const finish = (v: boolean): void => {
        if (settled) return;
        settled = true;
        off();
        cancel();
        res.off('close', gone);
        this.waiting.delete(wake);
        resolve(v);
      };
      const wake = (): void => finish(ready());
      const gone = (): void => finish(false);
      const off = seg.onChange(() => {
        if (ready()) finish(true);
      });
      const cancel = this.clock.setTimeout(() => finish(ready()), ms);
      res.on('close', gone);
      this.waiting.add(wake);
    });
  }
}

function text(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { ...CORS, 'Content-Type': 'text/plain', 'Cache-Control': 'no-cache' });
  res.end(body + '\n');
}

/** A CORS preflight: players on other origins may GET. */
function preflight(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.writeHead(204, {
    ...CORS,
    'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS',
    'Access-Control-Max-Age': '86400',
    'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? '*',
  });
  res.end();
}
