/**
 * The talk WebSockets on the API port: `/talk/{stream}` (binary audio) and `/talk-stomp` (STOMP 1.2), their rules,
 * and the registry of talkers (one per channel).
 */
import type { WebSocket } from 'ws';
import type { Logger } from 'pino';
import type {
  LogLimiter,
  RequestLog,
  RouteRequest,
  Routes,
  Sessions,
  StrmRequest,
  TalkRefusal,
  TalkSession,
  IntercomTalkConnection as TalkConnection,
} from '../../../plugin-sdk';
import { closeWs, parseClientFormat, toBuffer, type ClientFormat } from './client-format';
import type { IntercomMeters } from './meters';
import { StompSession } from './stomp-session';
import { CLOSE, Talker, type TalkerHost } from './talker';

export interface TalkServerOptions {
  sessions: Sessions;
  log: Logger;
  /** talk started/ended: once per talker, at the site's requestLogLevel */
  requestLog: RequestLog;
  /** refusals and protocol errors, which a peer can cause at will: rate-limited per address */
  limiter: LogLimiter;
  meters: IntercomMeters;
  talkerHost: Omit<TalkerHost, 'ended'>;
  stompHeartBeatMs: number;
  maxMessageBytes: number;
  setInterval: (fn: () => void, ms: number) => () => void;
}

/** a refusal: the socket is closed with this code and reason before any audio */
interface Refusal {
  code: number;
  reason: string;
  metric: string;
}

export class TalkServer {
  /** by stream name: one talker per channel */
  private readonly talkers = new Map<string, Talker>();
  private readonly host: TalkerHost;

  constructor(private readonly o: TalkServerOptions) {
    this.host = {
      ...o.talkerHost,
      ended: (t) => {
        if (this.talkers.get(t.streamName) === t) this.talkers.delete(t.streamName);
      },
    };
  }

  get count(): number {
    return this.talkers.size;
  }

  mount(routes: Routes): void {
    const opts = { auth: 'none' as const, maxPayload: this.o.maxMessageBytes };
    routes.websocket('/talk/*', (ws, req) => this.binary(ws, req), opts);
    routes.websocket('/talk-stomp', (ws, req) => this.stomp(ws, req), { ...opts, protocols: ['v12.stomp'] });
  }

  /** The request closed (any cause): its talker goes, saying why. */
  requestClosed(reqId: string, reason: string): void {
    for (const t of this.talkers.values()) if (t.request.reqId === reqId) t.close(CLOSE.gone, `request closed: ${reason}`);
  }

  /** The pacer's tick, for every talker. */
  tick(now: number): void {
    for (const t of [...this.talkers.values()]) {
      try {
        t.tick(now);
      } catch (err) {
        // one talker's fault (a bug, a track no encoder takes) ends that talk, not the pacer of all the others
        this.o.log.error({ err, reqId: t.request.reqId }, 'talk: the uplink failed');
        t.close(CLOSE.internal, 'internal error');
      }
    }
  }

  closeAll(reason: string): void {
    for (const t of [...this.talkers.values()]) t.close(1001, reason);
  }

  /**
   * The rules every talk socket passes, in order: a good reqId and token (4401, as for players), a live dataTyp 2
   * request (4403), a known fmt (4400), and a free channel (4409).
   */
  private admit(req: StrmRequest | undefined, fmtRaw: string | null): { req: StrmRequest; fmt: ClientFormat } | Refusal {
    if (!req) return { code: CLOSE.badToken, reason: 'unknown reqId or wrong token', metric: 'token' };
    if (req.params.typ !== 'live' || req.params.dataTyp !== 2) {
      return { code: CLOSE.notIntercom, reason: 'not an intercom request (live, dataTyp 2)', metric: 'not-intercom' };
    }
    const fmt = parseClientFormat(fmtRaw);
    if (!fmt) return { code: CLOSE.badQuery, reason: 'fmt must be pcm16, g711a or g711u', metric: 'fmt' };
    const busy = this.talkers.get(req.streamName);
    if (busy && !busy.isClosed) return { code: CLOSE.busy, reason: 'another client is talking on this channel', metric: 'busy' };
    return { req, fmt };
  }

  /**
   * A talk by another plugin's transport (intercom-talks service): the same rules but the token, which the caller
   * checked; the HTTP status of a refusal is its close code's last three digits.
   */
  external(req: StrmRequest, fmt: ClientFormat, protocol: string, remote: string, conn: TalkConnection): TalkSession | TalkRefusal {
    const a = this.admit(req, fmt);
    if ('code' in a) {
      this.refused(a, remote, { protocol });
      return { status: a.code % 1000, reason: a.reason };
    }
    const talker = new Talker(this.host, a.req, a.fmt, protocol, remote, conn);
    this.started(talker, 'talk started', { protocol });
    talker.startDownlink();
    return {
      audio: (data) => (talker.isClosed ? undefined : talker.audio(data)),
      finish: (reason) => talker.finish(CLOSE.normal, reason),
      close: (reason) => talker.close(CLOSE.normal, reason),
      get isClosed() {
        return talker.isClosed;
      },
    };
  }

