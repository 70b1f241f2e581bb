/**
 * Everything between parsed packets and the media bus for one source (one SIM + logical channel):
 * reorder / loss accounting -> frame reassembly -> parameter sets and track announcements -> timeline.
 *
 * Output starts at the first video keyframe for which the parameter sets are known (the frame's own, or
 * ones seen earlier), so the first access unit a subscriber gets is decodable. Audio is not held back:
 * it flows from its first frame, on the same timeline origin as video.
 */
import { NAL_SCAN, extractH264ParameterSets, parseH264Sps } from '../../../plugin-sdk/formats/h264';
import { extractH265ParameterSets, parseH265Sps } from '../../../plugin-sdk/formats/h265';
import { joinAnnexB, splitAnnexB } from '../../../plugin-sdk/formats/annexb';
import type { AccessUnit, AudioCodec, AudioTrackInfo, TrackInfo, VideoCodec, VideoTrackInfo } from '../../../plugin-sdk/media';
import type { Jt1078Packet } from './packet';
import { Jt1078Reorderer, ReorderStats } from './reorder';
import { Jt1078Frame, Jt1078Reassembler, ReassemblerStats } from './reassembler';
import { Jt1078Timeline, TimelineOptions, TimelineStats } from './timeline';
import { G726RateEstimator, parseAdts, parseMpegAudioHeader } from './audio';

export interface StreamAssemblerOptions {
  /**
   * UDP: hold packets to put them back in order ({} for the defaults: 64 packets / 200 ms).
   * TCP: false (the default): packets are in order; gaps are still counted and handled.
   */
  reorder?: false | { maxPackets?: number; maxDelayMs?: number };
  /** ms clock for the reorder deadlines; default performance.now */
  now?: () => number;
  timeline?: TimelineOptions;
  /** see ReassemblerOptions.maxFrameBytes */
  maxFrameBytes?: number;
}

export interface AssemblerSink {
  /** A track became known or its parameters changed; always before the access units that need it. */
  onTrack(info: TrackInfo): void;
  onAccessUnit(au: AccessUnit): void;
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
}

export class Jt1078StreamAssembler {
  private readonly reorderer: Jt1078Reorderer;
  private readonly reassembler: Jt1078Reassembler;
  private readonly timeline: Jt1078Timeline;
  private packets = 0;
  private videoUnits = 0;
  private audioUnits = 0;
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

  private audio: AudioTrackInfo | undefined;
  private g726 = new G726RateEstimator();

  constructor(private readonly sink: AssemblerSink, opts: StreamAssemblerOptions = {}) {
    this.reassembler = new Jt1078Reassembler(this, { maxFrameBytes: opts.maxFrameBytes });
    const r = opts.reorder;
    this.reorderer = new Jt1078Reorderer(this.reassembler, {
      maxPackets: r ? r.maxPackets ?? 64 : 0,
      maxDelayMs: r ? r.maxDelayMs : undefined,
      now: opts.now,
    });
    this.timeline = new Jt1078Timeline(opts.timeline);
  }

  push(p: Jt1078Packet): void {
    if (p.dataType > 3) return;
    this.packets++;
    // One origin for audio and video: the connection's first packet, whatever it carries.
    if (!this.timeline.started) this.timeline.start(p.timestamp);
    this.reorderer.push(p);
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
    return this.audio;
  }

  get stats(): StreamAssemblerStats {
    return {
      packets: this.packets,
      videoUnits: this.videoUnits,
      audioUnits: this.audioUnits,
      waitingForParameterSets: this.waitingForParams,
      unsupportedVideo: this.unsupportedVideo,
      badParameterSets: this.badParams,
      reorder: { ...this.reorderer.stats },
      reassembly: { ...this.reassembler.stats },
      timeline: { ...this.timeline.stats },
    };
  }

  /** FrameSink: called by the reassembler. */
  onFrame(f: Jt1078Frame): void {
    if (f.kind === 'video') this.onVideo(f);
    else this.onAudio(f);
  }

  // --- video -----------------------------------------------------------------------------------

