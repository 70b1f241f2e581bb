/**
 * Everything between parsed packets and the media bus for one source (one SIM + logical channel):
 * reorder / loss accounting -> frame reassembly -> parameter sets and track announcements -> audio normalisation ->
 * timeline -> immutable access units.
 *
 * Output starts at the first video keyframe for which the parameter sets are known (the frame's own, or ones seen
 * earlier), so the first access unit a subscriber gets is decodable. Audio is not held back by video: it flows
 * from its first usable frame, on the same timeline origin as video.
 *
 * Time: the timeline gives integer ms (terminals count in ms). Video units are at 90 kHz (ms x 90, exact). Audio
 * units are at the track's sample rate with their sample count as duration; a frame that starts near where the
 * previous one ended is placed exactly there, so ms-rounded device timestamps do not leave gaps or overlaps of a
 * few samples between frames (the outputs that count samples, fMP4 and RTP, need them to tile).
 *
 * Audio is normalised here, once for every output (media.ts): one frame per unit and no vendor framing.
 * - AAC: ADTS headers removed, a packet with several ADTS frames split into units 1024 samples apart, the
 *   AudioSpecificConfig in the track (a raw frame is taken only once an ADTS frame has said what the stream is).
 * - G.711, G.726, ADPCM: the HiSilicon header was removed by the reassembler (an IMA ADPCM block keeps its own
 *   4-byte state header: it is part of the codec frame). G.726's bits per sample come from the site's override,
 *   else the payload type (G.721), else packet size over timing (audio.ts); frames before that is known are left
 *   out rather than announced without a rate, which no decoder could use and which would change the track a few
 *   frames later. Its codeword packing is the site's (terminals never say).
 */
import { NAL_SCAN, extractH264ParameterSets, parseH264Sps } from '../../../plugin-sdk/formats/h264';
import { extractH265ParameterSets, parseH265Sps } from '../../../plugin-sdk/formats/h265';
import { joinAnnexB, splitAnnexB } from '../../../plugin-sdk/formats/annexb';
import {
  VIDEO_TIMESCALE, unitAt, type AccessUnit, type AudioCodec, type AudioTrackInfo, type G726Packing, type TrackInfo,
  type VideoCodec, type VideoTrackInfo,
} from '../../../plugin-sdk/media';
import type { Jt1078Packet } from './packet';
import { Jt1078Reorderer, ReorderStats } from './reorder';
import { Jt1078Frame, Jt1078Reassembler, ReassemblerStats } from './reassembler';
import { Jt1078Timeline, TimelineOptions, TimelineStats } from './timeline';
import { AAC_FRAME_SAMPLES, AdtsHeader, G726RateEstimator, parseMpegAudioHeader } from './audio';
import { g726BitsOfPt, sampleRateOfPt } from './payload-types';

/** G.726 codeword packing announced when the site says nothing: the glaciall terminal captures are packed so (README). */
export const DEFAULT_G726_PACKING: G726Packing = 'left';

export interface AudioOptions {
  /** G.726 codeword packing to announce (terminals do not say); default 'left' */
  g726Packing?: G726Packing;
  /** G.726 bits per sample (2..5), over what the payload type or the estimate says: for terminals that label it wrong */
  g726Bits?: number;
}

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
   * the publisher's discard: memory from `alloc` that no unit carries (a frame dropped, or one given its parameter
   * sets in memory of its own), which the bus would otherwise never reuse
   */
  discard?: (payload: Buffer) => void;
  audio?: AudioOptions;
}

/** How the terminal frames its audio: what a link needs to send audio back the same way. */
export interface AudioFraming {
  pt: number;
  codec: AudioCodec;
  /** the frames carry a HiSilicon header */
  hisilicon: boolean;
}

export interface AssemblerSink {
  /** A track became known or its parameters changed; always before the access units that need it. */
  onTrack(info: TrackInfo): void;
  onAccessUnit(au: AccessUnit): void;
  /** The audio's payload type or HiSilicon framing changed (called on the first audio frame, then on changes). */
  onAudioFraming?(f: AudioFraming): void;
}

