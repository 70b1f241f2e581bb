/**
 * Rebuilds frames from the ordered packets of one source (one SIM + channel), per kind.
 *
 * Frame boundaries come from the subpackage mark (atomic / first / middle / last) and the M bit (set on
 * the last or only packet of a frame). Some terminals get the marks wrong, others never set the M bit or
 * set it on every packet. While the two agree there is nothing to decide. When they disagree and neither
 * has been proven for this source, the frame is held open for one packet: if the next packet carries the
 * same timestamp the frame went on, otherwise it had ended; that outcome is a vote for whichever witness
 * was right. Two votes one way (and none the other) settle the source on the marks or on the M bit, so
 * the one-packet wait only happens at the start of a terminal that gets one of them wrong.
 *
 * A lost packet (reported by the reorderer as lostBefore) drops the frame it fell into, and video then
 * waits for the next I frame: a P frame whose reference is missing decodes into garbage until then.
 * Video also starts at an I frame.
 */
import { NAL_ARENA, NAL_FLAG, nalIndexFlags } from '../../../plugin-sdk/formats';
import type { CodecId } from '../../../plugin-sdk';
import { DATA_TYPE, Jt1078Packet, SUB_MARK, WIRE_BODY } from './packet';
import { audioCodecOfPt, videoCodecOfPt } from './payload-types';
import { hasHisiliconHeader } from './audio';
import { BufferSlab, FRAME_SLAB_BYTES } from '../../../plugin-sdk';
import { FrameBuilder, MODE_M, MODE_MARKS } from './frame-builder';
import { Buffer } from 'node:buffer';

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
  /** video: NAL_FLAG flags of the payload (0 for audio or unknown codecs), from its index */
  nalFlags: number;
  /** video (H.264/H.265): the payload's NAL index, found once here and carried by the unit made of it (nal-index.ts) */
  nals: Int32Array | undefined;
  nalsAt: number;
  packets: number;
  /** audio: the terminal put a HiSilicon header in front of the frame (removed from payload) */
  hisilicon: boolean;
}

export interface ReassemblerOptions {
  /** A frame growing past this is dropped (bounds memory against a terminal that never ends one). Default 4 MiB. */
  maxFrameBytes?: number;
  /**
   * Memory for a finished frame (the bus's Publisher.alloc, which reuses it once no reader can read it). Default:
   * slices of this reassembler's own slab. A frame is handed to the sink in the same call that took its memory.
   */
  alloc?: (bytes: number) => Buffer;
  /** gives back memory from `alloc` that no frame will carry (Publisher.discard): a frame skipped while waiting for a key frame */
  discard?: (payload: Buffer) => void;
}

export interface ReassemblerStats {
  frames: number;
  /** packets reported lost before reaching the reassembler */
  lostPackets: number;
  /** frames given up because a packet of theirs was lost or the frame was cut/oversized */
  droppedFrames: number;
  /** complete video frames thrown away while waiting for an I frame */
  skippedFrames: number;
  /** packets whose subpackage mark and M bit disagreed on whether the frame ends there */
  markDisagreements: number;
  /** audio payloads that carried a HiSilicon header */
  hisiliconHeaders: number;
}

export interface FrameSink {
  onFrame(frame: Jt1078Frame): void;
}

export class Jt1078Reassembler {
  readonly stats: ReassemblerStats = {
    frames: 0,
    lostPackets: 0,
    droppedFrames: 0,
    skippedFrames: 0,
    markDisagreements: 0,
    hisiliconHeaders: 0,
  };
  private readonly video = new FrameBuilder();
  private readonly audio = new FrameBuilder();
  private readonly maxFrameBytes: number;
  /** frames are copied into slices of this unless given `alloc` (see BufferSlab for why per source) */
  private readonly slab = new BufferSlab(FRAME_SLAB_BYTES);
  private readonly take: (bytes: number) => Buffer;
  private readonly discard: ((payload: Buffer) => void) | undefined;

