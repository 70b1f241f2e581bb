/**
 * One WebRTC viewer of a benchmark, as a WHEP client that is not a browser: a node-datachannel (libdatachannel)
 * peer connection in the load process with a recvonly H.264 video and a recvonly PCMA audio transceiver, its offer
 * POSTed whole (gathering complete, no trickle) to the play URL, the 201's answer applied. Each track has
 * libdatachannel's RtcpReceivingSession, so it sends receiver reports as a browser does; every packet the track
 * hands up (SRTP already removed) is counted by `RtpCount`: nothing is decoded or kept.
 */
import * as ndc from 'node-datachannel';
import { CONNECT_TIMEOUT_MS, HTTP_TIMEOUT_MS } from './gateway-harness';

/** the offer's payload types: what the gateway's answer must repeat */
export const VIDEO_PT = 102;
export const AUDIO_PT = 8;
/** the H.264 a browser offers first: constrained baseline 3.1, packetization mode 1 */
export const H264_FMTP = 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f';

/** RTCP packet types 192..223 share RTP's second byte (RFC 5761) */
export function isRtcp(p: Uint8Array): boolean {
  return p.length >= 8 && p[1] >= 192 && p[1] <= 223;
}

/** where an RTP packet's payload starts (CSRCs and a header extension skipped), or -1 when it is not one */
export function rtpPayloadAt(p: Uint8Array): number {
  if (p.length < 12 || p[0] >> 6 !== 2) return -1;
  let at = 12 + (p[0] & 0x0f) * 4;
  if (p[0] & 0x10) {
    if (at + 4 > p.length) return -1;
    at += 4 + ((p[at + 2] << 8) | p[at + 3]) * 4;
  }
  return at <= p.length ? at : -1;
}

/** whether an H.264 RTP payload (RFC 6184) starts or holds an IDR slice: single NAL, STAP-A, or an FU-A's first part */
export function startsIdr(p: Uint8Array, at: number): boolean {
  if (at >= p.length) return false;
  const type = p[at] & 0x1f;
  if (type === 5) return true;
  if (type === 28) return at + 1 < p.length && (p[at + 1] & 0x80) !== 0 && (p[at + 1] & 0x1f) === 5;
  if (type === 24) {
    for (let i = at + 1; i + 2 < p.length;) {
      const size = (p[i] << 8) | p[i + 1];
      if ((p[i + 2] & 0x1f) === 5) return true;
      i += 2 + size;
    }
  }
  return false;
}

/**
 * Counts what a viewer's tracks hand up: RTP packets and bytes by kind (by payload type), video frames (packets with
 * the marker bit) and key frames (frames with an IDR slice), RTCP apart. `measuring` gates the window's counts.
 */
export class RtpCount {
  packets = 0;
  bytes = 0;
  videoPackets = 0;
  audioPackets = 0;
  videoFrames = 0;
  keyframes = 0;
  rtcp = 0;
  /** packets of neither payload type offered */
  strange = 0;
  measuring = false;
  packetsInWindow = 0;
  bytesInWindow = 0;
  videoFramesInWindow = 0;
  audioPacketsInWindow = 0;
  private idrInFrame = false;

  constructor(
    private readonly videoPt = VIDEO_PT,
    private readonly audioPt = AUDIO_PT,
  ) {}

  push(p: Uint8Array): void {
    if (isRtcp(p)) {
      this.rtcp++;
      return;
    }
    const at = rtpPayloadAt(p);
    if (at < 0) {
      this.strange++;
      return;
    }
    const pt = p[1] & 0x7f;
    this.packets++;
    this.bytes += p.length;
    if (this.measuring) {
      this.packetsInWindow++;
      this.bytesInWindow += p.length;
    }
    if (pt === this.videoPt) {
      this.videoPackets++;
      if (!this.idrInFrame && startsIdr(p, at)) this.idrInFrame = true;
      if (p[1] & 0x80) {
        this.videoFrames++;
        if (this.measuring) this.videoFramesInWindow++;
        if (this.idrInFrame) this.keyframes++;
        this.idrInFrame = false;
      }
    } else if (pt === this.audioPt) {
      this.audioPackets++;
      if (this.measuring) this.audioPacketsInWindow++;
    } else this.strange++;
  }
}

/** libdatachannel refused the gateway's answer; `location` is the session the gateway made for it */
class AnswerRefused extends Error {
  constructor(
    message: string,
    readonly location: string | undefined,
    cause: unknown,
  ) {
    super(message, { cause });
  }
}

