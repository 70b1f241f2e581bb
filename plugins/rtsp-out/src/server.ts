/**
 * The RTSP 1.0 server (RFC 2326) on rtsp-out's port: what each request means, the sessions requests set up, and
 * session and connection timeouts; a connection's wire side (requests answered in order) is connection.ts. Parsing and serialisation are the SDK's RTSP wire module (plugin-sdk/rtsp); packets are the bus format's (rtp-format.ts);
 * each playing session is a bus reader (session.ts).
 */
import { randomBytes } from 'node:crypto';
import { isIPv6, type Socket } from 'node:net';
import type { RemoteInfo } from 'node:dgram';
import { LogLimiter, playVia, type Cancel, type ChannelStream, type StrmRequest } from '../../../plugin-sdk';
import { parsePlayUri, presentationUrl, trackUrl, type PlayTarget } from './play-url';
import { parseTransports, sessionIdOf, cseqOf, type RtspRequest } from '../../../plugin-sdk/rtsp';
import { Connection, type ConnectionHost, type Reply } from './connection';
import { Planner } from './planner';
import { buildSdp, presentTracks } from './sdp';
import { RtspSession, type Plan, type SessionOwner } from './session';
import { SessionRegistry } from './session-registry';
import type { RtspServerOptions } from './server-options';
import { chooseTransport, transportHeader } from './setup-transport';

const PUBLIC = 'OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER';
/** sessions one connection may hold (a client needs one per presentation) */
const MAX_SESSIONS_PER_CONNECTION = 4;
/** a partial request older than this closes its connection (slow-header clients hold no memory for long) */
const PARTIAL_REQUEST_MS = 10_000;
/** a UDP send queue (libuv's, when the kernel's buffer is full) past which datagrams are dropped and counted */
const UDP_QUEUE_MAX = 4 * 1024 * 1024;

export class RtspServer implements SessionOwner {
  readonly cname: string;
  private readonly connections = new Set<Connection>();
  private readonly sessions = new SessionRegistry();
  private readonly planner: Planner;
  private readonly sweep: Cancel;
  private readonly badLog = new LogLimiter();
  private readonly refusalLog = new LogLimiter();
  private stopped = false;
  /** what a connection asks of this server: its requests answered, its malformed input counted */
  private readonly connectionHost: ConnectionHost = {
    now: () => this.now(),
    handle: (c, req) => this.handle(c, req),
    bad: (c, reason) => this.bad(c, reason),
    failed: (c, err) => this.o.log.warn({ remote: c.remote, err: (err as Error | undefined)?.message }, 'RTSP request failed'),
  };

  constructor(private readonly o: RtspServerOptions) {
    this.cname = o.cname;
    this.planner = new Planner({ bus: o.bus, clock: o.clock, log: o.log, audioCodecs: o.config.audioCodecs, describeWaitMs: o.config.describeWaitSec * 1000 });
    const timeoutMs = o.config.sessionTimeoutSec * 1000;
    this.sweep = o.clock.setInterval(() => this.checkTimeouts(), Math.max(100, Math.min(1000, timeoutMs / 4)));
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  sessionsBy(lower: 'tcp' | 'udp', playing: boolean): number {
    return this.sessions.countBy(lower, playing);
  }

  // --- SessionOwner -------------------------------------------------------------------------------------------

  now(): number {
    return this.o.clock.now();
  }

  sent(n: number): void {
    this.o.hooks.sent(n);
  }

  udpSend(rtcp: boolean, parts: Buffer[], port: number, host: string): boolean {
    const sock = rtcp ? this.o.rtcpSocket : this.o.rtpSocket;
    // a UDP reader has no backpressure: a full send queue drops, as the network would
    if (sock.getSendQueueSize() > UDP_QUEUE_MAX) {
      this.o.hooks.udpDropped();
      return false;
    }
    try {
      sock.send(parts, port, host);
    } catch {
      // the socket closed under us (gateway stopping): the datagram is lost like any other
      this.o.hooks.udpDropped();
      return false;
    }
    return true;
  }

  readerEnded(s: RtspSession, reason: string): void {
    const stuck = reason.startsWith('reader stuck');
    if (stuck)
      this.o.log.info({ session: s.id, stream: s.plan.stream, reqId: s.reqId, remote: s.remote, reason }, 'dropping an RTSP reader that stopped reading');
    // a stuck TCP reader is not reading its socket either: nothing more can go to it
    this.endSession(s, reason, !stuck, stuck ? 'destroy' : 'end');
  }

  // --- inputs -------------------------------------------------------------------------------------------------

  onConnection(socket: Socket): void {
    if (this.stopped) {
      socket.destroy();
      return;
    }
    const c = new Connection(socket, this.o.config.maxHeaderBytes, this.connectionHost);
    this.connections.add(c);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => c.onData(chunk));
    socket.on('error', (err) => this.o.log.debug({ remote: c.remote, err: err.message }, 'RTSP connection error'));
    socket.on('end', () => (c.peerEnded = true));
    socket.on('close', () => this.onClose(c));
    socket.on('drain', () => c.resumeReaders());
  }

