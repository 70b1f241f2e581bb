/**
 * A source's audio frames as units, one per codec frame and with no vendor framing, once for every output (media.ts).
 *
 * Time: units are at the track's sample rate with their sample count as duration; a frame that starts near where the
 * previous one ended is placed exactly there, so ms-rounded device timestamps do not leave gaps or overlaps of a few
 * samples between frames (the outputs that count samples, fMP4 and RTP, need them to tile).
 *
 * - AAC: ADTS headers removed, a packet with several ADTS frames split into units 1024 samples apart, the
 *   AudioSpecificConfig in the track (a raw frame is taken only once an ADTS frame has said what the stream is).
 * - G.711, G.726, ADPCM: the HiSilicon header was removed by the reassembler (an IMA ADPCM block keeps its own
 *   4-byte state header: it is part of the codec frame). G.726's bits per sample come from the site's override,
 *   else the payload type (G.721), else packet size over timing (audio.ts); frames before that is known are left
 *   out rather than announced without a rate, which no decoder could use and which would change the track a few
 *   frames later. Its codeword packing is the site's (terminals never say).
 */
import { unitAt, type AccessUnit, type AudioCodec, type AudioTrackInfo, type G726Packing, type TrackInfo } from '../../../plugin-sdk';
import type { Jt1078Frame } from './reassembler';
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

/** How the terminal frames its audio: what a link needs to send audio back the same way. */
export interface AudioFraming {
  pt: number;
  codec: AudioCodec;
  /** the frames carry a HiSilicon header */
  hisilicon: boolean;
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

/** What the normaliser needs from its stream assembler. */
export interface AudioNormaliserDeps {
  /** the stream's timeline: a device timestamp as ms from the shared origin */
  map: (deviceTs: number) => number;
  /** the assembler's clock, for receivedAt */
  now: () => number;
  onTrack: (info: TrackInfo) => void;
  onUnit: (u: AccessUnit) => void;
  onFraming: (f: AudioFraming) => void;
}

export class AudioNormaliser {
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
  /** units made */
  units = 0;

  constructor(
    private readonly deps: AudioNormaliserDeps,
    opts: AudioOptions = {},
  ) {
    this.g726Packing = opts.g726Packing ?? DEFAULT_G726_PACKING;
    const bits = opts.g726Bits;
    if (bits !== undefined && !(Number.isInteger(bits) && bits >= 2 && bits <= 5)) throw new RangeError(`g726Bits must be 2..5, got ${bits}`);
    this.g726Bits = bits;
  }

  get track(): AudioTrackInfo | undefined {
    return this.audio;
  }

  /** How the terminal frames its audio, once it has sent some. */
  get audioFraming(): AudioFraming | undefined {
    return this.framing;
  }

  get stats(): AudioStats {
    return { ...this.audioStats };
  }

  /** One audio frame from the reassembler. */
  onFrame(f: Jt1078Frame): void {
    const codec = f.codec as AudioCodec;
    const fr = this.framing;
    if (!fr || fr.pt !== f.pt || fr.hisilicon !== f.hisilicon) {
      this.framing = { pt: f.pt, codec, hisilicon: f.hisilicon };
      this.deps.onFraming(this.framing);
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
      rate = announce ? (parseMpegAudioHeader(payload)?.sampleRate ?? 8000) : (cur as AudioTrackInfo).sampleRate;
    }
    if (!announce && (cur as AudioTrackInfo).sampleRate !== rate) announce = true;
    if (announce) {
      const info: AudioTrackInfo = { kind: 'audio', codec, sampleRate: rate, channels: 1 };
      if (bits !== undefined) info.bitsPerSample = bits;
      if (codec === 'g726') info.packing = this.g726Packing;
      else if (codec === 'mp3') info.channels = parseMpegAudioHeader(payload)?.channels ?? 1;
      this.audio = info;
      this.deps.onTrack(info);
    }
    const ticks = this.audioTicks(this.deps.map(f.timestamp), rate);
    this.emitAudio(codec, rate, ticks, samples, payload, this.deps.now());
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
    const receivedAt = this.deps.now();
    if (!h.read(p, 0)) {
      const cur = this.audio;
      if (!cur || cur.codec !== 'aac' || !cur.config) {
        s.waitingForParameters++;
        return;
      }
      const ticks = this.audioTicks(this.deps.map(f.timestamp), cur.sampleRate);
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
        this.deps.onTrack(this.audio);
      }
      let ticks: number;
      if (frames === 0 || this.aRate !== h.sampleRate) {
        if (ms < 0) ms = this.deps.map(f.timestamp);
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
    this.units++;
    this.deps.onUnit(u);
  }
}
