/**
 * Everything between parsed packets and the media bus for one source (one SIM + logical channel):
 * reorder / loss accounting -> frame reassembly (where a video frame's NAL units are found, once) -> parameter sets
 * and track announcements -> audio normalisation -> timeline -> immutable access units, each video one with its NAL
 * index. The parameter sets are the track's (VideoTrackInfo); a key frame carries those the terminal sent with it.
 *
 * Output starts at the first video keyframe for which the parameter sets are known (the frame's own, or ones seen
 * earlier), so the first access unit a subscriber gets is decodable. Audio is not held back by video: it flows
 * from its first usable frame, on the same timeline origin as video.
 *
 * Time: the timeline gives integer ms (terminals count in ms). Video units are at 90 kHz (ms x 90, exact); audio
 * units at the track's sample rate, placed and normalised by audio-normaliser.ts on the same timeline.
 */
import { parseH264Sps } from '../../../plugin-sdk/formats';
import { parseH265Sps } from '../../../plugin-sdk/formats';
import { NAL_ARENA, NAL_FLAG, NalUnits, nalKindFlags } from '../../../plugin-sdk/formats';
import { keptCopy } from '../../../plugin-sdk';
import { VIDEO_TIMESCALE, unitAt, type AccessUnit, type AudioTrackInfo, type TrackInfo, type VideoCodec, type VideoTrackInfo } from '../../../plugin-sdk';
import type { Jt1078Packet } from './packet';
import { Jt1078Reorderer, ReorderStats } from './reorder';
import { Jt1078Frame, Jt1078Reassembler, ReassemblerStats } from './reassembler';
import { Jt1078Timeline, TimelineOptions, TimelineStats } from './timeline';
import { AudioNormaliser, type AudioFraming, type AudioOptions, type AudioStats } from './audio-normaliser';
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';

export type { AudioFraming, AudioOptions, AudioStats } from './audio-normaliser';

export interface StreamAssemblerOptions {
  /**
   * UDP: hold packets to put them back in order ({} for the defaults: 64 packets / 200 ms).
   * TCP: false (the default): packets are in order; gaps are still counted and handled.
   */
  reorder?: false | { maxPackets?: number; maxDelayMs?: number };
  /** ms clock (monotonic) for the reorder deadlines and the units' receivedAt; default performance.now() */
  now?: () => number;
  timeline?: TimelineOptions;
  /** see ReassemblerOptions.maxFrameBytes */
  maxFrameBytes?: number;
  /** see ReassemblerOptions.alloc (the publisher's alloc: its units are pushed in the call that finishes a frame) */
  alloc?: (bytes: number) => Buffer;
  /**
   * the publisher's discard: memory from `alloc` that no unit carries (a frame dropped, or one whose start codes
   * were made 4-byte in memory of its own), which the bus would otherwise never reuse
   */
  discard?: (payload: Buffer) => void;
  audio?: AudioOptions;
}

export interface AssemblerSink {
  /** A track became known or its parameters changed; always before the access units that need it. */
  onTrack(info: TrackInfo): void;
  onAccessUnit(au: AccessUnit): void;
  /** The audio's payload type or HiSilicon framing changed (called on the first audio frame, then on changes). */
  onAudioFraming?(f: AudioFraming): void;
}

export interface StreamAssemblerStats {
  packets: number;
  videoUnits: number;
  audioUnits: number;
  /** video frames dropped because no parameter sets were known yet */
  waitingForParameterSets: number;
  /** video frames with a PT other than H.264/H.265 */
  unsupportedVideo: number;
  /** SPS that could not be parsed (the track is announced without size/profile) */
  badParameterSets: number;
  reorder: ReorderStats;
  reassembly: ReassemblerStats;
  timeline: TimelineStats;
  audio: AudioStats;
}

export class Jt1078StreamAssembler {
  private readonly reorderer: Jt1078Reorderer;
  private readonly reassembler: Jt1078Reassembler;
  private readonly timeline: Jt1078Timeline;
  private readonly now: () => number;
  private readonly discard: ((payload: Buffer) => void) | undefined;
  /** memory for a payload made anew (start codes normalised): the publisher's */
  private readonly alloc: (bytes: number) => Buffer;
  /** the payload of the audio frame being handled, and whether a unit pushed carries (part of) it */
  private framePayload: Buffer | undefined;
  private carried = false;
  private packets = 0;
  private videoUnits = 0;
  private waitingForParams = 0;
  private unsupportedVideo = 0;
  private badParams = 0;

  private vCodec: VideoCodec | undefined;
  private vps: Buffer | undefined;
  private sps: Buffer | undefined;
  private pps: Buffer | undefined;
  /** parameter sets changed since the last announcement */
  private paramsDirty = false;
  private video: VideoTrackInfo | undefined;
  private videoStarted = false;

  private readonly audio: AudioNormaliser;
  /** reads a frame's NAL index */
  private readonly reader = new NalUnits();
  /** where normalised() wrote its payload's index in NAL_ARENA.mem */
  private normalisedAt = 0;