  /** RTP or RTCP from a UDP reader (receiver reports, NAT keep-alives): it is still there. */
  onUdp(_msg: Buffer, rinfo: RemoteInfo): void {
    const peer = `${rinfo.address.replace(/^::ffff:/, '')}:${rinfo.port}`;
    const s = this.sessions.ofPeer(peer);
    if (s) s.lastSeen = this.now();
    else this.o.hooks.unknownPeer(peer);
  }

  /** peers another worker heard from (their datagrams reached it, not this one) */
  heardElsewhere(peers: readonly string[]): void {
    const now = this.now();
    for (const p of peers) {
      const s = this.sessions.ofPeer(p);
      if (s) s.lastSeen = now;
    }
  }

  /** Ends the sessions of a closed request (decisions.md: closing a request closes its players). */
  closeRequest(reqId: string): void {
    this.planner.cancel((w) => w.reqId === reqId);
    for (const s of this.sessions.ofRequest(reqId)) this.endSession(s, 'request closed', true, 'end');
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.sweep();
    this.planner.cancel(() => true);
    for (const s of this.sessions.all()) this.endSession(s, 'server stopping', true, 'end');
    for (const c of [...this.connections]) c.socket.destroy();
  }

  private onClose(c: Connection): void {
    c.closed = true;
    this.connections.delete(c);
    this.planner.cancel((w) => w.owner === c);
    for (const s of [...c.sessions]) {
      // RFC 2326: a session outlives its connection; a UDP one goes on until it times out or is torn down
      if (s.lower === 'tcp') this.endSession(s, 'connection closed', false, 'none');
      else s.socket = undefined;
    }
  }

  private bad(c: Connection, reason: string): void {
    this.o.hooks.badRequest();
    // anyone can send these: at most one line per address per 10 s
    this.badLog.log(this.o.log, 'warn', c.ip, { remote: c.remote, reason }, 'malformed RTSP request');
  }

  // --- requests -----------------------------------------------------------------------------------------------

  private async handle(c: Connection, req: RtspRequest): Promise<Reply> {
    if (cseqOf(req) === undefined) {
      // RFC 2326 12.17: every request carries a CSeq; without one the reply could not be matched
      this.bad(c, req.headers.has('cseq') ? 'malformed CSeq' : 'missing CSeq');
      return { status: 400 };
    }
    const sid = sessionIdOf(req);
    const touched = sid !== undefined ? this.sessions.get(sid) : undefined;
    if (touched) touched.lastSeen = this.now();
    switch (req.method) {
      case 'OPTIONS':
        return { status: 200, headers: [['Public', PUBLIC], ...sessionHeader(touched)] };
      case 'DESCRIBE':
        return this.describe(c, req);
      case 'SETUP':
        return this.setup(c, req);
      case 'PLAY':
        return this.play(c, req, touched, sid);
      case 'PAUSE':
        if (!touched) return { status: 454 };
        touched.pause();
        return { status: 200, headers: sessionHeader(touched) };
      case 'TEARDOWN':
        if (!touched) return { status: 454 };
        this.endSession(touched, 'teardown', true, 'none');
        return { status: 200 };
      case 'GET_PARAMETER':
      case 'SET_PARAMETER':
        // keep-alives (RFC 2326 10.8); this server has no parameters to get or set
        if (sid !== undefined && !touched) return { status: 454 };
        if (req.method === 'SET_PARAMETER' && req.body.length > 0) return { status: 451, headers: sessionHeader(touched) };
        return { status: 200, headers: sessionHeader(touched) };
      case 'ANNOUNCE':
      case 'RECORD':
      case 'REDIRECT':
        // publishing into this server is not a thing: media comes from terminals and rtsp-source
        return { status: 405, headers: [['Allow', PUBLIC]] };
      default:
        this.bad(c, `unknown method ${req.method.slice(0, 32)}`);
        return { status: 501, headers: [['Public', PUBLIC]] };
    }
  }

  /**
   * The request a play URL names, when its reqId is open on that stream and the token is its user.token (else 401),
   * and the stage its `via` asks for, when that is one on this gateway (else 400).
   */
  private authorize(c: Connection, t: PlayTarget, method: string): { request: StrmRequest; stream: ChannelStream; play: string | undefined } | 400 | 401 {
    const request = this.o.sessions.authorizePlay(t.stream, t.reqId, t.token);
    const stream = request && this.o.sessions.getStreamByName(t.stream);
    const fields = { stream: t.stream, reqId: t.reqId.slice(0, 64), remote: c.remote, method };
    if (!request || !stream || stream.media.closed) {
      this.o.hooks.refused();
      this.refusalLog.log(this.o.log, 'warn', c.ip, fields, 'RTSP play refused: unknown request or wrong token');
      return 401;
    }
    const via = playVia(t.query, this.o.bus);
    if (!via.ok) {
      this.o.hooks.refused();
      this.refusalLog.log(this.o.log, 'warn', c.ip, fields, `RTSP play refused: ${via.reason}`);
      return 400;
    }
    return { request, stream, play: via.via };
  }

