/**
 * An RTSP session (RFC 2326 3.4): the tracks a client set up, how their packets travel (TCP interleaved on the
 * control connection, or UDP to the client's ports) and, while playing, its reader on the bus. The session is the
 * sink: the bus hands it each unit with its shared RTP form; the session only frames the form for its transport
 * and adds the RTCP that is its own (sender reports counting what it sent, BYE).
 */
import type { Socket } from 'node:net';
import { BYTE_TOTAL_START, WireScratch, type DirectWriter, type WritableAccount } from '../../../plugin-sdk';
import type { AccessUnit, MediaReader, MediaStream, PlayerHandle, ReaderHandle, TrackInfo, Via } from '../../../plugin-sdk';
import type { MediaSelect } from '../../../plugin-sdk';
import { AUDIO, VIDEO, type RtpUnit, type TrackIndex } from '../../../plugin-sdk/rtp';
import { bye, senderReport } from './rtcp';
import type { Presentation } from './sdp';

/** What DESCRIBE decided for a request: the tracks, and how its readers read the stream. */
export interface Plan {
  reqId: string;
  token: string;
  stream: string;
  /** host[:port] the client addresses, for track URLs (SDP controls, RTP-Info) */
  host: string;
  media: MediaSelect;
  /** the stage the play URL asked for (its track URLs carry it) */
  play?: string;
  /** what the session's reader reads through: the play's stage, then the AAC form of audio RTP does not carry as received */
  via?: Via;
  presentation: Presentation;
}

export type TrackTransport = { lower: 'tcp'; rtp: number; rtcp: number } | { lower: 'udp'; host: string; rtp: number; rtcp: number };

/** a socket holding this much unsent lets the bus queue for the session (and apply its slow-reader policy) */
export const TCP_WRITABLE_BELOW = 64 * 1024;
/** sender reports per track at most this often (RFC 3550 6.2: 5 s minimum interval) */
const SR_INTERVAL_MS = 5000;

/** where a TCP session's unit is laid out whole for one write; the last one is shared by the stream's other sessions */
const scratch = new WireScratch();

/** How a TCP session's packets reach its client: its control connection's (connection.ts). */
export interface TcpWay {
  /** units laid out whole, to the socket's handle past node's Writable */
  readonly out: DirectWriter;
  /** what the connection has in node's Writable: read in place of node's state on each unit */
  readonly account: WritableAccount;
  /** nothing more is to be written: the connection closed, a reply ended it, or the client ended its side */
  readonly shut: boolean;
}

export interface SessionOwner {
  readonly cname: string;
  now(): number;
  /** sends one UDP datagram from the RTP or RTCP socket; false when it was dropped (send queue full) */
  udpSend(rtcp: boolean, parts: Buffer[], port: number, host: string): boolean;
  /** bytes out, for the metric */
  sent(n: number): void;
  /** the bus ended the reader (stream closed, reader stuck, sink threw) */
  readerEnded(s: RtspSession, reason: string): void;
}

interface TrackStats {
  packets: number;
  octets: number;
  lastSr: number;
  ssrc: number | undefined;
}

export class RtspSession implements MediaReader<RtpUnit> {
  state: 'ready' | 'playing' = 'ready';
  lastSeen: number;
  readonly setup = new Map<TrackIndex, TrackTransport>();
  sub: ReaderHandle | undefined;
  handle: PlayerHandle | undefined;
  bytesOut = BYTE_TOTAL_START;
  skips = 0;
  ended = false;
  private held: Array<[AccessUnit, RtpUnit]> | undefined;
  /**
   * MediaReader.holdsPayloads, for sessions over TCP only: their packets' bodies are views of the units' payloads that
   * the socket holds while they count in `writableLength` (as flv-out's players), so the bus may reuse the memory
   * once it says false. A UDP session cannot tell when dgram is done with what it was given: it has none, and a
   * stream it reads keeps collected memory.
   */
  holdsPayloads?: () => boolean;
  /** TCP: bytes the socket may hold unsent before the bus queues for the session */
  private readonly writableBelow: number;
  private readonly stats: [TrackStats, TrackStats] = [
    { packets: 0, octets: 0, lastSr: -Infinity, ssrc: undefined },
    { packets: 0, octets: 0, lastSr: -Infinity, ssrc: undefined },
  ];