  constructor(
    private readonly sink: AssemblerSink,
    opts: StreamAssemblerOptions = {},
  ) {
    this.now = opts.now ?? (() => performance.now());
    this.reassembler = new Jt1078Reassembler(this, { maxFrameBytes: opts.maxFrameBytes, alloc: opts.alloc, discard: opts.discard });
    this.discard = opts.alloc ? opts.discard : undefined;
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe does not use this
    this.alloc = opts.alloc ?? Buffer.allocUnsafe;
    const r = opts.reorder;
    this.reorderer = new Jt1078Reorderer(this.reassembler, {
      maxPackets: r ? (r.maxPackets ?? 64) : 0,
      maxDelayMs: r ? r.maxDelayMs : undefined,
      now: opts.now,
    });
    this.timeline = new Jt1078Timeline(opts.timeline);
    this.audio = new AudioNormaliser(
      {
        map: (ts) => this.timeline.map('audio', ts),
        now: this.now,
        onTrack: (info) => sink.onTrack(info),
        onUnit: (u) => this.unit(u),
        onFraming: (f) => sink.onAudioFraming?.(f),
      },
      opts.audio,
    );
  }

  push(p: Jt1078Packet): void {
    if (p.dataType > 3) return;
    this.packets++;
    // One origin for audio and video: the connection's first packet, whatever it carries.
    if (!this.timeline.started) this.timeline.start(p.timestamp);
    this.reorderer.push(p);
  }

  /** The pushed packets' bodies may be reused after this (a TCP read buffer): unfinished frames copy theirs. */
  detach(): void {
    this.reassembler.detach();
  }

  /** Releases packets that waited too long for a missing one (UDP); call when nextDeadline() has passed. */
  poll(): void {
    this.reorderer.poll();
  }

  /** ms (on the `now` clock) when poll() next has work, or Infinity. */
  nextDeadline(): number {
    return this.reorderer.nextDeadline();
  }

  /** End of stream: releases held packets; an unfinished frame is dropped. */
  flush(): void {
    this.reorderer.flush();
    this.reassembler.reset();
  }

  /** Packets held by the reorder buffer (UDP; at most maxPackets + 1 per kind). */
  get pendingPackets(): number {
    return this.reorderer.buffered;
  }

  /** Bytes held in unfinished frames. */
  get pendingFrameBytes(): number {
    return this.reassembler.pendingBytes;
  }

  get videoTrack(): VideoTrackInfo | undefined {
    return this.video;
  }

  get audioTrack(): AudioTrackInfo | undefined {
    return this.audio.track;
  }

  /** How the terminal frames its audio, once it has sent some. */
  get audioFraming(): AudioFraming | undefined {
    return this.audio.audioFraming;
  }

  get stats(): StreamAssemblerStats {
    return {
      packets: this.packets,
      videoUnits: this.videoUnits,
      audioUnits: this.audio.units,
      waitingForParameterSets: this.waitingForParams,
      unsupportedVideo: this.unsupportedVideo,
      badParameterSets: this.badParams,
      reorder: { ...this.reorderer.stats },
      reassembly: { ...this.reassembler.stats },
      timeline: { ...this.timeline.stats },
      audio: this.audio.stats,
    };
  }

  /** FrameSink: called by the reassembler. */
  onFrame(f: Jt1078Frame): void {
    // dropped, or carried in memory of its own: the bus may reuse what the reassembler took for it
    if (f.kind === 'video') {
      // (the video path knows what it carries: the frame's payload in a field took the write barrier's slow path)
      if (!this.onVideo(f)) this.discard?.(f.payload);
      return;
    }
    this.carried = false;
    this.framePayload = f.payload;
    this.audio.onFrame(f);
    this.framePayload = undefined;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the audio path's units (unit()) set it when the bus keeps the payload
    if (!this.carried) this.discard?.(f.payload);
  }

  private unit(u: AccessUnit): void {
    const f = this.framePayload;
    // a payload made anew may come from the same chunk: only a view of the frame's own bytes carries it. Most units
    // carry the frame's payload itself, which the identity says without `.buffer` and `.byteOffset`: each of those is
    // a generic property load in optimised code on this Node (30-75 ns; see the bench README), four a unit.
    const p = u.payload;
    if (f !== undefined && (p === f || (p.buffer === f.buffer && p.byteOffset >= f.byteOffset && p.byteOffset < f.byteOffset + Math.max(1, f.length)))) {
      this.carried = true;
    }
    this.sink.onAccessUnit(u);
  }

  // --- video -----------------------------------------------------------------------------------

