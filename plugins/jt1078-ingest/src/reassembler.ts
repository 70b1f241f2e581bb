/**
 * Rebuilds frames from the ordered packets of one source (one SIM + channel), per kind.
 *
 * Frame boundaries come from the subpackage mark (atomic / first / middle / last). Some terminals get
 * the marks wrong; their M bit is then the better witness (set on the last or only packet of a frame).
 * The M bit only counts as a witness once it has been seen both set and clear for that kind: a terminal
 * that never sets it, or sets it on every packet, says nothing with it, and the marks rule.
 *
 * A lost packet (reported by the reorderer as lostBefore) drops the frame it fell into, and video then
 * waits for the next I frame: a P frame whose reference is missing decodes into garbage until then.
 * Video also starts at an I frame.
 */
import { NAL_SCAN, scanH264 } from '../../../plugin-sdk/formats/h264';
import { scanH265 } from '../../../plugin-sdk/formats/h265';
import type { CodecId } from '../../../plugin-sdk/media';
import { DATA_TYPE, Jt1078Packet, SUB_MARK } from './packet';
import { PT, audioCodecOfPt, videoCodecOfPt } from './payload-types';
import { stripHisiliconHeader } from './audio';

export interface Jt1078Frame {
  kind: 'video' | 'audio';
  codec: CodecId;
  pt: number;
  /** data type of the frame's first packet (0 I, 1 P, 2 B, 3 audio) */
  dataType: number;
  /** device timestamp of the frame's first packet, ms */
  timestamp: number;
  /** data type I, or an IDR (H.264) / IRAP (H.265) NAL unit present */
  keyframe: boolean;
  /** video: Annex-B as sent; audio: codec payload with any HiSilicon header removed. Owned (a copy). */
  payload: Buffer;
  /** video: NAL_SCAN flags of the payload (0 for audio or unknown codecs) */
  nalFlags: number;
  packets: number;
}

export interface ReassemblerOptions {
  /** A frame growing past this is dropped (bounds memory against a terminal that never ends one). Default 4 MiB. */
  maxFrameBytes?: number;
}

export interface ReassemblerStats {
  frames: number;
  /** packets reported lost before reaching the reassembler */
  lostPackets: number;
  /** frames given up because a packet of theirs was lost or the frame was cut/oversized */
  droppedFrames: number;
  /** complete video frames thrown away while waiting for an I frame */
  skippedFrames: number;
  /** packets whose subpackage mark contradicted a reliable M bit */
  markDisagreements: number;
  /** audio payloads that carried a HiSilicon header */
  hisiliconHeaders: number;
}

export interface FrameSink {
  onFrame(frame: Jt1078Frame): void;
}

class FrameBuilder {
  parts: Buffer[] = [];
  bytes = 0;
  inFrame = false;
  pt = 0;
  dataType = 0;
  timestamp = 0;
  mSet = false;
  mClear = false;
  /** inside a frame that cannot be used: its packets are swallowed until it ends */
  skipping = false;
  /** video: waiting for an I frame */
  waitKey = true;

  reset(): void {
    this.parts.length = 0;
    this.bytes = 0;
    this.inFrame = false;
    this.skipping = false;
  }
}

export class Jt1078Reassembler {
  readonly stats: ReassemblerStats = {
    frames: 0, lostPackets: 0, droppedFrames: 0, skippedFrames: 0, markDisagreements: 0, hisiliconHeaders: 0,
  };
  private readonly video = new FrameBuilder();
  private readonly audio = new FrameBuilder();
  private readonly maxFrameBytes: number;

  constructor(private readonly sink: FrameSink, opts: ReassemblerOptions = {}) {
    this.maxFrameBytes = opts.maxFrameBytes ?? 4 * 1024 * 1024;
    this.audio.waitKey = false;
  }

  /** Same shape as ReorderSink, so a reorderer can feed the reassembler directly. */
  onOrderedPacket(p: Jt1078Packet, lostBefore: number): void {
    this.push(p, lostBefore);
  }

