/**
 * FLV muxing shared by the flv-out (live players) and recorder (files) plugins.
 *
 * The muxer turns TrackInfo updates and AccessUnits into FLV tags, in two shapes:
 * - `push`: tags ({type, timestamp, body, keyframe}) whose body is written once, into a buffer with room for the
 *   11-byte tag header before it and the 4-byte PreviousTagSize after it, so `serializeTag` frames it for a file
 *   without copying the payload again (the recorder);
 * - `pushWire`: the unit's tags framed for the wire, where large NAL units are ranges of the unit's own payload
 *   instead of copies (flv-out: the bus keeps a unit and its FLV form for as long as the GOP lives, so a copy
 *   would double the memory a GOP holds).
 *
 * Codecs: H.264 as classic AVC tags (codec id 7); H.265 as Enhanced FLV (`hvc1`), which ffmpeg before 6.1
 * cannot read; G.711A/U (SoundFormat 7/8) and AAC (10). Other audio codecs are not representable in FLV:
 * their units are skipped and counted.
 */
import type { AccessUnit, AudioCodec, AudioTrackInfo, TrackInfo, VideoCodec, VideoTrackInfo } from '../media';
import { BufferSlab } from '../buffer-slab';
import { h264NalType, h265NalType, splitAnnexB } from './annexb';
import { buildAvcC, parseH264Sps } from './h264';
import { buildHvcC, parseH265Sps } from './h265';

/** One FLV tag: its type, timestamp (ms) and body (what follows the 11-byte tag header). */
export interface FlvTag {
  type: 8 | 9 | 18;
  timestamp: number;
  body: Buffer;
  keyframe: boolean;
}

export const FLV_TAG_AUDIO = 8;
export const FLV_TAG_VIDEO = 9;
export const FLV_TAG_SCRIPT = 18;

const TAG_HEADER_SIZE = 11;
const PREV_SIZE_SIZE = 4;

/** FLV file header (9 bytes) followed by PreviousTagSize0 (4 zero bytes). */
export function flvFileHeader(hasVideo: boolean, hasAudio: boolean): Buffer {
  const b = Buffer.from([0x46, 0x4c, 0x56, 0x01, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00]);
  b[4] = (hasAudio ? 0x04 : 0) | (hasVideo ? 0x01 : 0);
  return b;
}

/** Bodies the muxer allocated with header/trailer room around them, so they can be framed in place. */
const framedBodies = new WeakMap<Buffer, Buffer>();

function allocBody(len: number): Buffer {
  const framed = Buffer.allocUnsafe(TAG_HEADER_SIZE + len + PREV_SIZE_SIZE);
  const body = framed.subarray(TAG_HEADER_SIZE, TAG_HEADER_SIZE + len);
  framedBodies.set(body, framed);
  return body;
}

/**
 * Frame bodies of one muxer, carved with room for header and trailer from its own slab (see BufferSlab for why
 * per stream). Config tags, kept for as long as the stream lives, use allocBody instead.
 */
class BodySlab {
  private readonly slab = new BufferSlab();

  allocBody(len: number): Buffer {
    const framed = this.slab.take(TAG_HEADER_SIZE + len + PREV_SIZE_SIZE);
    const body = framed.subarray(TAG_HEADER_SIZE, TAG_HEADER_SIZE + len);
    framedBodies.set(body, framed);
    return body;
  }
}

function writeTagHeader(out: Buffer, at: number, type: number, dataSize: number, timestamp: number): void {
  if (dataSize > 0xffffff) throw new RangeError(`FLV tag body of ${dataSize} bytes exceeds the 24-bit DataSize field`);
  const ts = timestamp >>> 0;
  out[at] = type;
  out.writeUIntBE(dataSize, at + 1, 3);
  out.writeUIntBE(ts & 0xffffff, at + 4, 3);
  out[at + 7] = (ts >>> 24) & 0xff; // TimestampExtended
  out.writeUIntBE(0, at + 8, 3); // StreamID
}

