/**
 * The HTTP-FLV / WS-FLV server on flv-out's own port: play URLs, their authorisation, and the players they make.
 * `GET|HEAD /live/{stream}.flv?reqId&token[&via]` and the same path as a WebSocket upgrade; a play is served only for
 * an open request of that stream with its token (HTTP 401 / WS close 4401 otherwise, before any media), and a `via`
 * must name a stage on this gateway (400 / 4400): the player reads that stage's form of the stream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  chainVia,
  LogLimiter,
  playVia,
  type HttpListener,
  type MediaBus,
  type RequestLog,
  type RouteRequest,
  type Sessions,
  type ReaderOptions,
  BYTE_TOTAL_START,
} from '../../../plugin-sdk';
import type { FlvFormats, FlvFrame } from './flv-format';
import { Player, type PlayerOwner, type PlayerStats } from './player';
import type { TickFlush } from './tick';
import { ResponseHttp, SocketHttp, WsTransport, type Transport } from './transport';

export const APP = 'live';
const STREAM_PATH = /^([A-Za-z0-9_.~-]{1,128})\.flv$/;
const WS_UNAUTHORIZED = 4401;
const WS_BAD_REQUEST = 4400;
const CORS = { 'Access-Control-Allow-Origin': '*' } as const;

export interface FlvServerOptions {
  log: Logger;
  /** player started/stopped lines */
  requestLog: RequestLog;
  sessions: Sessions;
  /** the stages a play's `via` may name */
  bus: Pick<MediaBus, 'stages'>;
  formats: FlvFormats;
  tick: TickFlush;
  /** each player's queue cap on the bus */
  maxBacklogBytes: number;
  /** a play refused (unknown request or wrong token) */
  refused(): void;
  /** how a request's players read its stream: which tracks, and through which stage (AAC audio) */
  readFor(reqId: string): Pick<ReaderOptions<FlvFrame>, 'media' | 'via'>;
}

interface Play {
  stream: string;
  reqId: string;
  remote: string;
  /** the stage the play URL asked for */
  via: string | undefined;
}

/** a play refused for a bad `via`, with the reason */
interface BadVia {
  status: 400;
  reason: string;
}

export class FlvServer implements PlayerOwner {
  readonly tick: TickFlush;
  bytesOut = BYTE_TOTAL_START;
  private readonly players = new Map<string, Player>();
  private readonly byReq = new Map<string, Set<Player>>();
  private readonly wss: WebSocketServer;
  private nextId = 1;
  private stopped = false;

  private readonly refusalLog = new LogLimiter();

