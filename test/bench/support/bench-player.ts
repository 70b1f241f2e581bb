/**
 * One HTTP-FLV player of a benchmark: a raw socket and a counting parser (nothing copied or decoded), matching the
 * tags it gets to what its terminal sent, to tell how late they arrive.
 *
 * Video: a tag's timestamp is the media time of the frame the terminal sent; latency = tag read - frame written.
 * Audio as received (G.711): the same, frame for frame. AAC made by the gateway: an AAC frame at media time X can
 * only be made once the encoder has input up to X + lookahead (ffmpeg's AAC encoder: its 1024 samples of priming
 * plus a frame of look-ahead, so X + 3 x 1024 samples, 384 ms at 8 kHz); latency = tag read - write of the terminal
 * frame holding that last needed sample. So each figure is the gateway's (and the sockets') own delay, without the
 * delay the codec needs by design: a gateway that keeps up shows a few ms, one that falls behind a growing figure.
 */
import type * as net from 'node:net';
import { FlvPlayCounter } from './flv-play-counter';
import { connectTcp } from './gateway-harness';
import { SENT_RING, type SynthTerminal } from './synth-terminals';

/** FLV sound format 10 (AAC) in the first byte's high nibble */
const FLV_AAC = 10;

export interface PlayerSinks {
  video?(latencyMs: number): void;
  audio?(latencyMs: number): void;
}

export class BenchPlayer {
  readonly counter: FlvPlayCounter;
  socket?: net.Socket;
  closed = false;
  /** count and match tags (off outside the measured window) */
  measuring = false;
  videoInWindow = 0;
  /** audio frames (AAC sequence headers not counted) */
  audioInWindow = 0;
  /** tags whose sent frame was not found (ring lapped, or not sent by this terminal) */
  unmatched = 0;
  /** AAC frames that came before the terminal had sent the input the model says they need (the model is wrong) */
  early = 0;
  private vPos = 0;
  private aPos = 0;
  private lastVideoT = -1;

  constructor(
    private readonly term: SynthTerminal,
    private readonly sinks: PlayerSinks,
    /** ms of input the encoder needs past an AAC frame's start (see above) */
    private readonly aacLookaheadMs = 384,
    /** duration of the terminal's audio frames, ms */
    private readonly audioFrameMs = 20,
  ) {
    this.counter = new FlvPlayCounter((type, ts, _size, head) => this.onTag(type, ts, head));
  }

  async connect(url: URL, signal: AbortSignal): Promise<void> {
    const s = await connectTcp(Number(url.port || 80), signal, (chunk, end) => {
      this.counter.push(chunk, end);
      if (this.counter.error !== undefined) s.destroy();
    });
    this.socket = s;
    s.on('error', () => undefined);
    s.on('close', () => {
      this.closed = true;
    });
    s.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n`);
  }

  private onTag(type: number, ts: number, head: number): void {
    if (type === 9) this.onVideo(ts);
    else if (type === 8) this.onAudio(ts, head);
  }

  private onVideo(ts: number): void {
    if (ts === this.lastVideoT) return; // a sequence header shares its keyframe's timestamp
    this.lastVideoT = ts;
    if (!this.measuring) return;
    this.videoInWindow++;
    if (!this.sinks.video) return;
    const t = this.term;
    if (t.sentCount - this.vPos > SENT_RING) this.vPos = t.sentCount - SENT_RING;
    while (this.vPos < t.sentCount && t.sentT[this.vPos % SENT_RING] < ts) this.vPos++;
    if (this.vPos < t.sentCount && t.sentT[this.vPos % SENT_RING] === ts) {
      this.sinks.video(performance.now() - t.sentAt[this.vPos % SENT_RING]);
    } else {
      this.unmatched++;
    }
  }

  private onAudio(ts: number, head: number): void {
    const aac = head >> 12 === FLV_AAC;
    if (aac && (head & 0xff) !== 1) return; // AAC sequence header
    if (!this.measuring) return;
    this.audioInWindow++;
    if (!this.sinks.audio) return;
    const t = this.term;
    const R = SENT_RING;
    if (t.audioCount - this.aPos > R) this.aPos = t.audioCount - R;
    // AAC: the frame holding the last sample the encoder needed, i.e. the last one starting before the target;
    // as received: the frame at the tag's own time
    const target = aac ? ts + this.aacLookaheadMs : ts;
    while (this.aPos + 1 < t.audioCount && (aac ? t.audioT[(this.aPos + 1) % R] < target : t.audioT[(this.aPos + 1) % R] <= target)) this.aPos++;
    if (this.aPos >= t.audioCount) {
      this.unmatched++;
      return;
    }
    const sentT = t.audioT[this.aPos % R];
    if (aac ? sentT >= target : sentT !== target) {
      this.unmatched++;
      return;
    }
    if (aac && this.aPos + 1 === t.audioCount && target - sentT > this.audioFrameMs) this.early++;
    this.sinks.audio(performance.now() - t.audioAt[this.aPos % R]);
  }
}