  /** a refusal counted and logged (rate-limited per address: a peer can cause them at will) */
  private refused(r: Refusal, remote: string, fields: Record<string, unknown>): void {
    this.o.meters.refused.inc({ reason: r.metric });
    this.o.limiter.log(this.o.log, 'info', remote, { remote, ...fields, reason: r.reason }, 'talk refused');
  }

  private refuse(ws: WebSocket, r: Refusal, remote: string): void {
    this.refused(r, remote, { code: r.code });
    closeWs(ws, r.code, r.reason);
  }

  /** the channel is this talker's from now on, and the talk's start is logged */
  private started(t: Talker, msg: string, fields: Record<string, unknown> = {}): void {
    this.talkers.set(t.streamName, t);
    this.o.requestLog({ reqId: t.request.reqId, stream: t.streamName, fmt: t.fmt, remote: t.remote, ...fields }, msg);
  }

  private binary(ws: WebSocket, rr: RouteRequest): void {
    const remote = `${rr.remote}`;
    let stream: string;
    try {
      stream = decodeURIComponent(rr.rest);
    } catch {
      stream = ''; // a broken %-escape names no stream: refused like an unknown one
    }
    const req = this.o.sessions.authorizePlay(stream, rr.query.get('reqId') ?? '', rr.query.get('token') ?? '');
    const a = this.admit(req, rr.query.get('fmt'));
    if ('code' in a) return this.refuse(ws, a, remote);
    const talker = new Talker(this.host, a.req, a.fmt, 'talk', remote, {
      sendAudio: (data) => {
        if (ws.readyState === ws.OPEN) ws.send(data, { binary: true });
      },
      backlog: () => ws.bufferedAmount,
      close: (code, reason) => closeWs(ws, code, reason),
    });
    this.started(talker, 'talk started');
    this.o.meters.talks.talk.inc();
    talker.startDownlink();
    ws.on('message', (data, isBinary) => {
      if (talker.isClosed) return;
      if (!isBinary) {
        this.o.meters.malformed.inc({ proto: 'talk' });
        talker.close(CLOSE.unsupportedData, 'binary audio messages only');
        return;
      }
      let why: string | undefined;
      try {
        why = talker.audio(toBuffer(data));
      } catch (err) {
        // a bug of ours: this talk ends, the gateway goes on
        this.o.log.error({ err, reqId: a.req.reqId }, 'talk: a message could not be handled');
        talker.close(CLOSE.internal, 'internal error');
        return;
      }
      if (why) {
        this.o.meters.malformed.inc({ proto: 'talk' });
        talker.close(CLOSE.invalidPayload, why);
      }
    });
    ws.on('close', (code) => {
      if (code === 1009) this.o.meters.refused.inc({ reason: 'oversized' });
      // a client that closed normally has its last words sent; any other end (oversized, broken) drops them
      if (code === 1000 || code === 1001 || code === 1005) talker.finish(code, 'client closed');
      else talker.close(code, 'client closed');
    });
  }

  private stomp(ws: WebSocket, rr: RouteRequest): void {
    const remote = `${rr.remote}`;
    const reqId = rr.query.get('reqId') ?? '';
    const known = this.o.sessions.getRequest(reqId);
    const req = this.o.sessions.authorizePlay(known?.streamName ?? '', reqId, rr.query.get('token') ?? '');
    const a = this.admit(req, rr.query.get('fmt'));
    if ('code' in a) return this.refuse(ws, a, remote);
    const session = new StompSession(ws, {
      reqId: a.req.reqId,
      heartBeatMs: this.o.stompHeartBeatMs,
      maxBodyBytes: this.o.maxMessageBytes,
      meters: this.o.meters,
      log: (obj, msg) => this.o.limiter.log(this.o.log, 'info', remote, obj, msg),
      now: () => this.o.talkerHost.now(),
      onInternalError: (err) => this.o.log.error({ err, reqId: a.req.reqId }, 'talk (STOMP): a frame could not be handled'),
      setInterval: this.o.setInterval,
    });
    const talker = new Talker(this.host, a.req, a.fmt, 'talk-stomp', remote, session.connection());
    session.attach(talker);
    this.started(talker, 'talk (STOMP) started');
    this.o.meters.talks.stomp.inc();
  }
}
