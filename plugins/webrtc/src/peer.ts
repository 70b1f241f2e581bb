/**
 * One browser's peer connection, on libdatachannel (node-datachannel): ICE on the process's one muxed UDP port,
 * DTLS-SRTP, RTCP sender reports and NACK retransmission in the library's native handlers, so the JavaScript side
 * hands it whole RTP packets and reads back only feedback and talk audio.
 *
 * The answer is made from tracks added under the offer's mids before the offer is applied: libdatachannel then
 * answers each with the codecs given here (one H.264 or H.265 payload type, one G.711) instead of echoing all the
 * offer's. It is answered whole (non-trickle, as WHEP allows): the gateway's candidate is known at once.
 */
import { randomInt } from 'node:crypto';
import * as ndc from 'node-datachannel';
import type { Offer } from './offer';

export interface TrackPlan {
  mid: string;
  pt: number;
  /** e.g. 'H264', 'H265', 'PCMA' */
  codec: string;
  /** the fmtp the answer repeats (H.264: the offer's for this payload type) */
  fmtp?: string;
  /** send only (a player), or send and receive (talk: the browser's microphone comes in on it) */
  receive: boolean;
}

export interface PeerPlan {
  video?: TrackPlan;
  audio?: TrackPlan;
}

export interface PeerOptions {
  name: string;
  port: number;
  bindHost: string;
  /** the address written into the answer's candidate */
  publicHost: string;
  nackBufferPackets: number;
  /** the session's ICE and DTLS did not connect in time */
  connectTimeoutMs: number;
}

export interface PeerTrack {
  readonly plan: TrackPlan;
  readonly ssrc: number;
  /** RTP timestamp of what is sent now, for the library's sender reports */
  setTimestamp(ts: number): void;
  send(packet: Buffer): boolean;
  readonly track: ndc.Track;
}

export type PeerState = 'connecting' | 'connected' | 'closed';

/** A peer connection made for one offer; `answer()` gives the SDP to return. */
export class Peer {
  readonly pc: ndc.PeerConnection;
  readonly video: PeerTrack | undefined;
  readonly audio: PeerTrack | undefined;
  state: PeerState = 'connecting';
  private readonly closedFns: Array<(why: string) => void> = [];
  private readonly openFns: Array<() => void> = [];
  private readonly timer: NodeJS.Timeout;
  private openTracks = 0;

  constructor(
    private readonly o: PeerOptions,
    offerSdp: string,
    readonly plan: PeerPlan,
  ) {
    this.pc = new ndc.PeerConnection(o.name, {
      iceServers: [],
      enableIceUdpMux: true,
      portRangeBegin: o.port,
      portRangeEnd: o.port,
      bindAddress: o.bindHost,
      disableAutoNegotiation: true,
    });
    const cname = `gw${randomInt(1, 2 ** 31)}`;
    this.video = plan.video && this.addTrack(new ndc.Video(plan.video.mid, plan.video.receive ? 'SendRecv' : 'SendOnly'), plan.video, cname, 90_000);
    this.audio = plan.audio && this.addTrack(new ndc.Audio(plan.audio.mid, plan.audio.receive ? 'SendRecv' : 'SendOnly'), plan.audio, cname, 8000);
    this.pc.onStateChange((s) => {
      if (s === 'connected' && this.state === 'connecting') {
        this.state = 'connected';
        clearTimeout(this.timer);
        if (this.open) for (const f of this.openFns) f();
      } else if (s === 'failed' || s === 'closed') this.close(s === 'failed' ? 'ICE or DTLS failed' : 'peer closed');
      else if (s === 'disconnected') this.close('peer disconnected');
    });
    this.timer = setTimeout(() => this.close(`not connected within ${o.connectTimeoutMs} ms`), o.connectTimeoutMs);
    this.timer.unref();
    this.pc.setRemoteDescription(offerSdp, 'offer');
    this.pc.setLocalDescription('answer');
  }

  private addTrack(desc: ndc.Video | ndc.Audio, plan: TrackPlan, cname: string, clock: number): PeerTrack {
    if (desc instanceof ndc.Video) {
      if (plan.codec === 'H265') desc.addH265Codec(plan.pt);
      else desc.addH264Codec(plan.pt, plan.fmtp);
    } else desc.addAudioCodec(plan.pt, `${plan.codec}/8000`);
    const ssrc = randomInt(1, 2 ** 32 - 1) >>> 0;
    desc.addSSRC(ssrc, cname, `${cname}-stream`, `${cname}-${plan.mid}`);
    const track = this.pc.addTrack(desc);
    const config = new ndc.RtpPacketizationConfig(ssrc, cname, plan.pt, clock);
    const sr = new ndc.RtcpSrReporter(config);
    if (this.o.nackBufferPackets > 0) sr.addToChain(new ndc.RtcpNackResponder(this.o.nackBufferPackets));
    track.setMediaHandler(sr);
    track.onOpen(() => {
      this.openTracks++;
      if (this.open) for (const f of this.openFns) f();
    });
    return {
      plan,
      ssrc,
      track,
      setTimestamp: (ts) => {
        config.timestamp = ts;
      },
      send: (packet) => {
        try {
          return track.sendMessageBinary(packet);
        } catch {
          // the track closed under us (the peer went): the close handler ends the session
          return false;
        }
      },
    };
  }

  /** every track this session sends on is open (DTLS-SRTP keys are in place) */
  get open(): boolean {
    return this.state === 'connected' && this.openTracks >= (this.video ? 1 : 0) + (this.audio ? 1 : 0);
  }

  /** the answer once candidates are gathered, with the one candidate browsers should use: publicHost on the port */
  async answer(timeoutMs = 3000): Promise<string> {
    if (this.pc.gatheringState() !== 'complete') {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('ICE gathering did not complete')), timeoutMs);
        this.pc.onGatheringStateChange((s) => {
          if (s === 'complete') {
            clearTimeout(t);
            resolve();
          }
        });
      });
    }
    const d = this.pc.localDescription();
    if (!d) throw new Error('no local description');
    return withCandidate(d.sdp, this.o.publicHost, this.o.port);
  }

  /** once every track is open: media can go */
  onOpen(fn: () => void): void {
    if (this.open) fn();
    else this.openFns.push(fn);
  }

  onClosed(fn: (why: string) => void): void {
    this.closedFns.push(fn);
  }

  close(why: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.timer);
    try {
      this.pc.close();
    } catch {
      /* already gone */
    }
    for (const f of this.closedFns) f(why);
  }
}

/**
 * The answer with libdatachannel's candidates (every interface of the host, IPv6 too) replaced by one host candidate
 * at the public address: the UDP port is muxed, so one address is all a browser needs, and a gateway behind NAT
 * advertises what browsers reach. A name rather than an address is kept as written (Chromium resolves it).
 */
export function withCandidate(sdp: string, host: string, port: number): string {
  const eol = sdp.includes('\r\n') ? '\r\n' : '\n';
  const out: string[] = [];
  let inMedia = false;
  const cand = `a=candidate:1 1 UDP 2130706431 ${host} ${port} typ host`;
  for (const line of sdp.split(eol)) {
    if (line.startsWith('a=candidate:') || line === 'a=end-of-candidates') continue;
    if (line.startsWith('m=')) {
      if (inMedia) out.push(cand, 'a=end-of-candidates');
      inMedia = true;
    }
    if (line === '') continue;
    out.push(line);
  }
  if (inMedia) out.push(cand, 'a=end-of-candidates');
  return out.join(eol) + eol;
}

export type { Offer };
