/**
 * Plays of an output, as decisions.md wants them: `servePlays(ctx, { protocol })` gives `play(req, socket, read)`,
 * which takes a play URL's request (`/{prefix}/{stream}?reqId&token[&via]`) and a player socket (player-sockets.ts)
 * and does the rest:
 * - authorises it: `reqId` open on that stream and `token` its user.token (401 / WebSocket 4401 otherwise), `via` a
 *   stage on this gateway (400 / 4400), a path that names a stream (404 / 4404); each refusal is counted in the
 *   log, one line per address per 10 s;
 * - registers the player with the sessions (the request counts it, is consumed, gets its bytes in `bytesOut`);
 * - reads the stream through the bus (its GOP cache starts the player at a key frame) with the socket's
 *   backpressure (the bus queues while the socket holds more than its mark, resumes on drain, and skips a GOP for a
 *   player that falls too far behind) and `holdsPayloads` from the socket's backlog, so payload reuse stays on;
 * - ends the player when its request closes, when the stream ends, and at `stop()`.
 */
import type { Logger } from 'pino';
import type { MediaBus, MediaSelect, ReaderHandle, UnitFormat, Via } from './bus';
import type { RouteRequest } from './http';
import { BYTE_TOTAL_START } from './hot-metrics';
import { LogLimiter } from './log-limiter';
import type { AccessUnit, TrackInfo } from './media';
import { chainVia, playVia } from './play-via';
import type { PlayerSocket, PlayRefusal } from './player-sockets';
import type { RequestLog } from './plugin';
import type { ChannelStream, PlayerHandle, Sessions, StrmRequest } from './sessions';
import { Buffer } from 'node:buffer';

const STREAM_NAME = /^[A-Za-z0-9_.~-]{1,128}$/;

/** What `servePlays` needs of the plugin's context (`ctx` itself will do). */
export interface PlaysContext {
  readonly sessions: Sessions;
  readonly bus: Pick<MediaBus, 'stages'>;
  readonly log: Logger;
  readonly requestLog: RequestLog;
}

export interface PlaysOptions {
  /** the players' protocol in status and log lines, e.g. 'raw-h264-ws' */
  protocol: string;
  /**
   * The stream's name from the rest of the route's path (`req.rest`, percent-decoded), e.g. without an extension:
   * `(rest) => rest.replace(/\.h264$/, '')`. Default: the rest as it is. A rest that names no stream: 404.
   */
  streamOf?(rest: string): string | undefined;
  /** each refusal, e.g. for a counter (the log has one line per address per 10 s) */
  onRefused?(status: PlayRefusal): void;
}

/** How one play reads its stream. */
export interface PlayRead<F = undefined> {
  /** tracks to read (default: all) */
  media?: MediaSelect;
  /** a format whose framing `bytes` gets */
  format?: UnitFormat<F>;
  /** the output's own form of the stream, read after the play's `via` (e.g. `aacVia(...)`) */
  via?: Via;
  /** queued bytes past which the player skips to the next key frame (default: the bus's) */
  maxQueueBytes?: number;
  /** the bytes a unit sends (default: its payload); undefined or empty sends nothing */
  bytes?(unit: AccessUnit, framed: F): Buffer | undefined;
  /**
   * An output that sends a unit as several messages (RTP packets to a peer connection) sends them itself and
   * returns the bytes it sent, for the request's count; `bytes` and the socket's `send` are then unused.
   */
  sendUnit?(unit: AccessUnit, framed: F): number;
  /** the tracks, before the units that need them and at each change (e.g. to send a header first) */
  tracks?(tracks: ReadonlyArray<TrackInfo>, play: Play): void;
}

export interface Play {
  readonly request: StrmRequest;
  readonly stream: ChannelStream;
  /** the stage the play URL asked for */
  readonly via: string | undefined;
  readonly socket: PlayerSocket;
  readonly bytesOut: number;
  /** bytes of the output's own (a header): sent and counted like the units' */
  send(bytes: Buffer): void;
  /** ends it gracefully */
  close(reason: string): void;
}

export interface Plays {
  /** Authorises and starts one play, or refuses it on its socket (and answers undefined). */
  play<F = undefined>(req: RouteRequest, socket: PlayerSocket, read?: PlayRead<F>): Play | undefined;
  /** players playing now */
  readonly count: number;
  /** drops every play and refuses new ones (503): call it from the plugin's stop(), or return the `Plays` as the instance */
  stop(): void;
}