  private async describe(c: Connection, req: RtspRequest): Promise<Reply> {
    const t = parsePlayUri(req.uri);
    if (!t) return { status: 404 };
    const auth = this.authorize(c, t, 'DESCRIBE');
    if (typeof auth === 'number') return { status: auth };
    // always anew: a client describing again (after a codec change ended its session) gets the stream as it is now
    const plan = await this.planFor(c, t, auth.request, auth.stream, auth.play, true);
    if (typeof plan === 'number') return { status: plan, close: plan === 404 };
    const sdp = buildSdp(plan.presentation, {
      stream: plan.stream,
      sessionId: String(Date.now()),
      control: (track) => trackUrl(plan.host, plan.stream, track, plan.reqId, plan.token, plan.play),
    });
    return { status: 200, headers: [['Content-Base', `${presentationUrl(plan.host, plan.stream, plan.reqId, plan.token, plan.play)}`]], body: sdp };
  }

  private async setup(c: Connection, req: RtspRequest): Promise<Reply> {
    const t = parsePlayUri(req.uri);
    if (!t) return { status: 404 };
    const auth = this.authorize(c, t, 'SETUP');
    if (typeof auth === 'number') return { status: auth };
    const plan = await this.planFor(c, t, auth.request, auth.stream, auth.play);
    if (typeof plan === 'number') return { status: plan, close: plan === 404 };
    const tracks = presentTracks(plan.presentation);
    const asked = t.track ?? (tracks.length === 1 ? tracks[0] : undefined);
    if (asked === undefined) return { status: 459 };
    const track = tracks.find((x) => x === asked);
    if (track === undefined) return { status: 404 };

    const sid = sessionIdOf(req);
    let s = sid !== undefined ? this.sessions.get(sid) : undefined;
    // a TCP session's media rides on its own connection: another connection cannot set it up
    if (sid !== undefined && (!s || (s.lower === 'tcp' && s.socket !== c.socket))) return { status: 454 };
    if (s && (s.reqId !== plan.reqId || s.plan.stream !== plan.stream || s.plan.play !== plan.play)) return { status: 459 };
    if (s && s.state === 'playing') return { status: 455, headers: sessionHeader(s) };

    const udpOk = !(isIPv6(c.ip) && this.o.rtpSocket.address().family === 'IPv4');
    const tt = chooseTransport(parseTransports(req.headers.get('transport') ?? ''), { track, ip: c.ip, udpOk, session: s, onConnection: c.sessions });
    if (tt === undefined) return { status: 461, headers: sessionHeader(s) };

    if (!s) {
      if (c.sessions.size >= MAX_SESSIONS_PER_CONNECTION) return { status: 453 };
      s = new RtspSession(randomBytes(8).toString('hex'), plan, tt.lower, c.socket, c.remote, this, auth.stream.media, tt.lower === 'tcp' ? c : undefined);
      this.sessions.add(s);
      c.sessions.add(s);
    }
    this.sessions.setTransport(s, track, tt);
    const transport = transportHeader(tt, this.o.rtpSocket.address().port, this.o.rtcpSocket.address().port);
    return { status: 200, headers: [['Transport', transport], ...sessionHeader(s, this.o.config.sessionTimeoutSec)] };
  }

