/**
 * What an RTMP encoder publishes, as bus units: RTMP audio and video messages are FLV tag bodies.
 *
 * - Video: H.264 (codec id 7) and H.265 as Enhanced RTMP (`hvc1`, E-RTMP v1/v2 packet types SequenceStart,
 *   CodedFrames with a composition time, CodedFramesX without) or as codec id 12 (the pre-E-RTMP HEVC extension some
 *   Chinese encoders send). The sequence header (avcC / hvcC) gives the parameter sets, which the track carries;
 *   frames come as NAL units with length prefixes and become Annex-B, the bus's form, their NAL index written as
 *   they are laid out (no search of the bytes again).
 * - Audio: AAC (sequence header: AudioSpecificConfig, then raw frames) and G.711 A-law / µ-law (8 kHz mono). Other
 *   sound formats are left out and reported once.
 * - Timestamps: the message's (ms); video pts = dts + composition time.
 *
 * A malformed body is a BadMedia error: the caller counts it and drops the message (or the publisher).
 */
import { audioUnit, videoUnit, type AccessUnit, type AudioTrackInfo, type TrackInfo, type VideoTrackInfo } from '../../../plugin-sdk';
import { parseH264Sps } from '../../../plugin-sdk/formats';
import { parseH265Sps } from '../../../plugin-sdk/formats';
import { NAL_ARENA, nalKindFlags } from '../../../plugin-sdk/formats';

export class BadMedia extends Error {}

const START_CODE = Buffer.from([0, 0, 0, 1]);
const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];
const HVC1 = 0x68766331; // 'hvc1'

export interface UnitSink {
  track(info: TrackInfo): void;
  unit(u: AccessUnit): void;
  /** a sound format or video codec the bus cannot carry (once per codec) */
  unsupported(what: string): void;
}

interface VideoConfig {
  codec: 'h264' | 'h265';
  /** bytes of each NAL unit's length prefix */
  lengthSize: number;
  /** VPS (H.265), SPS and PPS as Annex-B: what tells a new configuration from the same one sent again */
  paramSets: Buffer;
}

export class FlvUnits {
  private video: VideoConfig | undefined;
  private aac: AudioTrackInfo | undefined;
  private g711: AudioTrackInfo | undefined;
  private readonly reported = new Set<string>();

  constructor(
    private readonly out: UnitSink,
    private readonly maxFrameBytes: number,
  ) {}

  /** one RTMP audio (8) or video (9) message */
  message(type: number, ts: number, body: Buffer): void {
    if (body.length === 0) return;
    if (type === 9) this.videoTag(ts, body);
    else if (type === 8) this.audioTag(ts, body);
  }

  private videoTag(ts: number, b: Buffer): void {
    const frameType = (b[0] >> 4) & 0x07;
    if (b[0] & 0x80) {
      // Enhanced RTMP: [1|frameType(3)|packetType(4)] fourCC, then the packet
      if (b.length < 5) throw new BadMedia('a short Enhanced RTMP video tag');
      const packetType = b[0] & 0x0f;
      if (b.readUInt32BE(1) !== HVC1) return this.report(`video ${b.subarray(1, 5).toString('latin1')}`);
      if (packetType === 0) return this.config('h265', b.subarray(5));
      if (packetType === 1) return this.frame(ts, b.length >= 8 ? b.readIntBE(5, 3) : 0, frameType === 1, b.subarray(8));
      if (packetType === 3) return this.frame(ts, 0, frameType === 1, b.subarray(5));
      return; // SequenceEnd, metadata, multitrack: nothing for the bus
    }
    const codecId = b[0] & 0x0f;
    if (codecId !== 7 && codecId !== 12) return this.report(`video codec id ${codecId}`);
    if (b.length < 5) throw new BadMedia('a short video tag');
    if (b[1] === 0) return this.config(codecId === 7 ? 'h264' : 'h265', b.subarray(5));
    if (b[1] === 1) this.frame(ts, b.readIntBE(2, 3), frameType === 1, b.subarray(5));
  }