  constructor(
    readonly id: string,
    readonly plan: Plan,
    readonly lower: 'tcp' | 'udp',
    /** the control connection: carries the media for TCP; for UDP, the one that set it up (may close first) */
    public socket: Socket | undefined,
    readonly remote: string,
    private readonly owner: SessionOwner,
    /** the stream read (the request's own; stage forms share its timeline and wall clock) */
    readonly media: MediaStream,
    /** TCP: the connection, its socket's only writer */
    private readonly tcp?: TcpWay,
  ) {
    this.lastSeen = owner.now();
    // read once: a unit's path reads none of node's stream state (plugin-sdk WritableAccount says why)
    this.writableBelow = Math.max(TCP_WRITABLE_BELOW, socket?.writableHighWaterMark ?? 0);
    if (tcp !== undefined) this.holdsPayloads = () => (this.held !== undefined && this.held.length > 0) || tcp.account.held() > 0;
  }

  get reqId(): string {
    return this.plan.reqId;
  }

  // --- MediaReader ----------------------------------------------------------------------------------------------

  write(unit: AccessUnit, form: RtpUnit): void {
    if (this.held) {
      this.held.push([unit, form]);
      return;
    }
    this.send(unit, form);
  }

  writable(): boolean {
    const w = this.tcp;
    if (w === undefined) return true;
    return !w.shut && w.account.held() + w.out.pending < this.writableBelow;
  }

  skipped(): void {
    this.skips++;
  }

  /**
   * The stream's tracks, at start and on each change. A new SPS travels in band (keyframes carry their parameter
   * sets), but another codec, rate or channel count contradicts the SDP the client set up with: the session ends so
   * that the client describes the stream again.
   */
  tracks(list: ReadonlyArray<TrackInfo>): void {
    const p = this.plan.presentation;
    for (const t of list) {
      const was = t.kind === 'video' ? p.video : p.audio;
      if (!was || !this.setup.has(t.kind === 'video' ? VIDEO : AUDIO)) continue;
      const changed = t.codec !== was.codec || (t.kind === 'audio' && was.kind === 'audio' && (t.sampleRate !== was.sampleRate || t.channels !== was.channels));
      if (changed) {
        this.owner.readerEnded(this, `tracks changed: ${was.codec} -> ${t.codec}`);
        return;
      }
    }
  }

  end(reason: string): void {
    this.owner.readerEnded(this, reason);
  }

  // --- play ---------------------------------------------------------------------------------------------------

  /** From now until release(), units the bus hands over are held: PLAY's answer must say where they start. */
  hold(): void {
    this.held = [];
  }

  /** The first packet of each set-up track among those held (RTP-Info). */
  firstPackets(): Map<TrackIndex, { seq: number; rtptime: number }> {
    const out = new Map<TrackIndex, { seq: number; rtptime: number }>();
    for (const [, f] of this.held ?? []) {
      if (!out.has(f.track) && this.setup.has(f.track)) out.set(f.track, { seq: f.firstSeq, rtptime: f.timestamp });
    }
    return out;
  }

