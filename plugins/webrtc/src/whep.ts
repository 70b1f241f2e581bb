/**
 * WHEP (RFC 9725) on the API port: `POST /webrtc/{stream}/whep?reqId&token` with the browser's SDP offer answers
 * 201 with the SDP answer and the session's resource (Location), which `DELETE` ends. The play URL is authorised as
 * every play URL is (reqId open on the stream, token its user.token: 401 otherwise), before any peer connection is
 * made; an offer that is no WebRTC offer, or has no codec this stream can be sent in, is refused with a 4xx and its
 * reason. Answers are whole (no trickle ICE, so PATCH is 405) and CORS allows any origin (WHEP clients are pages).
 *
 * Talk: an intercom request's (live, dataTyp 2) offer whose audio the browser sends too (sendrecv) is also a talk:
 * its G.711 RTP goes through intercom's talk path to the terminal; the terminal's audio comes back on the same track.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import {
  LogLimiter,
  type AccessUnit,
  type IntercomTalks,
  type MediaSelect,
  type Plays,
  type RouteRequest,
  type Routes,
  type Sessions,
  type StrmRequest,
  type TalkSession,
  type UnitFormat,
} from '../../../plugin-sdk';
import { VIDEO, type RtpUnit } from '../../../plugin-sdk/rtp';
import type { WebrtcConfig } from './config';
import { OfferError, parseOffer, type Offer } from './offer';
import { PCMA_STAGE } from './pcma-stage';
import { Peer, type PeerTrack } from './peer';
import { isRtcp, keyFrameRequests, packetsOf, rewrite, rtpPayload, type RtpRewrite } from './rtp-wire';
import { planSession, Refusal, type Plan } from './session-plan';
import { CORS, iceServerLinks, peerSocket, readBody, text } from './whep-http';

export const WEBRTC_PREFIX = '/webrtc';

export interface WhepCounters {
  refused(reason: string): void;
  keyFrameRequests(n: number): void;
  packets(n: number): void;
  talkPackets(n: number): void;
}

export interface WhepOptions {
  config: WebrtcConfig;
  sessions: Sessions;
  plays: Plays;
  format: UnitFormat<RtpUnit>;
  log: Logger;
  /** the UDP port of this process and the address its candidate carries */
  port: number;
  bindHost: string;
  publicHost: string;
  /** the intercom's talk path, when the site runs intercom */
  talks: IntercomTalks | undefined;
  counters: WhepCounters;
}

interface Session {
  id: string;
  stream: string;
  peer: Peer;
  talk: TalkSession | undefined;
}

export class WhepServer {
  private readonly sessions = new Map<string, Session>();
  /** a peer can send refusable offers at will: a few lines per address per 10 s, the rest counted in the next */
  private readonly refusals = new LogLimiter({ burst: 10 });
  /** the STUN and TURN servers as Link headers: the same for every answer */
  private readonly iceLinks: Record<string, string>;
  private stopped = false;

  constructor(private readonly o: WhepOptions) {
    this.iceLinks = iceServerLinks(o.config);
  }

  get count(): number {
    return this.sessions.size;
  }

  mount(routes: Routes): void {
    const opts = { auth: 'none' as const };
    routes.raw('POST', `${WEBRTC_PREFIX}/*`, (req, res) => this.post(req, res), opts);
    routes.raw('DELETE', `${WEBRTC_PREFIX}/*`, (req, res) => this.delete(req, res), opts);
    routes.raw(
      '*',
      `${WEBRTC_PREFIX}/*`,
      (req, res) => {
        req.raw.resume();
        if (req.method === 'OPTIONS') {
          res.writeHead(204, { ...CORS, 'Accept-Post': 'application/sdp' });
          res.end();
        } else
          text(res, 405, 'POST an SDP offer to the play URL; DELETE the session resource to stop (trickle ICE is not supported)', {
            Allow: 'POST, DELETE, OPTIONS',
          });
      },
      opts,
    );
  }

  stop(): void {
    this.stopped = true;
    for (const s of [...this.sessions.values()]) s.peer.close('gateway stopping');
  }