  private async play(c: Connection, req: RtspRequest, s: RtspSession | undefined, sid: string | undefined): Promise<Reply> {
    if (sid === undefined || !s || (s.lower === 'tcp' && s.socket !== c.socket)) return { status: 454 };
    const t = parsePlayUri(req.uri);
    if (t && t.stream !== s.plan.stream) return { status: 454 };
    if (s.state === 'playing') return { status: 200, headers: [...sessionHeader(s), ['Range', 'npt=0.000-']] };
    const stream = this.o.sessions.getStreamByName(s.plan.stream);
    s.handle ??= this.o.sessions.attachPlayer(s.reqId, { protocol: `rtsp-${s.lower}`, remote: s.remote });
    if (!s.handle || !stream || stream.media.closed) {
      // the request or its stream closed since SETUP
      this.endSession(s, 'request closed', false, 'none');
      return { status: 454 };
    }
    if (s.lower === 'udp' && c.socket !== s.socket) {
      // a UDP session taken over by another connection (RFC 2326 allows it): that one controls it now
      s.socket = c.socket;
      c.sessions.add(s);
    }
    s.hold();
    try {
      s.sub = stream.media.subscribe(s, { format: this.o.format, media: s.plan.media, via: s.plan.via, maxQueueBytes: this.o.config.maxPlayerBacklogBytes });
    } catch (err) {
      this.o.log.warn({ stream: s.plan.stream, err: (err as Error).message }, 'RTSP reader could not subscribe');
      s.pause();
      return { status: 503, headers: sessionHeader(s) };
    }
    s.state = 'playing';
    // the bus hands over the tracks and the GOP cache from a microtask: by the next turn the first packets are known
    await new Promise<void>((resolve) => setImmediate(resolve));
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a TEARDOWN or PAUSE may come in while we wait a turn
    if (s.ended || s.state !== 'playing') return { status: 454 };
    const started = { stream: s.plan.stream, reqId: s.reqId, remote: s.remote, protocol: `rtsp-${s.lower}`, session: s.id, via: s.plan.play };
    this.o.requestLog(started, 'player started');
    const info: string[] = [];
    for (const [track, p] of s.firstPackets()) {
      info.push(`url=${trackUrl(s.plan.host, s.plan.stream, track, s.plan.reqId, s.plan.token, s.plan.play)};seq=${p.seq};rtptime=${p.rtptime}`);
    }
    const headers: Array<[string, string]> = [...sessionHeader(s), ['Range', 'npt=0.000-']];
    if (info.length) headers.push(['RTP-Info', info.join(',')]);
    // the reply goes out first, then the held packets
    return { status: 200, headers, after: () => s.release() };
  }

  /** DESCRIBE's decision for a request and play stage (cached on the connection for the SETUPs that follow). */
  private async planFor(c: Connection, t: PlayTarget, r: StrmRequest, cs: ChannelStream, play: string | undefined, fresh = false): Promise<Plan | number> {
    const key = `${t.stream} ${r.reqId} ${play ?? ''}`;
    const known = fresh ? undefined : c.plans.get(key);
    if (known) return known;
    const plan = await this.planner.plan(t, r, cs, c, this.o.publicAddress, play);
    if (typeof plan === 'number') return plan;
    c.plans.delete(key);
    if (c.plans.size >= MAX_SESSIONS_PER_CONNECTION) c.plans.delete(c.plans.keys().next().value!);
    c.plans.set(key, plan);
    return plan;
  }

  // --- session ends -------------------------------------------------------------------------------------------

  private endSession(s: RtspSession, reason: string, sendBye: boolean, conn: 'none' | 'end' | 'destroy'): void {
    if (!this.sessions.remove(s)) return;
    const wasPlaying = s.handle !== undefined;
    s.stop(sendBye);
    let owner: Connection | undefined;
    for (const c of this.connections) if (c.sessions.delete(s)) owner = c;
    if (wasPlaying)
      this.o.requestLog(
        { stream: s.plan.stream, reqId: s.reqId, remote: s.remote, session: s.id, bytesOut: s.bytesOut, skips: s.skips, reason },
        'player stopped',
      );
    if (!owner || owner.socket.destroyed || s.lower !== 'tcp') return;
    if (conn === 'destroy') owner.socket.destroy();
    // the media connection of an ended presentation closes, unless it carries another session
    else if (conn === 'end' && owner.sessions.size === 0) owner.socket.end();
  }

  private checkTimeouts(): void {
    const now = this.now();
    const limit = this.o.config.sessionTimeoutSec * 1000;
    for (const s of this.sessions.all()) {
      // a TCP session that plays lives with its connection (clients need not send keep-alives then)
      if (s.lower === 'tcp' && s.state === 'playing') continue;
      if (now - s.lastSeen > limit) {
        this.o.hooks.timedOut();
        this.o.log.info({ session: s.id, stream: s.plan.stream, reqId: s.reqId, remote: s.remote, transport: s.lower }, 'RTSP session timed out');
        // the connection stays: its client may still speak (and gets 454 for this session); idle ones close below
        this.endSession(s, 'session timeout', true, 'none');
      }
    }
    for (const c of [...this.connections]) {
      if (c.partialSince >= 0 && now - c.partialSince > PARTIAL_REQUEST_MS) {
        this.bad(c, 'request not completed in time');
        c.socket.destroy();
      } else if (c.sessions.size === 0 && c.pending === 0 && now - c.lastActivity > limit) {
        // an idle connection is ended; one already ended whose peer never closed its side is dropped
        if (c.socket.writableEnded) c.socket.destroy();
        else c.socket.end();
      }
    }
  }
}

function sessionHeader(s: RtspSession | undefined, timeoutSec?: number): Array<[string, string]> {
  if (!s) return [];
  return [['Session', timeoutSec === undefined ? s.id : `${s.id};timeout=${timeoutSec}`]];
}