export interface AudioStats {
  /** packets that held more than one ADTS frame (each became a unit of its own) */
  multiFramePackets: number;
  /** frames left out while their codec's parameters were unknown: raw AAC before any ADTS header, G.726 before its rate */
  waitingForParameters: number;
  /** frames that could not be used: broken or truncated ADTS, ADTS with several raw blocks, ADPCM without its state header */
  malformed: number;
  /** where G.726's bits per sample came from, once known */
  g726BitsFrom?: 'config' | 'payload-type' | 'timing' | 'frame-length';
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
  /** memory for a payload made anew (parameter sets put in front, start codes normalised): the publisher's */
  private readonly alloc: ((bytes: number) => Buffer) | undefined;
  /** the payload of the frame being handled, and whether a unit pushed carries (part of) it */
  private framePayload: Buffer | undefined;
  private carried = false;
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
  private readonly audioStats: AudioStats = { multiFramePackets: 0, waitingForParameters: 0, malformed: 0 };
  private readonly g726Packing: G726Packing;
  private readonly g726Bits: number | undefined;
  private g726 = new G726RateEstimator();
  /** codec of the last audio frame seen (used or not): a change restarts the G.726 estimate */
  private lastAudioCodec: AudioCodec | undefined;
  private framing: AudioFraming | undefined;
  private readonly adts = new AdtsHeader();
  /** audio time: the last unit's start and end (ticks at aRate) and its start in ms */
  private aRate = 0;
  private aLast = -1;
  private aEnd = -1;
  private aLastMs = -1;

  constructor(private readonly sink: AssemblerSink, opts: StreamAssemblerOptions = {}) {
    this.now = opts.now ?? (() => performance.now());
    this.reassembler = new Jt1078Reassembler(this, { maxFrameBytes: opts.maxFrameBytes, alloc: opts.alloc, discard: opts.discard });
    this.discard = opts.alloc ? opts.discard : undefined;
    this.alloc = opts.alloc;
    const r = opts.reorder;
    this.reorderer = new Jt1078Reorderer(this.reassembler, {
      maxPackets: r ? r.maxPackets ?? 64 : 0,
      maxDelayMs: r ? r.maxDelayMs : undefined,
      now: opts.now,
    });
    this.timeline = new Jt1078Timeline(opts.timeline);
    this.g726Packing = opts.audio?.g726Packing ?? DEFAULT_G726_PACKING;
    const bits = opts.audio?.g726Bits;
    if (bits !== undefined && !(Number.isInteger(bits) && bits >= 2 && bits <= 5)) throw new RangeError(`g726Bits must be 2..5, got ${bits}`);
    this.g726Bits = bits;
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
    return this.audio;
  }