/** Plays of one output protocol; see the module's comment. */
export function servePlays(ctx: PlaysContext, opts: PlaysOptions): Plays {
  const byReq = new Map<string, Set<PlayState>>();
  const refusals = new LogLimiter();
  let count = 0;
  let stopped = false;
  const protocol = opts.protocol;

  const refuse = (socket: PlayerSocket, status: PlayRefusal, reason: string, fields: Record<string, unknown>): undefined => {
    socket.refuse(status, reason);
    opts.onRefused?.(status);
    const address = socket.remote.slice(0, socket.remote.lastIndexOf(':'));
    refusals.log(ctx.log, 'warn', address, { ...fields, remote: socket.remote, protocol, status }, `play refused: ${reason}`);
    return undefined;
  };
  const streamName = (rest: string): string | undefined => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(rest);
    } catch {
      return undefined;
    }
    const name = opts.streamOf ? opts.streamOf(decoded) : decoded;
    return name !== undefined && STREAM_NAME.test(name) ? name : undefined;
  };

  ctx.sessions.onRequestClosed((r) => {
    for (const p of [...(byReq.get(r.reqId) ?? [])]) p.close('request closed');
  });

  class PlayState implements Play {
    sub: ReaderHandle | undefined;
    bytesOut = BYTE_TOTAL_START;
    gone = false;
    constructor(
      readonly request: StrmRequest,
      readonly stream: ChannelStream,
      readonly via: string | undefined,
      readonly socket: PlayerSocket,
      private readonly handle: PlayerHandle,
    ) {}

    send(bytes: Buffer): void {
      if (bytes.length === 0 || this.gone) return;
      this.socket.send(bytes);
      this.sent(bytes.length);
    }

    sent(n: number): void {
      this.bytesOut += n;
      this.handle.sent(n);
    }

    close(reason: string): void {
      this.sub?.close();
      if (!this.gone) this.socket.end(reason);
    }

    drop(): void {
      this.sub?.close();
      this.socket.destroy();
    }

    /** the connection is gone */
    left(): void {
      if (this.gone) return;
      this.gone = true;
      this.sub?.close();
      this.handle.close();
      count--;
      const set = byReq.get(this.request.reqId);
      set?.delete(this);
      if (set?.size === 0) byReq.delete(this.request.reqId);
      ctx.requestLog({ stream: this.stream.name, reqId: this.request.reqId, remote: this.socket.remote, protocol, bytesOut: this.bytesOut }, 'player stopped');
    }
  }

  return {
    get count() {
      return count;
    },
    stop() {
      stopped = true;
      for (const set of [...byReq.values()]) for (const p of [...set]) p.drop();
    },
    play<F = undefined>(req: RouteRequest, socket: PlayerSocket, read: PlayRead<F> = {}): Play | undefined {
      if (stopped) return refuse(socket, 503, 'stopping', {});
      const name = streamName(req.rest);
      if (name === undefined) return refuse(socket, 404, 'not found', { path: req.path });
      const reqId = req.query.get('reqId') ?? '';
      const request = ctx.sessions.authorizePlay(name, reqId, req.query.get('token') ?? '');
      if (!request) return refuse(socket, 401, 'unauthorized', { stream: name, reqId });
      const via = playVia(req.query, ctx.bus);
      if (!via.ok) return refuse(socket, 400, via.reason, { stream: name, reqId });
      const stream = ctx.sessions.getStreamByName(name);
      const handle = stream && ctx.sessions.attachPlayer(reqId, { protocol, remote: socket.remote });
      if (!stream || !handle || stream.media.closed) {
        // the request or its stream closed since the play was authorised (same tick: rare)
        handle?.close();
        return refuse(socket, 404, 'request closed', { stream: name, reqId });
      }
      const p = new PlayState(request, stream, via.via, socket, handle);
      const bytes = read.bytes?.bind(read);
      const sendUnit = read.sendUnit?.bind(read);
      try {
        p.sub = stream.media.subscribe<F>(
          {
            write: sendUnit
              ? (unit, framed) => {
                  if (!p.gone) p.sent(sendUnit(unit, framed));
                }
              : (unit, framed) => p.send((bytes ? bytes(unit, framed) : unit.payload) ?? EMPTY),
            tracks: read.tracks && ((list) => read.tracks!(list, p)),
            writable: () => socket.writable(),
            holdsPayloads: () => socket.holdsPayloads(),
            // the stream closed, or the player stopped reading and was ended (a graceful end would wait behind its backlog)
            end: (reason) => (reason.startsWith('reader stuck') ? p.drop() : p.close(reason)),
          },
          { media: read.media, format: read.format, via: chainVia(via.via, read.via), maxQueueBytes: read.maxQueueBytes },
        );
      } catch (err) {
        handle.close();
        // a stage's params check refuses with a TypeError: the play's fault; anything else is the gateway's
        const msg = (err as Error | undefined)?.message ?? String(err);
        return refuse(socket, err instanceof TypeError ? 400 : 503, msg, { stream: name, reqId });
      }
      socket.accept();
      count++;
      let set = byReq.get(reqId);
      if (!set) byReq.set(reqId, (set = new Set()));
      set.add(p);
      socket.onDrain(() => p.sub?.resume());
      socket.onClose(() => p.left());
      ctx.requestLog({ stream: name, reqId, remote: socket.remote, protocol, via: via.via }, 'player started');
      return p;
    },
  };
}

const EMPTY = Buffer.alloc(0);