  /** Whether the unit it made (if any) carries the frame's payload itself. */
  private onVideo(f: Jt1078Frame): boolean {
    if (f.codec !== 'h264' && f.codec !== 'h265') {
      this.unsupportedVideo++;
      return false;
    }
    const codec: VideoCodec = f.codec;
    if (codec !== this.vCodec) {
      // A codec switch invalidates everything known about the old stream.
      this.vCodec = codec;
      this.vps = this.sps = this.pps = undefined;
      this.videoStarted = false;
      this.paramsDirty = true;
    }
    const flags = f.nalFlags;
    if (flags & (NAL_FLAG.SPS | NAL_FLAG.PPS | NAL_FLAG.VPS)) this.takeParameterSets(codec, f);
    if (!(flags & NAL_FLAG.VCL) && !(flags & NAL_FLAG.NO_START_CODE)) return false; // parameter sets / SEI only: nothing to show
    const haveParams = this.sps !== undefined && this.pps !== undefined && (codec === 'h264' || this.vps !== undefined);

    if (f.keyframe && haveParams && (this.paramsDirty || !this.videoStarted)) {
      if (this.paramsDirty || !this.video) this.announceVideo(codec);
      this.videoStarted = true;
    }
    if (!this.videoStarted) {
      this.waitingForParams++;
      return false;
    }

    // A key frame is published as the terminal sent it: the track holds the parameter sets (announced before it),
    // and an output that needs them in-band takes them from there. Only start codes are made 4-byte.
    let payload = f.payload;
    let nals = f.nals;
    let nalsAt = f.nalsAt;
    if (flags & NAL_FLAG.NEEDS_NORMALISING && nals !== undefined) {
      payload = this.normalised(codec, f.payload, nals, nalsAt);
      nals = NAL_ARENA.mem;
      nalsAt = this.normalisedAt;
    }
    const t = this.timeline.map('video', f.timestamp);
    this.videoUnits++;
    this.sink.onAccessUnit(
      unitAt({
        kind: 'video',
        codec,
        timescale: VIDEO_TIMESCALE,
        dtsTicks: t * (VIDEO_TIMESCALE / 1000),
        keyframe: f.keyframe,
        payload,
        receivedAt: this.now(),
        nals,
        nalsAt,
      }),
    );
    // a normalised payload is memory of its own
    return payload === f.payload;
  }

  /**
   * The frame's NAL units again, each after a 4-byte start code, in the publisher's memory (the frame's own is given
   * back: onFrame), with their index written as they are laid out (normalisedAt): no second search.
   */
  private normalised(codec: VideoCodec, src: Buffer, nals: Int32Array, nalsAt: number): Buffer {
    const r = this.reader;
    const n = r.ofIndex(nals, nalsAt);
    let size = 0;
    for (let i = 0; i < n; i++) size += 4 + r.end(i) - r.start(i);
    const out = this.alloc(size);
    NAL_ARENA.begin();
    let at = 0;
    for (let i = 0; i < n; i++) {
      const from = r.start(i);
      out[at] = 0;
      out[at + 1] = 0;
      out[at + 2] = 0;
      out[at + 3] = 1;
      at += 4;
      NAL_ARENA.add(at, at + r.end(i) - from, nalKindFlags(codec, src[from]));
      at += src.copy(out, at, from, r.end(i));
    }
    this.normalisedAt = NAL_ARENA.finish(size);
    return out;
  }

  /** The frame's parameter sets, from its index (the last of each kind, as a decoder takes them). */
  private takeParameterSets(codec: VideoCodec, f: Jt1078Frame): void {
    const r = this.reader;
    const payload = f.payload;
    let vps: Buffer | undefined, sps: Buffer | undefined, pps: Buffer | undefined;
    for (let i = 0, n = f.nals === undefined ? 0 : r.ofIndex(f.nals, f.nalsAt); i < n; i++) {
      const k = nalKindFlags(codec, payload[r.start(i)]);
      if (k === NAL_FLAG.SPS) sps = payload.subarray(r.start(i), r.end(i));
      else if (k === NAL_FLAG.PPS) pps = payload.subarray(r.start(i), r.end(i));
      else if (k === NAL_FLAG.VPS) vps = payload.subarray(r.start(i), r.end(i));
    }
    if (vps && !(this.vps && this.vps.equals(vps))) {
      this.vps = keptCopy(vps);
      this.paramsDirty = true;
    }
    if (sps && !(this.sps && this.sps.equals(sps))) {
      this.sps = keptCopy(sps);
      this.paramsDirty = true;
    }
    if (pps && !(this.pps && this.pps.equals(pps))) {
      this.pps = keptCopy(pps);
      this.paramsDirty = true;
    }
  }

  private announceVideo(codec: VideoCodec): void {
    this.paramsDirty = false;
    const info: VideoTrackInfo = { kind: 'video', codec, sps: this.sps, pps: this.pps };
    if (codec === 'h265') info.vps = this.vps;
    try {
      if (codec === 'h264') {
        const s = parseH264Sps(this.sps as Buffer);
        info.width = s.width;
        info.height = s.height;
        info.profile = s.profile;
        info.profileIdc = s.profileIdc;
        info.level = s.levelIdc;
        if (s.frameRate !== undefined) info.frameRate = s.frameRate;
      } else {
        const s = parseH265Sps(this.sps as Buffer);
        info.width = s.width;
        info.height = s.height;
        info.profile = s.profile;
        info.profileIdc = s.generalProfileIdc;
        info.level = s.generalLevelIdc;
      }
    } catch {
      // The decoder may still cope; announce what is known rather than hold the stream back.
      this.badParams++;
    }
    this.video = info;
    this.sink.onTrack(info);
  }
}