  private onVideo(f: Jt1078Frame): void {
    if (f.codec !== 'h264' && f.codec !== 'h265') {
      this.unsupportedVideo++;
      return;
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
    if (flags & (NAL_SCAN.SPS | NAL_SCAN.PPS | NAL_SCAN.VPS)) this.takeParameterSets(codec, f.payload);
    if (!(flags & NAL_SCAN.VCL) && !(flags & NAL_SCAN.NO_START_CODE)) return; // parameter sets / SEI only: nothing to show
    const haveParams = this.sps !== undefined && this.pps !== undefined && (codec === 'h264' || this.vps !== undefined);

    if (f.keyframe && haveParams && (this.paramsDirty || !this.videoStarted)) {
      if (this.paramsDirty || !this.video) this.announceVideo(codec);
      this.videoStarted = true;
    }
    if (!this.videoStarted) {
      this.waitingForParams++;
      return;
    }

    let payload = f.payload;
    if (flags & NAL_SCAN.NEEDS_NORMALISING) payload = joinAnnexB(splitAnnexB(payload));
    if (f.keyframe && !(flags & NAL_SCAN.SPS)) {
      // Keyframes carry their parameter sets on the bus, so a subscriber can start at any of them.
      const ps: Buffer[] = codec === 'h265' ? [this.vps as Buffer, this.sps as Buffer, this.pps as Buffer] : [this.sps as Buffer, this.pps as Buffer];
      payload = Buffer.concat([joinAnnexB(ps), payload]);
    }
    const t = this.timeline.map('video', f.timestamp);
    this.videoUnits++;
    this.sink.onAccessUnit({ kind: 'video', codec, dts: t, pts: t, keyframe: f.keyframe, payload });
  }

  private takeParameterSets(codec: VideoCodec, payload: Buffer): void {
    const found: { vps?: Buffer; sps?: Buffer; pps?: Buffer } =
      codec === 'h264' ? extractH264ParameterSets(payload) : extractH265ParameterSets(payload);
    const vps = found.vps;
    if (vps && !(this.vps && this.vps.equals(vps))) {
      this.vps = Buffer.from(vps);
      this.paramsDirty = true;
    }
    if (found.sps && !(this.sps && this.sps.equals(found.sps))) {
      this.sps = Buffer.from(found.sps);
      this.paramsDirty = true;
    }
    if (found.pps && !(this.pps && this.pps.equals(found.pps))) {
      this.pps = Buffer.from(found.pps);
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

  // --- audio -----------------------------------------------------------------------------------

  private onAudio(f: Jt1078Frame): void {
    const codec = f.codec as AudioCodec;
    let announce = !this.audio || this.audio.codec !== codec;
    if (announce) this.g726 = new G726RateEstimator();
    let bits: number | undefined;
    if (codec === 'g726') {
      bits = this.g726.observe(f.timestamp, f.payload.length);
      if (this.audio && this.audio.codec === 'g726' && bits !== this.audio.bitsPerSample) announce = true;
    }
    if (codec === 'aac' && this.audio && this.audio.codec === 'aac') {
      const adts = parseAdts(f.payload);
      if (adts && (!this.audio.config || !adts.config.equals(this.audio.config))) announce = true;
    }
    if (announce) {
      this.audio = audioTrackInfo(codec, f.payload, bits);
      this.sink.onTrack(this.audio);
    }
    const t = this.timeline.map('audio', f.timestamp);
    this.audioUnits++;
    this.sink.onAccessUnit({ kind: 'audio', codec, dts: t, pts: t, keyframe: true, payload: f.payload });
  }
}

function audioTrackInfo(codec: AudioCodec, payload: Buffer, bits: number | undefined): AudioTrackInfo {
  const info: AudioTrackInfo = { kind: 'audio', codec, sampleRate: 8000, channels: 1 };
  if (codec === 'g722') {
    info.sampleRate = 16000;
  } else if (codec === 'aac') {
    const adts = parseAdts(payload);
    if (adts) {
      info.sampleRate = adts.sampleRate;
      info.channels = adts.channels;
      info.config = adts.config;
    }
  } else if (codec === 'mp3') {
    const h = parseMpegAudioHeader(payload);
    if (h) {
      info.sampleRate = h.sampleRate;
      info.channels = h.channels;
    }
  } else if (codec === 'g726' && bits !== undefined) {
    info.bitsPerSample = bits;
  }
  // Everything else (G.711, G.726, ADPCM, G.721/723/729, unknown) is 8 kHz mono on these terminals.
  return info;
}