  private async post(req: RouteRequest, res: ServerResponse): Promise<void> {
    const m = /^([^/]+)\/whep$/.exec(req.rest);
    if (!m) {
      req.raw.resume();
      return text(res, 404, 'not found: the play URL is /webrtc/{stream}/whep');
    }
    let stream: string;
    try {
      stream = decodeURIComponent(m[1]);
    } catch {
      req.raw.resume();
      return text(res, 404, 'not found');
    }
    try {
      if (this.stopped) throw new Refusal(503, 'stopping', 'stopping');
      const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      if (type !== 'application/sdp') throw new Refusal(415, 'Content-Type must be application/sdp (an SDP offer)', 'content-type');
      const request = this.o.sessions.authorizePlay(stream, req.query.get('reqId') ?? '', req.query.get('token') ?? '');
      if (!request) throw new Refusal(401, 'unauthorized: unknown reqId or wrong token', 'token');
      if (this.sessions.size >= this.o.config.maxSessions) throw new Refusal(503, 'too many WebRTC sessions on this gateway', 'capacity');
      const sdp = await readBody(req.raw, this.o.config.maxOfferBytes);
      let offer: Offer;
      try {
        offer = parseOffer(sdp);
      } catch (err) {
        if (err instanceof OfferError) throw new Refusal(400, `bad offer: ${err.message}`, 'offer');
        throw err;
      }
      const plan = planSession(request, offer, this.o.sessions.getStreamByName(request.streamName)?.media.tracks ?? []);
      await this.start(req, res, request, stream, sdp, plan);
    } catch (err) {
      req.raw.resume();
      if (err instanceof Refusal) {
        this.o.counters.refused(err.metric);
        this.refusals.log(this.o.log, 'info', req.remote, { stream, remote: req.remote, status: err.status, reason: err.message }, 'WebRTC offer refused');
        return text(res, err.status, err.message);
      }
      this.o.log.error({ err, stream }, 'WebRTC offer failed');
      return text(res, 500, 'internal error');
    }
  }

  private async start(req: RouteRequest, res: ServerResponse, request: StrmRequest, stream: string, sdp: string, plan: Plan): Promise<void> {
    const c = this.o.config;
    const id = randomBytes(16).toString('base64url');
    let talk: TalkSession | undefined;
    let peer: Peer | undefined;
    if (plan.audio?.receive) {
      if (!this.o.talks) throw new Refusal(403, 'talk needs the intercom plugin on this gateway', 'talk');
      const t = this.o.talks.start(
        request,
        { fmt: plan.audio.codec === 'PCMU' ? 'g711u' : 'g711a', protocol: 'webrtc', remote: req.remote },
        // the terminal's audio comes back on the play's audio track: no downlink through the talk
        { backlog: () => 0, close: (_code, reason) => peer?.close(`talk ended: ${reason}`) },
      );
      if ('status' in t) throw new Refusal(t.status, t.reason, 'talk');
      talk = t;
    }
    try {
      peer = new Peer(
        {
          name: id,
          port: this.o.port,
          bindHost: this.o.bindHost,
          publicHost: this.o.publicHost,
          nackBufferPackets: c.nackBufferPackets,
          connectTimeoutMs: c.connectTimeoutMs,
        },
        sdp,
        plan,
      );
    } catch (err) {
      talk?.close('peer connection failed');
      throw new Refusal(400, `the offer could not be applied: ${(err as Error).message}`, 'offer');
    }
    const p = peer;
    let answer: string;
    try {
      answer = await p.answer();
    } catch (err) {
      p.close('no answer');
      talk?.close('peer connection failed');
      throw err;
    }
    const session: Session = { id, stream, peer: p, talk };
    this.sessions.set(id, session);
    p.onClosed((why) => {
      this.sessions.delete(id);
      if (talk && !talk.isClosed) talk.finish(why);
      this.o.log.debug({ session: id, stream, why }, 'WebRTC session closed');
    });
    for (const t of [p.video, p.audio]) if (t) this.readBack(t, talk, id);
    const location = `${WEBRTC_PREFIX}/${encodeURIComponent(stream)}/whep/${id}`;
    const socket = peerSocket(res, req.remote, p, answer, { Location: location, ...this.iceLinks });
    const select: MediaSelect = plan.video && plan.audio ? 'av' : plan.video ? 'v' : 'a';
    const rewrite = {
      video: p.video && { pt: p.video.plan.pt, ssrc: p.video.ssrc, seq: randomSeq() },
      audio: p.audio && { pt: p.audio.plan.pt, ssrc: p.audio.ssrc, seq: randomSeq() },
    };
    const counters = this.o.counters;
    const play = this.o.plays.play<RtpUnit>(req, socket, {
      media: select,
      format: this.o.format,
      via: plan.pcma ? PCMA_STAGE : undefined,
      maxQueueBytes: c.highWaterBytes * 8,
      // a unit the encoder could not packetise (no parameter sets yet, a codec RTP here does not carry) has no form
      sendUnit(unit: AccessUnit, rtp: RtpUnit | undefined): number {
        if (!rtp) return 0;
        const [t, r] = rtp.track === VIDEO ? [p.video, rewrite.video] : [p.audio, rewrite.audio];
        if (!t || !r || !codecMatches(t, unit)) return 0;
        return sendRtp(t, r, rtp, counters);
      },
    });
    if (!play) {
      // refused on the socket (it closed the peer): the talk goes with it
      talk?.close('play refused');
      return;
    }
    this.o.log.debug({ session: id, stream, reqId: request.reqId, plan }, 'WebRTC session answered');
  }