  private config(codec: 'h264' | 'h265', rec: Buffer): void {
    const sets = codec === 'h264' ? avcCSets(rec) : hvcCSets(rec);
    const paramSets = Buffer.concat(sets.all.flatMap((n) => [START_CODE, n]));
    if (this.video?.codec === codec && this.video.paramSets.equals(paramSets)) return;
    this.video = { codec, lengthSize: sets.lengthSize, paramSets };
    const info: VideoTrackInfo = { kind: 'video', codec, sps: Buffer.from(sets.sps), pps: Buffer.from(sets.pps) };
    if (sets.vps) info.vps = Buffer.from(sets.vps);
    try {
      if (codec === 'h264') {
        const s = parseH264Sps(sets.sps);
        Object.assign(info, { width: s.width, height: s.height, profile: s.profile, profileIdc: s.profileIdc, level: s.levelIdc, frameRate: s.frameRate });
      } else {
        const s = parseH265Sps(sets.sps);
        Object.assign(info, { width: s.width, height: s.height, profile: s.profile, profileIdc: s.generalProfileIdc, level: s.generalLevelIdc });
      }
    } catch {
      // an SPS we cannot read still goes to players, which may
    }
    this.out.track(info);
  }

  private frame(ts: number, cts: number, key: boolean, data: Buffer): void {
    const v = this.video;
    if (!v) return; // nothing a reader could decode before the sequence header
    const nals: Buffer[] = [];
    let size = 0;
    for (let at = 0; at < data.length;) {
      if (at + v.lengthSize > data.length) throw new BadMedia('a NAL unit length past the frame');
      const len = data.readUIntBE(at, v.lengthSize);
      at += v.lengthSize;
      if (len === 0) continue;
      if (at + len > data.length) throw new BadMedia('a NAL unit past the frame');
      nals.push(data.subarray(at, at + len));
      size += 4 + len;
      at += len;
    }
    if (nals.length === 0) return;
    if (size > this.maxFrameBytes) throw new BadMedia(`a video frame of ${size} bytes`);
    const payload = Buffer.allocUnsafe(size);
    let p = 0;
    NAL_ARENA.begin();
    for (const n of nals) {
      p += START_CODE.copy(payload, p);
      NAL_ARENA.add(p, p + n.length, nalKindFlags(v.codec, n[0]));
      p += n.copy(payload, p);
    }
    const nalsAt = NAL_ARENA.finish(size);
    this.out.unit(
      videoUnit({
        codec: v.codec,
        dts: ts,
        pts: ts + Math.max(0, cts),
        keyframe: key,
        payload,
        receivedAt: performance.now(),
        nals: NAL_ARENA.mem,
        nalsAt,
      }),
    );
  }

  private audioTag(ts: number, b: Buffer): void {
    const format = b[0] >> 4;
    if (format === 10) {
      if (b.length < 2) throw new BadMedia('a short AAC tag');
      if (b[1] === 0) return this.aacConfig(b.subarray(2));
      const a = this.aac;
      if (!a || b.length === 2) return;
      this.out.unit(
        audioUnit({
          codec: 'aac',
          dts: ts,
          timescale: a.sampleRate,
          duration: a.frameSamples,
          payload: Buffer.from(b.subarray(2)),
          receivedAt: performance.now(),
        }),
      );
      return;
    }
    if (format === 7 || format === 8) {
      const codec = format === 7 ? 'g711a' : 'g711u';
      if (this.g711?.codec !== codec) {
        this.g711 = { kind: 'audio', codec, sampleRate: 8000, channels: 1, bitsPerSample: 8 };
        this.aac = undefined;
        this.out.track(this.g711);
      }
      const payload = Buffer.from(b.subarray(1));
      this.out.unit(audioUnit({ codec, dts: ts, timescale: 8000, duration: payload.length, payload, receivedAt: performance.now() }));
      return;
    }
    this.report(`sound format ${format}`);
  }