  constructor(private readonly o: FlvServerOptions) {
    this.tick = o.tick;
    // no subprotocol is ever picked: NMS-style "post"/"publisher" would mean publishing, which this server does not do
    this.wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 64 * 1024, handleProtocols: () => false });
  }

  get playerCount(): number {
    return this.players.size;
  }

  mount(http: HttpListener): void {
    const none = { auth: 'none' } as const;
    http.routes.raw('GET', `/${APP}/*`, (req, res) => this.onPlay(req, res), none);
    http.routes.raw('OPTIONS', `/${APP}/*`, (req, res) => preflight(req.raw, res), none);
    http.routes.raw('*', `/${APP}/*`, (req, res) => notAllowed(req.raw, res), none);
    http.routes.upgrade(`/${APP}/*`, (req, socket, head) => this.onUpgrade(req, socket, head), none);
  }

  /** Ends the players of one request (the stream's other requests keep theirs). */
  closeRequest(reqId: string): void {
    const set = this.byReq.get(reqId);
    if (set) for (const p of [...set]) p.close();
  }

  playerStats(): PlayerStats[] {
    const out: PlayerStats[] = [];
    for (const p of this.players.values()) out.push(p.stats());
    return out;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const p of [...this.players.values()]) p.drop();
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }

  // --- PlayerOwner --------------------------------------------------------------------------------------------

  sent(n: number): void {
    this.bytesOut += n;
  }

  gone(p: Player): void {
    if (this.players.get(p.id) !== p) return;
    this.players.delete(p.id);
    const set = this.byReq.get(p.reqId);
    set?.delete(p);
    if (set?.size === 0) this.byReq.delete(p.reqId);
    this.o.requestLog({ stream: p.stream, reqId: p.reqId, remote: p.remote, bytesOut: p.bytesOut, skips: p.skips }, 'player stopped');
  }

  dropped(p: Player, reason: string): void {
    this.o.log.info({ player: p.id, stream: p.stream, reqId: p.reqId, remote: p.remote, reason }, 'dropping a player that stopped reading');
  }

  // --- requests -----------------------------------------------------------------------------------------------

  /**
   * The play a request asks for: 404 for a path that names no stream, 401 for an unknown request or a wrong token,
   * 400 for a `via` that names no stage here.
   */
  private authorize(req: RouteRequest, protocol: string): Play | BadVia | 404 | 401 {
    let m: RegExpExecArray | null;
    try {
      m = STREAM_PATH.exec(decodeURIComponent(req.rest));
    } catch {
      return 404;
    }
    if (!m) return 404;
    const stream = m[1];
    const reqId = req.query.get('reqId') ?? '';
    const sock = req.raw.socket;
    const remote = `${sock.remoteAddress}:${sock.remotePort}`;
    if (!this.o.sessions.authorizePlay(stream, reqId, req.query.get('token') ?? '')) {
      this.o.refused();
      // anyone can send these: at most one line per address per 10 s, with the count left out
      this.refusalLog.log(this.o.log, 'warn', sock.remoteAddress ?? '', { stream, reqId, remote, protocol }, 'play refused: unknown request or wrong token');
      return 401;
    }
    const via = playVia(req.query, this.o.bus);
    if (!via.ok) {
      this.o.refused();
      this.refusalLog.log(this.o.log, 'warn', sock.remoteAddress ?? '', { stream, reqId, remote, protocol }, `play refused: ${via.reason}`);
      return { status: 400, reason: via.reason };
    }
    return { stream, reqId, remote, via: via.via };
  }

  private onPlay(req: RouteRequest, res: ServerResponse): void {
    req.raw.resume(); // a player's request body means nothing here
    const play = this.stopped ? 503 : this.authorize(req, 'http-flv');
    if (typeof play === 'number' || 'status' in play) {
      const status = typeof play === 'number' ? play : play.status;
      res.writeHead(status, { ...CORS, 'Content-Type': 'text/plain' });
      res.end(typeof play !== 'number' ? `${play.reason}\n` : play === 404 ? 'not found\n' : play === 401 ? 'unauthorized\n' : 'stopping\n');
      return;
    }
    res.writeHead(200, { ...CORS, 'Content-Type': 'video/x-flv', 'Cache-Control': 'no-cache, no-store', Connection: 'keep-alive' });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    const sock = res.socket;
    sock?.setNoDelay(true);
    // the player learns it is accepted now, even while the stream has no media yet
    res.flushHeaders();
    // a response that owns its socket has written its headers to it: our bytes can follow on the socket itself
    const t = sock ? new SocketHttp(this.tick, res, sock) : new ResponseHttp(this.tick, res);
    res.on('error', (err) => this.o.log.debug({ err: err.message }, 'HTTP-FLV player socket error'));
    this.attach(play, t);
  }

  private onUpgrade(req: RouteRequest, socket: Duplex, head: Buffer): void {
    const refuse = (status: string): void => {
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      socket.destroy();
    };
    if (this.stopped) return refuse('503 Service Unavailable');
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return refuse('400 Bad Request');
    const play = this.authorize(req, 'ws-flv');
    if (play === 404) return refuse('404 Not Found');
    this.wss.handleUpgrade(req.raw, socket, head, (ws: WebSocket) => {
      if (play === 401) {
        ws.close(WS_UNAUTHORIZED, 'unauthorized');
        return;
      }
      if ('status' in play) {
        ws.close(WS_BAD_REQUEST, play.reason.slice(0, 120));
        return;
      }
      ws.on('error', (err) => this.o.log.debug({ err: err.message }, 'WS-FLV player socket error'));
      // a player has nothing to say: what it sends is ignored (and capped by maxPayload)
      ws.on('message', () => undefined);
      const sock = socket as Socket;
      sock.setNoDelay(true);
      this.attach(play, new WsTransport(this.tick, ws, sock));
    });
  }

  private attach(play: Play, t: Transport): void {
    const handle = this.o.sessions.attachPlayer(play.reqId, { protocol: t.protocol, remote: play.remote });
    const media = this.o.sessions.getStreamByName(play.stream)?.media;
    if (!handle || !media || media.closed) {
      // the request or its stream closed since the play was authorised (same tick: rare)
      handle?.close();
      t.end();
      return;
    }
    const p = new Player(String(this.nextId++), play.stream, play.reqId, play.remote, t, handle, this);
    this.players.set(p.id, p);
    let set = this.byReq.get(p.reqId);
    if (!set) this.byReq.set(p.reqId, (set = new Set()));
    set.add(p);
    try {
      const read = this.o.readFor(p.reqId);
      const format = this.o.formats[read.media ?? 'av'];
      // the play's stage first, then the output's own form (AAC audio)
      p.sub = media.subscribe(p, { format, maxQueueBytes: this.o.maxBacklogBytes, media: read.media, via: chainVia(play.via, read.via) });
    } catch (err) {
      this.o.log.warn({ stream: p.stream, err: (err as Error).message }, 'player could not subscribe to its stream');
      p.close();
      return;
    }
    this.o.requestLog({ stream: p.stream, reqId: p.reqId, remote: p.remote, protocol: t.protocol, via: play.via }, 'player started');
  }
}

function notAllowed(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.writeHead(405, { ...CORS, Allow: 'GET, HEAD, OPTIONS', 'Content-Type': 'text/plain' });
  res.end('method not allowed\n');
}

/** A CORS preflight: players on other origins may GET. */
function preflight(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.writeHead(204, { ...CORS, 'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS', 'Access-Control-Max-Age': '86400' });
  res.end();
}