  /** the browser's packets on a track: RTCP feedback (key-frame requests counted), and talk audio */
  private readBack(t: PeerTrack, talk: TalkSession | undefined, session: string): void {
    const pt = t.plan.pt;
    const counters = this.o.counters;
    let first = true;
    t.track.onMessage((msg: Buffer) => {
      if (isRtcp(msg)) {
        const n = keyFrameRequests(msg);
        // the terminal cannot be asked for a key frame: the next one it sends goes out as it comes (nothing is dropped)
        if (n > 0) counters.keyFrameRequests(n);
        return;
      }
      if (!talk || talk.isClosed || t.plan.receive !== true) return;
      const r = rtpPayload(msg);
      if (!r || r.pt !== pt || r.payload.length === 0) return;
      counters.talkPackets(1);
      if (first) {
        first = false;
        this.o.log.debug({ session, at: Date.now() }, 'first talk packet');
      }
      const why = talk.audio(r.payload);
      if (why) talk.close(why);
    });
  }

  private delete(req: RouteRequest, res: ServerResponse): void {
    req.raw.resume();
    const m = /^([^/]+)\/whep\/([A-Za-z0-9_-]{22})$/.exec(req.rest);
    const s = m ? this.sessions.get(m[2]) : undefined;
    if (!s || s.stream !== safeDecode(m![1])) return text(res, 404, 'no such WebRTC session');
    s.peer.close('client ended the session (DELETE)');
    res.writeHead(200, CORS);
    res.end();
  }
}

function codecMatches(t: PeerTrack, unit: AccessUnit): boolean {
  switch (t.plan.codec) {
    case 'H264':
      return unit.codec === 'h264';
    case 'H265':
      return unit.codec === 'h265';
    case 'PCMA':
      return unit.codec === 'g711a';
    case 'PCMU':
      return unit.codec === 'g711u';
    default:
      return false;
  }
}

function sendRtp(t: PeerTrack, r: RtpRewrite, rtp: RtpUnit, counters: WhepCounters): number {
  t.setTimestamp(rtp.timestamp);
  const all = packetsOf(rtp);
  let bytes = 0;
  let sent = 0;
  for (const p of all.packets) {
    rewrite(p, r);
    if (t.send(p)) {
      bytes += p.length;
      sent++;
    }
  }
  counters.packets(sent);
  return bytes;
}

const randomSeq = (): number => randomBytes(2).readUInt16BE(0);

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return '';
  }
}