  push(p: Jt1078Packet, lostBefore = 0): void {
    if (p.dataType > DATA_TYPE.AUDIO) return;
    const isVideo = p.dataType !== DATA_TYPE.AUDIO;
    const b = isVideo ? this.video : this.audio;
    let broken = false;
    if (lostBefore > 0) {
      this.stats.lostPackets += lostBefore;
      if (b.inFrame) this.drop(b, isVideo);
      else if (isVideo) b.waitKey = true;
      broken = true;
    }
    if (p.marker) b.mSet = true;
    else b.mClear = true;
    const mk = p.subMark;
    const markStarts = mk === SUB_MARK.ATOMIC || mk === SUB_MARK.FIRST;
    const markEnds = mk === SUB_MARK.ATOMIC || mk === SUB_MARK.LAST;
    let starts: boolean;
    let ends: boolean;
    if (b.mSet && b.mClear) {
      // M bit rules: a frame starts after the previous one ended. Right after a loss the lost packet may
      // have been this frame's start, so the mark is taken as a hint there.
      ends = p.marker;
      starts = !b.inFrame && (!broken || markStarts);
      if (ends !== markEnds) this.stats.markDisagreements++;
    } else {
      ends = markEnds;
      starts = markStarts;
    }
    if (starts) {
      // A start while a frame is open: the open frame's last packet never came.
      if (b.inFrame) this.drop(b, isVideo);
      b.inFrame = true;
      b.skipping = false;
      b.pt = p.pt;
      b.dataType = p.dataType;
      b.timestamp = p.timestamp;
    } else if (!b.inFrame) {
      // A middle or last packet whose frame start is missing: swallow the rest of that frame.
      this.stats.droppedFrames++;
      if (isVideo) b.waitKey = true;
      if (!ends) {
        b.inFrame = true;
        b.skipping = true;
      }
      return;
    }
    if (b.skipping) {
      if (ends) b.reset();
      return;
    }
    b.parts.push(p.body);
    b.bytes += p.body.length;
    if (b.bytes > this.maxFrameBytes) {
      this.drop(b, isVideo);
      if (!ends) {
        b.inFrame = true;
        b.skipping = true;
      }
      return;
    }
    if (ends) this.complete(b, isVideo);
  }

  /** Forget any partial frame (stream ended or restarted). Video waits for an I frame again. */
  reset(): void {
    this.video.reset();
    this.video.waitKey = true;
    this.audio.reset();
  }

  private drop(b: FrameBuilder, isVideo: boolean): void {
    if (!b.skipping) this.stats.droppedFrames++;
    b.reset();
    if (isVideo) b.waitKey = true;
  }

  private complete(b: FrameBuilder, isVideo: boolean): void {
    // One copy per frame: the frame must be contiguous, and copying also lets go of the socket chunks
    // the bodies were cut from (a GOP cache holding subarrays would pin every chunk).
    const payload = b.parts.length === 1 ? Buffer.from(b.parts[0]) : Buffer.concat(b.parts, b.bytes);
    const count = b.parts.length;
    b.reset();
    if (isVideo) {
      const codec = videoCodecOfPt(b.pt);
      const flags = codec === 'h264' ? scanH264(payload) : codec === 'h265' ? scanH265(payload) : 0;
      const keyframe = b.dataType === DATA_TYPE.VIDEO_I || (flags & NAL_SCAN.KEY) !== 0;
      if (b.waitKey) {
        if (!keyframe) {
          this.stats.skippedFrames++;
          return;
        }
        b.waitKey = false;
      }
      this.stats.frames++;
      this.sink.onFrame({
        kind: 'video', codec, pt: b.pt, dataType: b.dataType, timestamp: b.timestamp, keyframe, payload,
        nalFlags: flags, packets: count,
      });
      return;
    }
    const codec = audioCodecOfPt(b.pt);
    const stripped = stripHisiliconHeader(payload);
    if (stripped !== payload) this.stats.hisiliconHeaders++;
    this.stats.frames++;
    this.sink.onFrame({
      kind: 'audio', codec, pt: b.pt, dataType: DATA_TYPE.AUDIO, timestamp: b.timestamp, keyframe: true,
      payload: stripped, nalFlags: 0, packets: count,
    });
  }
}

/** PT values of video codecs this module understands (for callers deciding what to announce). */
export const KNOWN_VIDEO_PTS: readonly number[] = [PT.H264, PT.H265];
