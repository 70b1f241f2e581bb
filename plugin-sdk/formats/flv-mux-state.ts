/**
 * What an FlvMuxer's video half (flv-video.ts) and audio half (flv-audio.ts) share: the per-track state, the
 * counters, timestamp clamping, and the onMetaData tag that describes both tracks. Internal to formats/flv.
 */
import type { AudioCodec, VideoCodec } from '../media';
import type { AmfValue } from './flv-amf';
import { NalRanges } from './annexb';
import { NalUnits } from './nal-index';
import { BodySlab, FLV_TAG_SCRIPT, type FlvTag } from './flv-tag';
import { Buffer } from 'node:buffer';

/** FLV SoundFormat and flags byte for codecs FLV can carry (AAC's byte is fixed at 0xAF by the spec). */
export function audioFlagsByte(codec: AudioCodec, channels: number, sampleRate: number): number | undefined {
  const stereo = channels >= 2 ? 1 : 0;
  // FLV has no rate field for G.711: readers assume 8 kHz, so other rates would play at the wrong speed.
  if ((codec === 'g711a' || codec === 'g711u') && sampleRate !== 8000) return undefined;
  // G.711: SoundRate "special" (0) and 16-bit size flag with the mono/stereo bit, as ffmpeg's FLV muxer writes them.
  if (codec === 'g711a') return (7 << 4) | (1 << 1) | stereo;
  if (codec === 'g711u') return (8 << 4) | (1 << 1) | stereo;
  if (codec === 'aac') return 0xaf;
  return undefined;
}

export const ENHANCED_HEVC_FOURCC = Buffer.from('hvc1', 'ascii');
/** 'hvc1' as a number, the Enhanced RTMP way of naming the codec in onMetaData's videocodecid */
const HVC1_CODEC_ID = ENHANCED_HEVC_FOURCC.readUInt32BE(0);

export function sameBuf(a: Buffer | undefined, b: Buffer | undefined): boolean {
  if (!a || !b) return a === b;
  return a.length === b.length && a.equals(b);
}

export interface VideoState {
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

export interface AudioState {
  codec: AudioCodec;
  sampleRate: number;
  channels: number;
  config?: Buffer;
  configDirty: boolean;
  seqHeader?: FlvTag;
  lastTs: number;
}

/** What pushVideo works out before the body is laid out (one instance per muxer, reused). */
export interface VideoPlan {
  /** config tags to send before the unit's own (none: undefined) */
  out: FlvTag[] | undefined;
  ts: number;
  cts: number;
  key: boolean;
  hevc: boolean;
  /**
   * the NAL units of the unit's payload the tag carries (not parameter sets or delimiters). The payload itself is not
   * kept here: a unit's payload is young and this plan old, so each store took the write barrier's slow path (perf at
   * 500 terminals: 0.9 % of the gateway's samples in planVideo's barriers); the muxer reads it from the unit.
   */
  readonly kept: NalRanges;
  keptBytes: number;
}

/** One FlvMuxer's state, handed to the functions of its video and audio halves. */
export class MuxState {
  video?: VideoState;
  audio?: AudioState;
  metaDirty = false;
  readonly counters = {
    videoTags: 0,
    audioTags: 0,
    scriptTags: 0,
    droppedVideo: 0,
    skippedAudio: 0,
    clampedTimestamps: 0,
  };
  readonly skippedCodecs = new Set<AudioCodec>();
  readonly slab = new BodySlab();
  /** every NAL unit of the unit being planned (its index, read) */
  readonly nals = new NalUnits();
  readonly plan: VideoPlan = { out: undefined, ts: 0, cts: 0, key: false, hevc: false, kept: new NalRanges(), keptBytes: 0 };

  constructor(
    readonly audioCodecs: ReadonlySet<AudioCodec> | undefined,
    readonly metaBody: (props: Record<string, AmfValue>) => Buffer,
  ) {}
}

/** the audio tag's first byte for this track, or undefined when it is not carried */
export function flagsOf(m: MuxState, a: AudioState): number | undefined {
  if (m.audioCodecs && !m.audioCodecs.has(a.codec)) return undefined;
  return audioFlagsByte(a.codec, a.channels, a.sampleRate);
}

export function clampTs(m: MuxState, state: { lastTs: number }, dts: number): number {
  let ts = Math.max(0, Math.round(dts));
  if (ts < state.lastTs) {
    ts = state.lastTs;
    m.counters.clampedTimestamps++;
  }
  state.lastTs = ts;
  return ts;
}

/** `out` with onMetaData added when it changed (made for it when there was none). */
export function emitMeta(m: MuxState, out: FlvTag[] | undefined): FlvTag[] | undefined {
  if (!m.metaDirty) return out;
  m.metaDirty = false;
  m.counters.scriptTags++;
  const meta = buildMeta(m);
  if (out === undefined) return [meta];
  out.push(meta);
  return out;
}

/**
 * onMetaData always carries timestamp 0: ffmpeg's FLV reader takes a script tag with any other timestamp for
 * subtitle data (a 'text' stream) instead of metadata.
 */
export function buildMeta(m: MuxState): FlvTag {
  const props: Record<string, AmfValue> = {};
  const v = m.video;
  if (v) {
    if (v.width) props.width = v.width;
    if (v.height) props.height = v.height;
    if (v.frameRate) props.framerate = v.frameRate;
    props.videocodecid = v.codec === 'h265' ? HVC1_CODEC_ID : 7;
  }
  const a = m.audio;
  const aFlags = a ? flagsOf(m, a) : undefined;
  if (a && aFlags !== undefined) {
    props.audiocodecid = aFlags >> 4;
    if (a.sampleRate) props.audiosamplerate = a.sampleRate;
    props.audiosamplesize = 16;
    props.stereo = a.channels >= 2;
  }
  props.encoder = 'jt1078-gateway';
  return { type: FLV_TAG_SCRIPT, timestamp: 0, body: m.metaBody(props), keyframe: false };
}