  /** Sends what was held (after PLAY's answer) and goes on live. */
  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const [u, f] of held) {
      if (this.ended) return;
      this.send(u, f);
    }
  }

  /** PAUSE: stop reading; the player stays attached. */
  pause(): void {
    this.sub?.close();
    this.sub = undefined;
    this.held = undefined;
    this.state = 'ready';
  }

  /** Ends reading and the player; a BYE tells the client each track is over (unless its connection is gone). */
  stop(sendBye: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.sub?.close();
    this.sub = undefined;
    this.held = undefined;
    this.handle?.close();
    this.handle = undefined;
    if (!sendBye) return;
    for (const [track, t] of this.setup) {
      const ssrc = this.stats[track].ssrc;
      if (ssrc !== undefined) this.sendRtcp(t, bye(ssrc));
    }
  }

  // --- sending ------------------------------------------------------------------------------------------------

  private send(unit: AccessUnit, f: RtpUnit): void {
    const t = this.setup.get(f.track);
    if (!t) return; // a track the client did not set up
    let bytes = 0;
    if (t.lower === 'tcp') {
      const w = this.tcp;
      const s = this.socket;
      if (w === undefined || s === undefined || w.shut) return;
      // the channel in the shared prefix is the track's default, which most clients pick
      const own = t.rtp === f.track * 2;
      if (own && this.sendWhole(w, f)) {
        this.sent(unit, f, t, f.wireBytes);
        return;
      }
      // one writev per unit, each piece counted by the connection's account
      const a = w.account;
      s.cork();
      f.forEach((head, body) => {
        if (own) {
          a.write(head);
        } else {
          a.write(Buffer.from([0x24, t.rtp, head[2], head[3]]));
          a.write(head.subarray(4));
        }
        if (body) a.write(body);
        bytes += head.length + (body ? body.length : 0);
      });
      s.uncork();
    } else {
      f.forEach((head, body) => {
        const rtp = head.subarray(4);
        if (this.owner.udpSend(false, body ? [rtp, body] : [rtp], t.rtp, t.host)) bytes += rtp.length + (body ? body.length : 0);
      });
    }
    this.sent(unit, f, t, bytes);
  }

  /**
   * The unit's interleaved packets laid out in scratch memory and written as one Buffer to the socket's handle (see
   * plugin-sdk/direct-writes.ts), when nothing of this connection waits in node: one handle call, against a write per
   * head and body through the corked Writable. false: not written (something waits, or the unit is too big).
   */
  private sendWhole(w: TcpWay, f: RtpUnit): boolean {
    // (the account is clear only while the socket is not corked and node holds nothing of the connection's)
    if (!w.account.clear || w.out.pending !== 0) return false;
    let view = scratch.cached(f, 0);
    if (view === undefined) {
      const n = f.wireBytes;
      if (n > WireScratch.MAX) return false;
      view = scratch.take(n);
      f.copyWire(view, 0);
      scratch.keep(f, 0, view);
    }
    scratch.send(w.out, view, w.account);
    return true;
  }

  /** Counts a unit sent, and sends the track's sender report when one is due. */
  private sent(unit: AccessUnit, f: RtpUnit, t: TrackTransport, bytes: number): void {
    const st = this.stats[f.track];
    st.packets += f.count;
    st.octets += f.rtpBytes - 12 * f.count;
    st.ssrc = f.ssrc;
    this.account(bytes);
    const now = this.owner.now();
    if (now - st.lastSr >= SR_INTERVAL_MS) {
      // the report maps this unit's RTP timestamp to the wall-clock time of the same instant on the stream's timeline
      const wall = this.media.wallClock(unit.kind === 'video' ? unit.pts : unit.dts);
      if (wall !== undefined) {
        st.lastSr = now;
        this.sendRtcp(t, senderReport({ ssrc: f.ssrc, epochMs: wall, rtpTime: f.timestamp, packets: st.packets, octets: st.octets, cname: this.owner.cname }));
      }
    }
  }

  private sendRtcp(t: TrackTransport, pkt: Buffer): void {
    if (t.lower === 'tcp') {
      const w = this.tcp;
      if (w === undefined || w.shut) return;
      const prefix = Buffer.from([0x24, t.rtcp, pkt.length >> 8, pkt.length & 0xff]);
      w.out.send(Buffer.concat([prefix, pkt]), w.account);
      this.account(prefix.length + pkt.length);
    } else if (this.owner.udpSend(true, [pkt], t.rtcp, t.host)) {
      this.account(pkt.length);
    }
  }

  private account(n: number): void {
    if (n === 0) return;
    this.bytesOut += n;
    this.handle?.sent(n);
    this.owner.sent(n);
  }
}