  private aacConfig(asc: Buffer): void {
    if (asc.length < 2) throw new BadMedia('a short AudioSpecificConfig');
    const aot = asc[0] >> 3;
    const fi = ((asc[0] & 0x07) << 1) | (asc[1] >> 7);
    const channels = (asc[1] >> 3) & 0x0f;
    const sampleRate = AAC_RATES[fi];
    if (aot === 0 || aot === 31 || sampleRate === undefined)
      throw new BadMedia(`an AudioSpecificConfig the gateway does not read (object type ${aot}, rate index ${fi})`);
    if (this.aac?.config?.equals(asc)) return;
    const frameSamples = aot <= 4 && (asc[1] & 0x04) !== 0 ? 960 : 1024;
    this.aac = { kind: 'audio', codec: 'aac', sampleRate, channels: channels || 2, config: Buffer.from(asc), frameSamples };
    this.g711 = undefined;
    this.out.track(this.aac);
  }

  private report(what: string): void {
    if (this.reported.has(what)) return;
    this.reported.add(what);
    this.out.unsupported(what);
  }
}

interface ParamSets {
  lengthSize: number;
  vps?: Buffer;
  sps: Buffer;
  pps: Buffer;
  all: Buffer[];
}

/** AVCDecoderConfigurationRecord (ISO 14496-15 5.3.3.1) */
function avcCSets(r: Buffer): ParamSets {
  if (r.length < 7 || r[0] !== 1) throw new BadMedia('an AVC sequence header that is no AVCDecoderConfigurationRecord');
  const lengthSize = (r[4] & 0x03) + 1;
  const all: Buffer[] = [];
  let at = 5;
  const take = (count: number): Buffer[] => {
    const out: Buffer[] = [];
    for (let i = 0; i < count; i++) {
      if (at + 2 > r.length) throw new BadMedia('a parameter set past the AVC sequence header');
      const len = r.readUInt16BE(at);
      if (at + 2 + len > r.length) throw new BadMedia('a parameter set past the AVC sequence header');
      out.push(r.subarray(at + 2, at + 2 + len));
      at += 2 + len;
    }
    return out;
  };
  const sps = take(r[at++] & 0x1f);
  if (at >= r.length) throw new BadMedia('an AVC sequence header without PPS');
  const pps = take(r[at++]);
  if (!sps.length || !pps.length) throw new BadMedia('an AVC sequence header without SPS or PPS');
  all.push(...sps, ...pps);
  return { lengthSize, sps: sps[0], pps: pps[0], all };
}

/** HEVCDecoderConfigurationRecord (ISO 14496-15 8.3.3.1): 22 bytes, then arrays of NAL units by type */
function hvcCSets(r: Buffer): ParamSets {
  if (r.length < 23) throw new BadMedia('an HEVC sequence header that is no HEVCDecoderConfigurationRecord');
  const lengthSize = (r[21] & 0x03) + 1;
  const arrays = r[22];
  const byType = new Map<number, Buffer>();
  const all: Buffer[] = [];
  let at = 23;
  for (let i = 0; i < arrays; i++) {
    if (at + 3 > r.length) throw new BadMedia('an array past the HEVC sequence header');
    const type = r[at] & 0x3f;
    const n = r.readUInt16BE(at + 1);
    at += 3;
    for (let k = 0; k < n; k++) {
      if (at + 2 > r.length) throw new BadMedia('a NAL unit past the HEVC sequence header');
      const len = r.readUInt16BE(at);
      if (at + 2 + len > r.length) throw new BadMedia('a NAL unit past the HEVC sequence header');
      const nal = r.subarray(at + 2, at + 2 + len);
      if (!byType.has(type)) byType.set(type, nal);
      if (type >= 32 && type <= 34) all.push(nal);
      at += 2 + len;
    }
  }
  const vps = byType.get(32);
  const sps = byType.get(33);
  const pps = byType.get(34);
  if (!vps || !sps || !pps) throw new BadMedia('an HEVC sequence header without VPS, SPS and PPS');
  return { lengthSize, vps, sps, pps, all };
}