export class WebrtcBenchViewer {
  readonly count = new RtpCount();
  pc?: ndc.PeerConnection;
  /** the answer's SDP as the gateway sent it */
  answer = '';
  error?: string;
  state = 'new';
  /** the tracks are open (DTLS-SRTP done) */
  open = 0;
  /** the first attempt's error, when the answer had to be tried again (see connect) */
  retried?: string;
  private tracks: ndc.Track[] = [];

  constructor(readonly name: string) {}

  get closed(): boolean {
    return this.state === 'closed' || this.state === 'failed' || this.state === 'disconnected';
  }

  set measuring(on: boolean) {
    this.count.measuring = on;
  }

  /**
   * Offers, POSTs, applies the answer; resolves once the answer is applied (media follows when ICE and DTLS are done).
   * An answer libdatachannel refuses with "Got a remote candidate without ICE transport" is tried once more on a new
   * peer connection (the session the gateway made for it ended with a DELETE first): libdatachannel as the offering
   * side loses its ICE transport now and then when many peers handshake at once on a busy core, a fault of the client
   * library that the answer does not cause (see the README). `retried` keeps the first attempt's error.
   */
  async connect(url: URL, signal: AbortSignal): Promise<void> {
    try {
      await this.attempt(url, signal);
    } catch (err) {
      if (!(err instanceof AnswerRefused) || signal.aborted) throw err;
      this.retried = this.error;
      this.error = undefined;
      this.close();
      await this.endSession(url, err.location, signal);
      await this.attempt(url, signal);
    }
  }

  private async attempt(url: URL, signal: AbortSignal): Promise<void> {
    const pc = new ndc.PeerConnection(this.name, { iceServers: [], bindAddress: '127.0.0.1' });
    this.pc = pc;
    this.state = 'new';
    this.open = 0;
    pc.onStateChange((s) => {
      if (pc !== this.pc) return;
      this.state = s;
      if (s === 'failed' && this.error === undefined) this.error = 'ICE or DTLS failed';
    });
    const video = new ndc.Video('0', 'RecvOnly');
    video.addH264Codec(VIDEO_PT, H264_FMTP);
    const audio = new ndc.Audio('1', 'RecvOnly');
    audio.addAudioCodec(AUDIO_PT, 'PCMA/8000');
    for (const desc of [video, audio]) {
      const t = pc.addTrack(desc);
      t.setMediaHandler(new ndc.RtcpReceivingSession());
      t.onMessage((msg) => this.count.push(msg));
      t.onOpen(() => this.open++);
      t.onError((e) => {
        if (pc === this.pc) this.error ??= `track: ${e}`;
      });
      this.tracks.push(t);
    }
    const gathered = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: ICE gathering did not complete`)), CONNECT_TIMEOUT_MS);
      pc.onGatheringStateChange((s) => {
        if (s === 'complete') {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    pc.setLocalDescription();
    if (pc.gatheringState() !== 'complete') await gathered;
    const offer = pc.localDescription();
    if (!offer) throw new Error(`${this.name}: no local description`);
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/sdp' },
      body: offer.sdp,
      signal: AbortSignal.any([signal, AbortSignal.timeout(HTTP_TIMEOUT_MS)]),
    });
    const body = await res.text();
    if (res.status !== 201) {
      this.error = `WHEP POST: HTTP ${res.status}: ${body.trim().slice(0, 200)}`;
      throw new Error(`${this.name}: ${this.error}`);
    }
    this.answer = body;
    try {
      pc.setRemoteDescription(body, 'answer');
    } catch (err) {
      this.error = `answer refused by libdatachannel: ${(err as Error).message} (${this.states()})`;
      throw new AnswerRefused(`${this.name}: ${this.error}`, res.headers.get('location') ?? undefined, err);
    }
  }

  /** DELETE of the session resource (WHEP's end of a session), so a refused answer's session is not left to time out */
  private async endSession(url: URL, location: string | undefined, signal: AbortSignal): Promise<void> {
    if (!location) return;
    const res = await fetch(new URL(location, url), { method: 'DELETE', signal: AbortSignal.any([signal, AbortSignal.timeout(HTTP_TIMEOUT_MS)]) });
    await res.arrayBuffer();
  }

  /** the peer connection's states, for an error's message */
  states(): string {
    const pc = this.pc;
    if (!pc) return 'no peer connection';
    try {
      return `state ${pc.state()}, ICE ${pc.iceState()}, gathering ${pc.gatheringState()}, signaling ${pc.signalingState()}`;
    } catch {
      return `state ${this.state}`;
    }
  }

  close(): void {
    try {
      this.pc?.close();
    } catch {
      /* already closed */
    }
    this.tracks = [];
  }
}
