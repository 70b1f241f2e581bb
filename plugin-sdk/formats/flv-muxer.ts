/**
 * FlvMuxer: TrackInfo and AccessUnits in, FLV tags out, as tags (`push`) or framed for the wire (`pushWire`). The
 * per-track work is in flv-video.ts and flv-audio.ts; this lays out video bodies and holds the state (part of
 * formats/flv, which re-exports the public names).
 */
import { writeU32BE } from './byte-order';
import type { AccessUnit, AudioCodec, TrackInfo } from '../media';
import { BufferSlab } from '../buffer-slab';
import type { AmfValue } from './flv-amf';
import { encodeOnMetaData } from './flv-amf';
import { FLV_TAG_VIDEO, PREV_SIZE_SIZE, TAG_HEADER_SIZE, dataSizeError, writeTagHeader, type FlvTag } from './flv-tag';
import { bytesOf, configOf, WIRE_VIEW_MIN, type WireUnit } from './flv-wire';
import { buildMeta, flagsOf, MuxState } from './flv-mux-state';
import { planVideo, setVideo, videoPrefixSize, writeVideoPrefix } from './flv-video';
import { pushAudio, pushAudioWire, setAudio } from './flv-audio';
import { copyBytes } from '../byte-views';

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
 * pushWire's small parts (headers, length fields, short NAL units), a few dozen bytes a frame, for every muxer of the
 * process: flv-out copies them into its form at once, so a chunk all streams fill dies young; one per muxer took
 * seconds to fill and was promoted first. Slices stay valid for as long as anyone keeps them (a chunk is never
 * reused), and small chunks bound what a kept slice pins.
 */
const WIRE_SLAB = new BufferSlab(4096);

/**
 * Turns TrackInfo and AccessUnits into FLV tags. Config tags (onMetaData, sequence headers) are emitted lazily,
 * in front of the next frame that needs them, and again whenever they change.
 */
export class FlvMuxer {
  /** tracks, counters and frame bodies, shared with the video and audio halves (flv-video.ts, flv-audio.ts) */
  private readonly m: MuxState;

  constructor(opts: FlvMuxerOptions = {}) {
    this.m = new MuxState(opts.audioCodecs ? new Set(opts.audioCodecs) : undefined, opts.metaBody ?? encodeOnMetaData);
  }

  get stats(): FlvMuxerStats {
    return { ...this.m.counters, skippedAudioCodecs: [...this.m.skippedCodecs] };
  }

  /** whether a video / an FLV-representable audio track is known (for the file header flags) */
  get hasVideo(): boolean {
    return this.m.video !== undefined;
  }
  get hasAudio(): boolean {
    return this.m.audio !== undefined && flagsOf(this.m, this.m.audio) !== undefined;
  }

  /**
   * Whether audio units of this codec are left out whatever they hold (a codec FLV cannot carry or not chosen),
   * as opposed to skipped for now (AAC before its config). True only for the current audio track's codec.
   */
  skipsAudio(codec: string): boolean {
    const a = this.m.audio;
    return a !== undefined && a.codec === codec && flagsOf(this.m, a) === undefined;
  }

  setTrack(info: TrackInfo): void {
    if (info.kind === 'video') setVideo(this.m, info);
    else setAudio(this.m, info);
  }

  /** Tags for one access unit, preceded by any config tags that changed. Empty when the unit is dropped. */
  push(au: AccessUnit): FlvTag[] {
    if (au.kind !== 'video') return pushAudio(this.m, au);
    const p = planVideo(this.m, au);
    if (p === undefined) return [];
    const body = this.m.slab.allocBody(videoPrefixSize(p) + p.keptBytes);
    let at = writeVideoPrefix(body, 0, p);
    const kept = p.kept;
    const payload = au.payload;
    for (let i = 0; i < kept.count; i++) {
      const from = kept.start(i);
      const to = kept.end(i);
      writeU32BE(body, to - from, at);
      at += 4 + payload.copy(body, at + 4, from, to);
    }
    const out = p.out ?? [];
    out.push({ type: FLV_TAG_VIDEO, timestamp: p.ts, body, keyframe: p.key });
    return out;
  }

  /**
   * The same tags as `push`, framed for the wire, or undefined when the unit is dropped. NAL units and audio frames
   * of WIRE_VIEW_MIN bytes or more are referenced from the unit's payload, which the bus guarantees is never changed.
   */
  pushWire(au: AccessUnit): WireUnit | undefined {
    if (au.kind !== 'video') return pushAudioWire(this.m, au, WIRE_SLAB);
    const p = planVideo(this.m, au);
    if (p === undefined) return undefined;
    const prefix = videoPrefixSize(p);
    const bodyLen = prefix + p.keptBytes;
    if (bodyLen > 0xffffff) throw dataSizeError(bodyLen);
    const kept = p.kept;
    let small = TAG_HEADER_SIZE + prefix + PREV_SIZE_SIZE;
    let referenced = 0;
    for (let i = 0; i < kept.count; i++) {
      const len = kept.end(i) - kept.start(i);
      if (len >= WIRE_VIEW_MIN) referenced++;
      else small += len;
      small += 4;
    }
    const mem = WIRE_SLAB.take(small);
    writeTagHeader(mem, 0, FLV_TAG_VIDEO, bodyLen, p.ts);
    let at = writeVideoPrefix(mem, TAG_HEADER_SIZE, p);
    // sized once: an array grown by push keeps spare room, for as long as the wire form is kept
    const ranges = new Array<number>(2 + 4 * referenced);
    ranges[0] = 0;
    let r = 1;
    const payload = au.payload;
    for (let i = 0; i < kept.count; i++) {
      const from = kept.start(i);
      const to = kept.end(i);
      writeU32BE(mem, to - from, at);
      at += 4;
      if (to - from >= WIRE_VIEW_MIN) {
        ranges[r++] = at;
        ranges[r++] = from;
        ranges[r++] = to;
        ranges[r++] = at;
      } else {
        at += copyBytes(payload, from, to, mem, at);
      }
    }
    writeU32BE(mem, TAG_HEADER_SIZE + bodyLen, at);
    ranges[r] = at + PREV_SIZE_SIZE;
    const config = configOf(p.out ?? []);
    return {
      config,
      configBytes: bytesOf(config),
      mem,
      payload,
      ranges,
      mediaBytes: TAG_HEADER_SIZE + bodyLen + PREV_SIZE_SIZE,
      mediaType: FLV_TAG_VIDEO,
      mediaTags: 1,
      timestamp: p.ts,
      keyframe: p.key,
    };
  }

  /**
   * The current onMetaData and sequence headers, for a consumer that starts mid-stream (e.g. a new file).
   * Sequence headers get `timestamp`; onMetaData keeps 0 (see buildMeta).
   */
  configTags(timestamp = 0): FlvTag[] {
    const out: FlvTag[] = [];
    if (this.m.video || this.hasAudio) out.push(buildMeta(this.m));
    if (this.m.video?.seqHeader) out.push({ ...this.m.video.seqHeader, timestamp });
    if (this.m.audio?.seqHeader) out.push({ ...this.m.audio.seqHeader, timestamp });
    return out;
  }
}