  constructor(
    private readonly sink: FrameSink,
    opts: ReassemblerOptions = {},
  ) {
    this.maxFrameBytes = opts.maxFrameBytes ?? 4 * 1024 * 1024;
    this.take = opts.alloc ?? ((n) => this.slab.take(n));
    this.discard = opts.alloc ? opts.discard : undefined;
    this.audio.waitKey = false;
  }

  /** Bytes held in unfinished frames (bounded by 2 x maxFrameBytes). */
  get pendingBytes(): number {
    return this.video.bytes + this.audio.bytes;
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
    let droppedNow = false;
    if (lostBefore > 0) {
      this.stats.lostPackets += lostBefore;
      if (b.inFrame) {
        this.drop(b, isVideo);
        droppedNow = true;
      } else if (isVideo) {
        b.waitKey = true;
      }
      broken = true;
    }
    const mk = p.subMark;
    const markStarts = mk === SUB_MARK.ATOMIC || mk === SUB_MARK.FIRST;
    const markEnds = mk === SUB_MARK.ATOMIC || mk === SUB_MARK.LAST;
    if (b.tentative) {
      // The previous packet left open whether its frame ended; this packet's timestamp tells.
      b.tentative = false;
      const ended = p.timestamp !== b.timestamp;
      this.vote(b, ended === b.tentativeMarkEnds);
      if (ended) {
        if (b.skipping) b.reset();
        else this.complete(b, isVideo);
      }
    }
    let starts: boolean;
    let ends: boolean;
    if (b.mode === MODE_MARKS) {
      ends = markEnds;
      starts = markStarts;
    } else {
      // M bit proven, or nothing proven yet: a frame starts after the previous one ended. Right after
      // a loss the lost packet may have been this frame's start; the mark tells, unless the marks are
      // known to be wrong, and then the packet is taken as the middle of a broken frame: building a
      // frame from a middle would be worse (an I frame's tail would go out as a keyframe).
      starts = !b.inFrame && (!broken || (b.mode !== MODE_M && markStarts));
      if (b.mode === MODE_M) {
        ends = p.marker;
        if (ends !== markEnds) this.stats.markDisagreements++;
      } else if (markEnds === p.marker) {
        ends = markEnds;
      } else {
        // Marks and M bit disagree and neither is proven: decide at the next packet.
        this.stats.markDisagreements++;
        ends = false;
        b.tentative = true;
        b.tentativeMarkEnds = markEnds;
      }
    }
    if (starts) {
      // A start while a frame is open: the open frame's last packet never came (marks mode only).
      if (b.inFrame) this.drop(b, isVideo);
      b.inFrame = true;
      b.pt = p.pt;
      b.dataType = p.dataType;
      b.timestamp = p.timestamp;
    } else if (!b.inFrame) {
      // A middle or last packet whose frame start is missing: swallow the rest of that frame.
      b.tentative = false;
      // (not counted again when it is the tail of the frame this very loss just dropped)
      if (!droppedNow) this.stats.droppedFrames++;
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
    if (p.body === WIRE_BODY) b.addPart(p.wire, p.bodyAt, p.bodyEnd);
    else b.addPart(p.body, 0, p.body.length);
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

  /**
   * Copies the bodies of unfinished frames out of the read they came from, so the caller may reuse its read buffer
   * (core/net/borrowed-reads.ts): called after each TCP chunk. A frame that began and ended within the chunk
   * costs nothing here; one that straddles reads is copied once more than before, into a store that grows by
   * doubling and goes with the frame.
   */
  detach(): void {
    if (this.video.count > 0) this.own(this.video);
    if (this.audio.count > 0) this.own(this.audio);
  }

  private own(b: FrameBuilder): void {
    // the store, when there is one, is parts[0] and holds the frame's first bytes from 0
    const kept = b.store !== undefined ? b.partEnd[0] : 0;
    if (kept === b.bytes) return;
    let store = b.store;
    if (store === undefined || store.length < b.bytes) {
      const grown = Buffer.allocUnsafe(Math.max(b.bytes, 2 * (store?.length ?? 0), 4096));
      if (kept > 0) grown.set(store!.subarray(0, kept));
      store = b.store = grown;
    }
    const at = b.copyParts(kept > 0 ? 1 : 0, store, kept);
    b.keepOnly(store, at);
  }

  /** Which witness the frame boundaries follow, per kind: 'marks', 'm' or 'unproven'. */
  boundaryMode(kind: 'video' | 'audio'): 'marks' | 'm' | 'unproven' {
    const m = (kind === 'video' ? this.video : this.audio).mode;
    return m === MODE_MARKS ? 'marks' : m === MODE_M ? 'm' : 'unproven';
  }

  /** Two votes one way and none the other settle which witness to follow from then on. */
  private vote(b: FrameBuilder, marksRight: boolean): void {
    if (marksRight) b.votesMarks++;
    else b.votesM++;
    if (b.votesMarks >= 2 && b.votesM === 0) b.mode = MODE_MARKS;
    else if (b.votesM >= 2 && b.votesMarks === 0) b.mode = MODE_M;
  }

  /** Forget any partial frame (stream ended or restarted). Video waits for an I frame again. */
  reset(): void {
    this.video.reset();
    this.video.waitKey = true;
    this.audio.reset();
    this.slab.release();
  }

  private drop(b: FrameBuilder, isVideo: boolean): void {
    if (!b.skipping) this.stats.droppedFrames++;
    b.reset();
    if (isVideo) b.waitKey = true;
  }

  private complete(b: FrameBuilder, isVideo: boolean): void {
    // One copy per frame: the frame must be contiguous, and copying also lets go of the socket chunks
    // the bodies were cut from (a GOP cache holding subarrays would pin every chunk).
    const count = b.count;
    if (b.bytes === 0) {
      // nothing to show (empty bodies): not a frame
      b.reset();
      return;
    }
    const payload = this.take(b.bytes);
    b.copyParts(0, payload, 0);
    b.reset();
    if (isVideo) {
      const codec = videoCodecOfPt(b.pt);
      // the one search of the frame's bytes: its NAL index, which the unit carries to every output
      let nals: Int32Array | undefined;
      let nalsAt = 0;
      let flags = 0;
      if (codec === 'h264' || codec === 'h265') {
        nalsAt = NAL_ARENA.index(payload, codec);
        nals = NAL_ARENA.mem;
        flags = nalIndexFlags(nals, nalsAt);
      }
      const keyframe = b.dataType === DATA_TYPE.VIDEO_I || (flags & NAL_FLAG.KEY) !== 0;
      if (b.waitKey) {
        if (!keyframe) {
          this.stats.skippedFrames++;
          this.discard?.(payload);
          return;
        }
        b.waitKey = false;
      }
      this.stats.frames++;
      this.sink.onFrame({
        kind: 'video',
        codec,
        pt: b.pt,
        dataType: b.dataType,
        timestamp: b.timestamp,
        keyframe,
        payload,
        nalFlags: flags,
        nals,
        nalsAt,
        packets: count,
        hisilicon: false,
      });
      return;
    }
    const codec = audioCodecOfPt(b.pt);
    const hisilicon = hasHisiliconHeader(payload);
    if (hisilicon) this.stats.hisiliconHeaders++;
    this.stats.frames++;
    this.sink.onFrame({
      kind: 'audio',
      codec,
      pt: b.pt,
      dataType: DATA_TYPE.AUDIO,
      timestamp: b.timestamp,
      keyframe: true,
      payload: hisilicon ? payload.subarray(4) : payload,
      nalFlags: 0,
      nals: undefined,
      nalsAt: 0,
      packets: count,
      hisilicon,
    });
  }
}