  /** How the terminal frames its audio, once it has sent some. */
  get audioFraming(): AudioFraming | undefined {
    return this.framing;
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
      audio: { ...this.audioStats },
    };
  }

  /** FrameSink: called by the reassembler. */
  onFrame(f: Jt1078Frame): void {
    this.carried = false;
    this.framePayload = f.payload;
    if (f.kind === 'video') this.onVideo(f);
    else this.onAudio(f);
    this.framePayload = undefined;
    // dropped, or carried in memory of its own: the bus may reuse what the reassembler took for it
    if (!this.carried) this.discard?.(f.payload);
  }

  private unit(u: AccessUnit): void {
    const f = this.framePayload;
    // a payload made anew may come from the same chunk: only a view of the frame's own bytes carries it
    if (f !== undefined && u.payload.buffer === f.buffer && u.payload.byteOffset >= f.byteOffset && u.payload.byteOffset < f.byteOffset + Math.max(1, f.length)) {
      this.carried = true;
    }
    this.sink.onAccessUnit(u);
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
    const fix = flags & NAL_SCAN.NEEDS_NORMALISING;
    const addPs = f.keyframe && !(flags & NAL_SCAN.SPS);
    if (fix || addPs) {
      // Keyframes carry their parameter sets on the bus, so a subscriber can start at any of them. Made anew in the
      // publisher's memory (key frames are the large ones); the frame's own is given back (onFrame).
      const ps: Buffer[] = !addPs ? [] : codec === 'h265' ? [this.vps as Buffer, this.sps as Buffer, this.pps as Buffer] : [this.sps as Buffer, this.pps as Buffer];
      if (fix) payload = joinAnnexB([...ps, ...splitAnnexB(payload)], this.alloc);
      else {
        const head = joinAnnexB(ps);
        const out = this.alloc ? this.alloc(head.length + payload.length) : Buffer.allocUnsafe(head.length + payload.length);
        head.copy(out, 0);
        payload.copy(out, head.length);
        payload = out;
      }
    }
    const t = this.timeline.map('video', f.timestamp);
    this.videoUnits++;
    this.unit(unitAt({
      kind: 'video', codec, timescale: VIDEO_TIMESCALE, dtsTicks: t * (VIDEO_TIMESCALE / 1000), keyframe: f.keyframe, payload,
      receivedAt: this.now(),
    }));
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
    const fr = this.framing;
    if (!fr || fr.pt !== f.pt || fr.hisilicon !== f.hisilicon) {
      this.framing = { pt: f.pt, codec, hisilicon: f.hisilicon };
      this.sink.onAudioFraming?.(this.framing);
    }
    if (codec !== this.lastAudioCodec) {
      this.lastAudioCodec = codec;
      this.g726 = new G726RateEstimator();
    }
    if (codec === 'aac') {
      this.onAac(f);
      return;
    }
    const payload = f.payload;
    const cur = this.audio;
    let announce = cur === undefined || cur.codec !== codec;
    let bits: number | undefined;
    let samples = 0;
    switch (codec) {
      case 'g711a':
      case 'g711u':
        samples = payload.length;
        break;
      case 'g726':
        bits = this.g726BitsFor(f);
        if (bits === undefined) {
          this.audioStats.waitingForParameters++;
          return;
        }
        if (!announce && (cur as AudioTrackInfo).bitsPerSample !== bits) announce = true;
        samples = Math.floor((payload.length * 8) / bits);
        break;
      case 'adpcm':
        // the block's state header (first sample, step index) is followed by one 4-bit code per sample
        if (payload.length <= 4) {
          this.audioStats.malformed++;
          return;
        }
        bits = 4;
        samples = (payload.length - 4) * 2;
        break;
      case 'g729':
        samples = payload.length * 8; // 10-byte frames of 80 samples
        break;
      case 'g722':
        samples = payload.length * 2; // 64 kbit/s at 16 kHz
        break;
      default:
        break; // not known from the payload alone: duration 0 (unknown)
    }
    let rate = sampleRateOfPt(f.pt);
    if (rate === undefined) {
      // MP3: its frame header says (only read when the track is (re)announced)
      rate = announce ? parseMpegAudioHeader(payload)?.sampleRate ?? 8000 : (cur as AudioTrackInfo).sampleRate;
    }
    if (!announce && (cur as AudioTrackInfo).sampleRate !== rate) announce = true;
    if (announce) {
      const info: AudioTrackInfo = { kind: 'audio', codec, sampleRate: rate, channels: 1 };
      if (bits !== undefined) info.bitsPerSample = bits;
      if (codec === 'g726') info.packing = this.g726Packing;
      else if (codec === 'mp3') info.channels = parseMpegAudioHeader(payload)?.channels ?? 1;
      this.audio = info;
      this.sink.onTrack(info);
    }
    const ticks = this.audioTicks(this.timeline.map('audio', f.timestamp), rate);
    this.emitAudio(codec, rate, ticks, samples, payload, this.now());
  }

  private g726BitsFor(f: Jt1078Frame): number | undefined {
    const s = this.audioStats;
    if (this.g726Bits !== undefined) {
      s.g726BitsFrom = 'config';
      return this.g726Bits;
    }
    const byPt = g726BitsOfPt(f.pt);
    if (byPt !== undefined) {
      s.g726BitsFrom = 'payload-type';
      return byPt;
    }
    const bits = this.g726.observe(f.timestamp, f.payload.length);
    if (bits !== undefined) s.g726BitsFrom = this.g726.source;
    return bits;
  }

  /** One packet of AAC: ADTS frames (one or more), or one raw frame once the stream's config is known. */
  private onAac(f: Jt1078Frame): void {
    const p = f.payload;
    const h = this.adts;
    const s = this.audioStats;
    const receivedAt = this.now();
    if (!h.read(p, 0)) {
      const cur = this.audio;
      if (!cur || cur.codec !== 'aac' || !cur.config) {
        s.waitingForParameters++;
        return;
      }
      const ticks = this.audioTicks(this.timeline.map('audio', f.timestamp), cur.sampleRate);
      this.emitAudio('aac', cur.sampleRate, ticks, AAC_FRAME_SAMPLES, p, receivedAt);
      return;
    }
    let ms = -1;
    let frames = 0;
    let off = 0;
    while (off < p.length) {
      if (!h.read(p, off) || off + h.frameLength > p.length) {
        // junk or a frame cut short: the rest of the packet cannot be framed
        s.malformed++;
        break;
      }
      const end = off + h.frameLength;
      if (h.extraBlocks > 0 || h.frameLength === h.headerLength) {
        // several raw blocks need a full AAC parse to split; an empty one is no frame
        s.malformed++;
        off = end;
        continue;
      }
      const cur = this.audio;
      // the config names the profile, the rate and the channels: any change is a new track
      if (!cur || cur.codec !== 'aac' || !cur.config || ((cur.config[0] << 8) | cur.config[1]) !== h.asc) {
        this.audio = { kind: 'audio', codec: 'aac', sampleRate: h.sampleRate, channels: h.channels, config: h.config(), frameSamples: AAC_FRAME_SAMPLES };
        this.sink.onTrack(this.audio);
      }
      let ticks: number;
      if (frames === 0 || this.aRate !== h.sampleRate) {
        if (ms < 0) ms = this.timeline.map('audio', f.timestamp);
        ticks = this.audioTicks(ms, h.sampleRate);
      } else {
        // the packet's later frames follow its first one sample-exactly: they have no timestamps of their own
        ticks = this.aEnd;
      }
      this.emitAudio('aac', h.sampleRate, ticks, AAC_FRAME_SAMPLES, p.subarray(off + h.headerLength, end), receivedAt);
      frames++;
      off = end;
    }
    if (frames > 1) s.multiFramePackets++;
  }

  /**
   * Start (ticks at rate) of an audio frame the timeline put at `ms`: where the previous frame ended when that is
   * near (half the previous frame's length, at least 2 ms and at most 40 ms: device clocks count in whole ms, some
   * in 10 ms steps), else the ms rounded, always after the previous frame's start. The bound keeps audio within
   * 40 ms of the terminal's clock (A/V sync) when the frame lengths and the timestamps disagree for good.
   */
  private audioTicks(ms: number, rate: number): number {
    let t = Math.round((ms * rate) / 1000);
    if (this.aLast < 0) return t;
    if (rate === this.aRate) {
      // (a frame of unknown length, duration 0, says nothing about where the next one starts)
      const tol = Math.min(Math.max((this.aEnd - this.aLast) / 2, rate / 500), rate / 25);
      if (this.aEnd > this.aLast && Math.abs(t - this.aEnd) <= tol) t = this.aEnd;
      if (t <= this.aLast) t = this.aLast + 1;
      return t;
    }
    // a new rate (new track): only the ms view can be compared with what went before
    if ((t * 1000) / rate <= this.aLastMs) t = Math.floor((this.aLastMs * rate) / 1000) + 1;
    while ((t * 1000) / rate <= this.aLastMs) t++;
    return t;
  }

  private emitAudio(codec: AudioCodec, rate: number, ticks: number, samples: number, payload: Buffer, receivedAt: number): void {
    const u = unitAt({ kind: 'audio', codec, timescale: rate, dtsTicks: ticks, duration: samples, keyframe: true, payload, receivedAt });
    this.aRate = rate;
    this.aLast = ticks;
    this.aEnd = ticks + samples;
    this.aLastMs = u.dts;
    this.audioUnits++;
    this.unit(u);
  }
}