/** The 11-byte tag header alone, for callers that write header, body and trailer as separate chunks. */
export function flvTagHeader(tag: FlvTag): Buffer {
  const h = Buffer.allocUnsafe(TAG_HEADER_SIZE);
  writeTagHeader(h, 0, tag.type, tag.body.length, tag.timestamp);
  return h;
}

/** The 4-byte PreviousTagSize that follows a tag. */
export function flvPrevTagSize(tag: FlvTag): Buffer {
  const b = Buffer.allocUnsafe(PREV_SIZE_SIZE);
  b.writeUInt32BE(TAG_HEADER_SIZE + tag.body.length, 0);
  return b;
}

/**
 * A tag as file bytes: 11-byte header, body, 4-byte PreviousTagSize.
 * The first serialisation of a body made by FlvMuxer fills the room reserved around it and returns a view over
 * the same memory (no copy). Later serialisations of that body (e.g. configTags() for a new file) and bodies
 * from elsewhere are copied once, so a buffer already handed to a pending write is never rewritten.
 */
export function serializeTag(tag: FlvTag): Buffer {
  const len = tag.body.length;
  const framed = framedBodies.get(tag.body);
  if (framed) framedBodies.delete(tag.body);
  const out = framed ?? Buffer.allocUnsafe(TAG_HEADER_SIZE + len + PREV_SIZE_SIZE);
  writeTagHeader(out, 0, tag.type, len, tag.timestamp);
  if (!framed) tag.body.copy(out, TAG_HEADER_SIZE);
  out.writeUInt32BE(TAG_HEADER_SIZE + len, TAG_HEADER_SIZE + len);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// AMF0 (only what onMetaData needs)

export type AmfValue = number | boolean | string;

function amfString(s: string): Buffer {
  const b = Buffer.from(s, 'utf8');
  const h = Buffer.allocUnsafe(2);
  h.writeUInt16BE(b.length, 0);
  return Buffer.concat([h, b]);
}

function amfValue(v: AmfValue): Buffer {
  if (typeof v === 'number') {
    const b = Buffer.allocUnsafe(9);
    b[0] = 0x00;
    b.writeDoubleBE(v, 1);
    return b;
  }
  if (typeof v === 'boolean') return Buffer.from([0x01, v ? 1 : 0]);
  return Buffer.concat([Buffer.from([0x02]), amfString(v)]);
}

/** AMF0 "onMetaData" followed by an ECMA array of the given properties. */
export function encodeOnMetaData(props: Record<string, AmfValue>): Buffer {
  const entries = Object.entries(props);
  const count = Buffer.allocUnsafe(5);
  count[0] = 0x08;
  count.writeUInt32BE(entries.length, 1);
  const parts: Buffer[] = [amfValue('onMetaData'), count];
  for (const [k, v] of entries) parts.push(amfString(k), amfValue(v));
  parts.push(Buffer.from([0x00, 0x00, 0x09]));
  const total = parts.reduce((n, p) => n + p.length, 0);
  const body = allocBody(total);
  let at = 0;
  for (const p of parts) at += p.copy(body, at);
  return body;
}

// ---------------------------------------------------------------------------------------------------------------
// Muxer

/** FLV SoundFormat and flags byte for codecs FLV can carry (AAC's byte is fixed at 0xAF by the spec). */
function audioFlagsByte(codec: AudioCodec, channels: number, sampleRate: number): number | undefined {
  const stereo = channels >= 2 ? 1 : 0;
  // FLV has no rate field for G.711: readers assume 8 kHz, so other rates would play at the wrong speed.
  if ((codec === 'g711a' || codec === 'g711u') && sampleRate !== 8000) return undefined;
  // G.711: SoundRate "special" (0) and 16-bit size flag with the mono/stereo bit, as ffmpeg's FLV muxer writes them.
  if (codec === 'g711a') return (7 << 4) | (1 << 1) | stereo;
  if (codec === 'g711u') return (8 << 4) | (1 << 1) | stereo;
  if (codec === 'aac') return 0xaf;
  return undefined;
}

const ENHANCED_HEVC_FOURCC = Buffer.from('hvc1', 'ascii');
/** 'hvc1' as a number, the Enhanced RTMP way of naming the codec in onMetaData's videocodecid */
const HVC1_CODEC_ID = ENHANCED_HEVC_FOURCC.readUInt32BE(0);
const AAC_SAMPLE_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

function sameBuf(a: Buffer | undefined, b: Buffer | undefined): boolean {
  if (!a || !b) return a === b;
  return a.length === b.length && a.equals(b);
}

interface VideoState {
  codec: VideoCodec;
  sps?: Buffer;
  pps?: Buffer;
  vps?: Buffer;
  width?: number;
  height?: number;
  /** the track info gave the size; otherwise it comes from the SPS */
  sizeGiven?: boolean;
  frameRate?: number;
  /** the parameter sets changed since the last sequence header was emitted */
  configDirty: boolean;
  seqHeader?: FlvTag;
  started: boolean;
  lastTs: number;
}

interface AudioState {
  codec: AudioCodec;
  sampleRate: number;
  channels: number;
  config?: Buffer;
  configDirty: boolean;
  seqHeader?: FlvTag;
  lastTs: number;
}

export interface FlvMuxerStats {
  videoTags: number;
  audioTags: number;
  scriptTags: number;
  /** video units dropped: before parameter sets were known, before the first keyframe, or unparseable */
  droppedVideo: number;
  /** audio units of a codec FLV cannot carry (G.726, ADPCM, ...) or not chosen (audioCodecs), or AAC without a config */
  skippedAudio: number;
  /** which audio codecs were skipped */
  skippedAudioCodecs: AudioCodec[];
  /** units whose dts went backwards and were clamped to the previous tag's timestamp */
  clampedTimestamps: number;
}

export interface FlvMuxerOptions {
  /**
   * Audio codecs to carry (default: every one FLV can: aac, g711a, g711u). Others are skipped and counted like
   * codecs FLV cannot carry, and leave no trace in the header flags or onMetaData. Browser players (mpegts.js,
   * flv.js) decode only AAC and MP3 and report an error for every G.711 tag.
   */
  audioCodecs?: readonly AudioCodec[];
  /** the onMetaData script tag's body for these properties (default: encodeOnMetaData, an AMF0 ECMA array) */
  metaBody?: (props: Record<string, AmfValue>) => Buffer;
}

/**
 * One unit's tags framed for the wire (`FlvMuxer.pushWire`). First the config tags that changed with this unit, each
 * a whole Buffer; then the media tag(s), laid out as `ranges` [from, to) taken in turn from `mem` (tag headers,
 * length fields, short NAL units, PreviousTagSize) and from `payload` (the unit's own large NAL units), starting
 * with `mem`. Ranges rather than Buffers, because a Buffer view is a heap object of its own and the bus keeps a
 * unit's form as long as the GOP: the views are made when written (`wireParts`), and die young.
 */
export interface WireUnit {
  readonly config: Buffer[] | undefined;
  readonly configBytes: number;
  readonly mem: Buffer;
  readonly payload: Buffer;
  readonly ranges: number[];
  readonly mediaBytes: number;
  /** 9 video, 8 audio */
  readonly mediaType: 8 | 9;
  /** media tags in it (ADTS input may hold several AAC frames) */
  readonly mediaTags: number;
  /** the first media tag's timestamp */
  readonly timestamp: number;
  /** a video key frame */
  readonly keyframe: boolean;
}

/** The media part of a WireUnit as Buffers, in order, each handed to `write` (views made now, not kept). */
export function wireParts(w: Pick<WireUnit, 'mem' | 'payload' | 'ranges'>, write: (b: Buffer) => void): void {
  const r = w.ranges;
  for (let i = 0; i < r.length; i += 2) write(((i & 2) === 0 ? w.mem : w.payload).subarray(r[i], r[i + 1]));
}

/**
 * NAL units at least this long are referenced by `pushWire`, shorter ones (SEI, tiny slices) copied. A reference
 * costs each player a write more; a copy stays as long as the GOP. At 200 streams of 1 Mbit/s (test/bench
 * ingest-flv), copying every NAL unit held ~40 MB more RSS than referencing those from 128 bytes, and took more CPU.
 */
export const WIRE_VIEW_MIN = 128;

/** What pushVideo works out before the body is laid out (one instance per muxer, reused). */
interface VideoPlan {
  out: FlvTag[];
  ts: number;
  cts: number;
  key: boolean;
  hevc: boolean;
  kept: Buffer[];
  keptBytes: number;
}

/**
 * Turns TrackInfo and AccessUnits into FLV tags. Config tags (onMetaData, sequence headers) are emitted lazily,
 * in front of the next frame that needs them, and again whenever they change.
 */
export class FlvMuxer {
  private video?: VideoState;
  private audio?: AudioState;
  private metaDirty = false;
  private readonly counters = {
    videoTags: 0, audioTags: 0, scriptTags: 0, droppedVideo: 0, skippedAudio: 0, clampedTimestamps: 0,
  };
  private readonly skippedCodecs = new Set<AudioCodec>();
  private readonly slab = new BodySlab();
  /**
   * pushWire's small parts (headers, length fields, short NAL units): a few dozen bytes a frame, kept as long as the
   * GOP, so small chunks: 32 KiB ones would each be pinned for seconds by a few live slices.
   */
  private readonly wireSlab = new BufferSlab(4096);
  private readonly audioCodecs: ReadonlySet<AudioCodec> | undefined;
  private readonly metaBody: (props: Record<string, AmfValue>) => Buffer;
  private readonly plan: VideoPlan = { out: [], ts: 0, cts: 0, key: false, hevc: false, kept: [], keptBytes: 0 };

  constructor(opts: FlvMuxerOptions = {}) {
    this.audioCodecs = opts.audioCodecs ? new Set(opts.audioCodecs) : undefined;
    this.metaBody = opts.metaBody ?? encodeOnMetaData;
  }

  get stats(): FlvMuxerStats {
    return { ...this.counters, skippedAudioCodecs: [...this.skippedCodecs] };
  }

  /** whether a video / an FLV-representable audio track is known (for the file header flags) */
  get hasVideo(): boolean { return this.video !== undefined; }
  get hasAudio(): boolean { return this.audio !== undefined && this.flagsOf(this.audio) !== undefined; }

  /** the audio tag's first byte for this track, or undefined when it is not carried */
  private flagsOf(a: AudioState): number | undefined {
    if (this.audioCodecs && !this.audioCodecs.has(a.codec)) return undefined;
    return audioFlagsByte(a.codec, a.channels, a.sampleRate);
  }

  setTrack(info: TrackInfo): void {
    if (info.kind === 'video') this.setVideo(info);
    else this.setAudio(info);
  }

  /** Tags for one access unit, preceded by any config tags that changed. Empty when the unit is dropped. */
  push(au: AccessUnit): FlvTag[] {
    if (au.kind !== 'video') return this.pushAudio(au);
    const p = this.planVideo(au);
    if (p === undefined) return [];
    const body = this.slab.allocBody(videoPrefixSize(p) + p.keptBytes);
    let at = writeVideoPrefix(body, 0, p);
    for (const nal of p.kept) {
      body.writeUInt32BE(nal.length, at);
      at += 4 + nal.copy(body, at + 4);
    }
    const out = p.out;
    out.push({ type: FLV_TAG_VIDEO, timestamp: p.ts, body, keyframe: p.key });
    return out;
  }

  /**
   * The same tags as `push`, framed for the wire, or undefined when the unit is dropped. NAL units of
   * WIRE_VIEW_MIN bytes or more are referenced from the unit's payload, which the bus guarantees is never changed.
   */
  pushWire(au: AccessUnit): WireUnit | undefined {
    if (au.kind !== 'video') return wireOfTags(this.pushAudio(au), au.payload);
    const p = this.planVideo(au);
    if (p === undefined) return undefined;
    const prefix = videoPrefixSize(p);
    const bodyLen = prefix + p.keptBytes;
    if (bodyLen > 0xffffff) throw new RangeError(`FLV tag body of ${bodyLen} bytes exceeds the 24-bit DataSize field`);
    let small = TAG_HEADER_SIZE + prefix + PREV_SIZE_SIZE;
    let referenced = 0;
    for (const nal of p.kept) {
      if (nal.length >= WIRE_VIEW_MIN) referenced++;
      else small += nal.length;
      small += 4;
    }
    const mem = this.wireSlab.take(small);
    writeTagHeader(mem, 0, FLV_TAG_VIDEO, bodyLen, p.ts);
    let at = writeVideoPrefix(mem, TAG_HEADER_SIZE, p);
    // sized once: an array grown by push keeps spare room, and this one lives as long as the GOP
    const ranges = new Array<number>(2 + 4 * referenced);
    ranges[0] = 0;
    let r = 1;
    const base = au.payload.byteOffset;
    for (const nal of p.kept) {
      mem.writeUInt32BE(nal.length, at);
      at += 4;
      if (nal.length >= WIRE_VIEW_MIN) {
        // (splitAnnexB's NAL units are views of the payload: their place in it is their offset from its start)
        const from = nal.byteOffset - base;
        ranges[r++] = at;
        ranges[r++] = from;
        ranges[r++] = from + nal.length;
        ranges[r++] = at;
      } else {
        at += nal.copy(mem, at);
      }
    }
    mem.writeUInt32BE(TAG_HEADER_SIZE + bodyLen, at);
    ranges[r] = at + PREV_SIZE_SIZE;
    const config = configOf(p.out);
    return {
      config, configBytes: bytesOf(config), mem, payload: au.payload, ranges, mediaBytes: TAG_HEADER_SIZE + bodyLen + PREV_SIZE_SIZE,
      mediaType: FLV_TAG_VIDEO, mediaTags: 1, timestamp: p.ts, keyframe: p.key,
    };
  }

  /**
   * The current onMetaData and sequence headers, for a consumer that starts mid-stream (e.g. a new file).
   * Sequence headers get `timestamp`; onMetaData keeps 0 (see buildMeta).
   */
  configTags(timestamp = 0): FlvTag[] {
    const out: FlvTag[] = [];
    if (this.video || this.hasAudio) out.push(this.buildMeta());
    if (this.video?.seqHeader) out.push({ ...this.video.seqHeader, timestamp });
    if (this.audio?.seqHeader) out.push({ ...this.audio.seqHeader, timestamp });
    return out;
  }

  private setVideo(info: VideoTrackInfo): void {
    let v = this.video;
    if (!v || v.codec !== info.codec) {
      v = { codec: info.codec, configDirty: true, started: false, lastTs: v?.lastTs ?? 0 };
      this.video = v;
      this.metaDirty = true;
    }
    if (info.width !== undefined && info.height !== undefined) {
      if (info.width !== v.width || info.height !== v.height) this.metaDirty = true;
      v.width = info.width;
      v.height = info.height;
      v.sizeGiven = true;
    }
    if (info.frameRate !== undefined && info.frameRate !== v.frameRate) {
      v.frameRate = info.frameRate;
      this.metaDirty = true;
    }
    this.updateParams(v, info.sps, info.pps, info.vps);
  }

  private setAudio(info: AudioTrackInfo): void {
    const a = this.audio;
    if (!a || a.codec !== info.codec || a.sampleRate !== info.sampleRate || a.channels !== info.channels) {
      this.audio = {
        codec: info.codec, sampleRate: info.sampleRate, channels: info.channels,
        config: info.config, configDirty: true, lastTs: a?.lastTs ?? 0,
      };
      this.metaDirty = true;
    } else if (info.config && !sameBuf(info.config, a.config)) {
      a.config = info.config;
      a.configDirty = true;
    }
  }

  private updateParams(v: VideoState, sps?: Buffer, pps?: Buffer, vps?: Buffer): void {
    if (sps && !sameBuf(sps, v.sps)) { v.sps = sps; v.configDirty = true; }
    if (pps && !sameBuf(pps, v.pps)) { v.pps = pps; v.configDirty = true; }
    if (vps && !sameBuf(vps, v.vps)) { v.vps = vps; v.configDirty = true; }
  }

  private clampTs(state: { lastTs: number }, dts: number): number {
    let ts = Math.max(0, Math.round(dts));
    if (ts < state.lastTs) {
      ts = state.lastTs;
      this.counters.clampedTimestamps++;
    }
    state.lastTs = ts;
    return ts;
  }

  /** Everything about a video unit but its body: parameter sets, config tags, timestamps, the NAL units kept. */
  private planVideo(au: AccessUnit): VideoPlan | undefined {
    const codec = au.codec;
    if (codec !== 'h264' && codec !== 'h265') {
      this.counters.droppedVideo++;
      return undefined;
    }
    let v = this.video;
    if (!v || v.codec !== codec) {
      this.setVideo({ kind: 'video', codec });
      v = this.video!;
    }
    const hevc = codec === 'h265';
    const nals = splitAnnexB(au.payload);
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let idr = false;
    let sps: Buffer | undefined, pps: Buffer | undefined, vps: Buffer | undefined;
    for (const nal of nals) {
      if (nal.length === 0) continue;
      if (hevc) {
        const t = h265NalType(nal);
        if (t === 32) { vps = nal; continue; }
        if (t === 33) { sps = nal; continue; }
        if (t === 34) { pps = nal; continue; }
        if (t === 35) continue; // AUD
        if (t >= 16 && t <= 23) idr = true; // IRAP
      } else {
        const t = h264NalType(nal);
        if (t === 7) { sps = nal; continue; }
        if (t === 8) { pps = nal; continue; }
        if (t === 9) continue; // AUD
        if (t === 5) idr = true;
      }
      kept.push(nal);
      keptBytes += 4 + nal.length;
    }
    // Parameter sets are copied: the payload they came from may be a reused network buffer.
    this.updateParams(v, sps && Buffer.from(sps), pps && Buffer.from(pps), vps && Buffer.from(vps));
    const ready = hevc ? !!(v.vps && v.sps && v.pps) : !!(v.sps && v.pps);
    const key = au.keyframe || idr;
    if (!ready || (!v.started && !key) || kept.length === 0) {
      if (kept.length > 0) this.counters.droppedVideo++;
      return undefined;
    }
    const ts = this.clampTs(v, au.dts);
    const out: FlvTag[] = [];
    if (v.configDirty) {
      let seq: FlvTag;
      try {
        seq = this.videoSeqHeader(v, ts);
      } catch {
        // An SPS we cannot parse would make every later frame undecodable too: drop until a good one arrives.
        v.sps = undefined;
        this.counters.droppedVideo++;
        return undefined;
      }
      v.configDirty = false;
      v.seqHeader = seq;
      this.sizeFromSps(v);
      this.emitMeta(out);
      out.push(seq);
    } else {
      this.emitMeta(out);
    }
    v.started = true;
    this.counters.videoTags++;
    const p = this.plan;
    p.out = out;
    p.ts = ts;
    p.cts = Math.max(-0x800000, Math.min(0x7fffff, Math.round(au.pts) - ts));
    p.key = key;
    p.hevc = hevc;
    p.kept = kept;
    p.keptBytes = keptBytes;
    return p;
  }

  /** onMetaData's width/height from the SPS (again on each new SPS) when the track info did not give them. */
  private sizeFromSps(v: VideoState): void {
    if (v.sizeGiven) return;
    try {
      const info = v.codec === 'h265' ? parseH265Sps(v.sps!) : parseH264Sps(v.sps!);
      if (info.width === v.width && info.height === v.height) return;
      v.width = info.width;
      v.height = info.height;
      this.metaDirty = true;
    } catch {
      // the size is only informative here; decoders read it from the sequence header
    }
  }

  private videoSeqHeader(v: VideoState, ts: number): FlvTag {
    let body: Buffer;
    if (v.codec === 'h265') {
      const rec = buildHvcC(v.vps!, v.sps!, v.pps!);
      body = allocBody(5 + rec.length);
      body[0] = 0x80 | (1 << 4) | 0; // IsExHeader | key frame | SequenceStart
      ENHANCED_HEVC_FOURCC.copy(body, 1);
      rec.copy(body, 5);
    } else {
      const rec = buildAvcC(v.sps!, v.pps!);
      body = allocBody(5 + rec.length);
      body[0] = 0x17;
      body[1] = 0; // AVC sequence header
      body.writeUIntBE(0, 2, 3);
      rec.copy(body, 5);
    }
    return { type: FLV_TAG_VIDEO, timestamp: ts, body, keyframe: false };
  }

  private pushAudio(au: AccessUnit): FlvTag[] {
    const codec = au.codec as AudioCodec;
    let a = this.audio;
    if (!a || a.codec !== codec) {
      this.setAudio({ kind: 'audio', codec, sampleRate: codec === 'aac' ? 0 : 8000, channels: 1 });
      a = this.audio!;
    }
    const flags = this.flagsOf(a);
    if (flags === undefined) return this.skipAudio(codec);
    if (codec === 'aac') return this.pushAac(a, au);
    if (au.payload.length === 0) return [];
    const ts = this.clampTs(a, au.dts);
    const out: FlvTag[] = [];
    this.emitMeta(out);
    const body = this.slab.allocBody(1 + au.payload.length);
    body[0] = flags;
    au.payload.copy(body, 1);
    out.push({ type: FLV_TAG_AUDIO, timestamp: ts, body, keyframe: false });
    this.counters.audioTags++;
    return out;
  }

  private skipAudio(codec: AudioCodec): FlvTag[] {
    this.counters.skippedAudio++;
    this.skippedCodecs.add(codec);
    return [];
  }

  /** AAC as raw frames, or ADTS (one or more frames), whose headers are stripped and give the config if none was set. */
  private pushAac(a: AudioState, au: AccessUnit): FlvTag[] {
    const p = au.payload;
    const frames: Buffer[] = [];
    if (p.length >= 7 && p[0] === 0xff && (p[1] & 0xf6) === 0xf0) {
      let at = 0;
      while (at + 7 <= p.length && p[at] === 0xff && (p[at + 1] & 0xf6) === 0xf0) {
        const headerLen = p[at + 1] & 0x01 ? 7 : 9;
        const frameLen = ((p[at + 3] & 0x03) << 11) | (p[at + 4] << 3) | (p[at + 5] >> 5);
        if (frameLen < headerLen || at + frameLen > p.length) break;
        if (!a.config) {
          const objectType = ((p[at + 2] >> 6) & 3) + 1;
          const freqIdx = (p[at + 2] >> 2) & 0x0f;
          const chanCfg = ((p[at + 2] & 1) << 2) | (p[at + 3] >> 6);
          const asc = Buffer.allocUnsafe(2);
          asc.writeUInt16BE((objectType << 11) | (freqIdx << 7) | (chanCfg << 3), 0);
          a.config = asc;
          a.configDirty = true;
          if (!a.sampleRate) a.sampleRate = AAC_SAMPLE_RATES[freqIdx] ?? 0;
          if (chanCfg) a.channels = chanCfg;
          this.metaDirty = true;
        }
        frames.push(p.subarray(at + headerLen, at + frameLen));
        at += frameLen;
      }
    } else if (p.length > 0) {
      frames.push(p);
    }
    if (frames.length === 0) return [];
    if (!a.config) return this.skipAudio('aac');
    const out: FlvTag[] = [];
    const frameMs = a.sampleRate > 0 ? (1024 * 1000) / a.sampleRate : 0;
    for (let i = 0; i < frames.length; i++) {
      const ts = this.clampTs(a, au.dts + i * frameMs);
      if (i === 0) this.emitMeta(out);
      if (a.configDirty) {
        const seq = allocBody(2 + a.config.length);
        seq[0] = 0xaf;
        seq[1] = 0; // AAC sequence header
        a.config.copy(seq, 2);
        a.seqHeader = { type: FLV_TAG_AUDIO, timestamp: ts, body: seq, keyframe: false };
        a.configDirty = false;
        out.push(a.seqHeader);
      }
      const body = this.slab.allocBody(2 + frames[i].length);
      body[0] = 0xaf;
      body[1] = 1; // AAC raw
      frames[i].copy(body, 2);
      out.push({ type: FLV_TAG_AUDIO, timestamp: ts, body, keyframe: false });
      this.counters.audioTags++;
    }
    return out;
  }

  private emitMeta(out: FlvTag[]): void {
    if (!this.metaDirty) return;
    this.metaDirty = false;
    out.push(this.buildMeta());
    this.counters.scriptTags++;
  }

  /**
   * onMetaData always carries timestamp 0: ffmpeg's FLV reader takes a script tag with any other timestamp for
   * subtitle data (a 'text' stream) instead of metadata.
   */
  private buildMeta(): FlvTag {
    const props: Record<string, AmfValue> = {};
    const v = this.video;
    if (v) {
      if (v.width) props.width = v.width;
      if (v.height) props.height = v.height;
      if (v.frameRate) props.framerate = v.frameRate;
      props.videocodecid = v.codec === 'h265' ? HVC1_CODEC_ID : 7;
    }
    const a = this.audio;
    const aFlags = a ? this.flagsOf(a) : undefined;
    if (a && aFlags !== undefined) {
      props.audiocodecid = aFlags >> 4;
      if (a.sampleRate) props.audiosamplerate = a.sampleRate;
      props.audiosamplesize = 16;
      props.stereo = a.channels >= 2;
    }
    props.encoder = 'jt1078-gateway';
    return { type: FLV_TAG_SCRIPT, timestamp: 0, body: this.metaBody(props), keyframe: false };
  }
}

/** Bytes of a video tag body before its NAL units: the AVC header, or the Enhanced one with its FourCC (and CTS). */
function videoPrefixSize(p: VideoPlan): number {
  return p.hevc && p.cts !== 0 ? 8 : 5;
}

function writeVideoPrefix(b: Buffer, at: number, p: VideoPlan): number {
  const frameType = p.key ? 1 : 2;
  if (p.hevc) {
    const withCts = p.cts !== 0;
    b[at] = 0x80 | (frameType << 4) | (withCts ? 1 : 3); // IsExHeader | FrameType | CodedFrames(X)
    ENHANCED_HEVC_FOURCC.copy(b, at + 1);
    if (!withCts) return at + 5;
    b.writeIntBE(p.cts, at + 5, 3);
    return at + 8;
  }
  b[at] = (frameType << 4) | 7;
  b[at + 1] = 1; // AVC NALU
  b.writeIntBE(p.cts, at + 2, 3);
  return at + 5;
}

/** Whether a muxer tag is configuration (onMetaData, a sequence header) rather than media. */
function isConfigTag(t: FlvTag): boolean {
  if (t.type === FLV_TAG_SCRIPT) return true;
  const b = t.body;
  if (t.type === FLV_TAG_AUDIO) return b[0] >> 4 === 10 && b[1] === 0;
  return b[0] & 0x80 ? (b[0] & 0x0f) === 0 : b[1] === 0;
}

/** The config tags, framed whole; undefined for none. */
function configOf(tags: FlvTag[]): Buffer[] | undefined {
  return tags.length === 0 ? undefined : tags.map(serializeTag);
}

function bytesOf(bufs: Buffer[] | undefined): number {
  let n = 0;
  if (bufs) for (const b of bufs) n += b.length;
  return n;
}

/** Audio tags (config ones lead, as the muxer emits them) as a WireUnit: small frames, copied whole. */
function wireOfTags(tags: FlvTag[], payload: Buffer): WireUnit | undefined {
  let c = 0;
  while (c < tags.length && isConfigTag(tags[c])) c++;
  if (c === tags.length) return undefined;
  const config = configOf(tags.slice(0, c));
  // (several media tags only from ADTS input, which the bus's units do not carry: one copy is no matter then)
  const mem = tags.length - c === 1 ? serializeTag(tags[c]) : Buffer.concat(tags.slice(c).map(serializeTag));
  return {
    config, configBytes: bytesOf(config), mem, payload, ranges: [0, mem.length], mediaBytes: mem.length,
    mediaType: tags[c].type === FLV_TAG_VIDEO ? FLV_TAG_VIDEO : FLV_TAG_AUDIO, mediaTags: tags.length - c, timestamp: tags[c].timestamp, keyframe: false,
  };
}
