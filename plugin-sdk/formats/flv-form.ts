/**
 * FLV as a bus format, shared by the outputs that write FLV (flv-out's players, the recorder's files): one encoder
 * per stream frames each unit once (FlvMuxer.pushWire) for every reader of that format, whatever it writes to.
 *
 * - `FlvForm` is what a reader gets for a unit: the config tags that changed with it, its media tags (copied out by
 *   `copyMedia`), and on start points the `FlvInit` a reader starting there writes first.
 * - `FlvFormEncoder` is the encoder; an output gives it the form it keeps (flv-out's FlvFrame holds its HTTP chunk
 *   line too) and the counters it keeps.
 * - `shareFlvFormat` / `flvFormatOf`: one format per gateway (MediaBus.shareFormat) and options, so readers whose
 *   bytes are the same (the same audio codecs carried, the same tracks) share one encoder: flv-out shares its
 *   formats, and the recorder takes flv-out's when it asks for the same options, or one made once per gateway.
 */
import { defineFormat, type FormatEncoder, type MediaBus, type StreamInfo, type UnitFormat } from '../bus';
import type { AccessUnit, AudioCodec, TrackInfo } from '../media';
import { keptCopy } from '../kept-bytes';
import { encodeOnMetaData, type AmfValue } from './flv-amf';
import { FlvMuxer } from './flv-muxer';
import { FLV_TAG_AUDIO, FLV_TAG_SCRIPT, flvFileHeader, serializeTag } from './flv-tag';
import type { WireUnit } from './flv-wire';
import { copyBytes, lengthOf } from '../byte-views';
import { Buffer } from 'node:buffer';

/** What a reader starting at a unit writes before it; shared by every start point until the configuration changes. */
export interface FlvInit {
  /** FLV file header (flags from the tracks known then) and PreviousTagSize0 */
  readonly header: Buffer;
  /** onMetaData and the current sequence headers, framed */
  readonly config: Buffer;
}

/** A unit's FLV form, as every reader of an FLV format reads it. */
export interface FlvForm {
  /** config tags that changed with this unit, framed; a reader starting here leaves them out (init has them) */
  readonly config: Buffer[] | undefined;
  /** bytes of its media tags (tag headers, bodies, PreviousTagSizes) */
  readonly mediaBytes: number;
  /**
   * The stream's configuration version after this unit (it counts units that carried config tags): a reader that
   * resumes here after a skip and last saw another version may have missed a new sequence header.
   */
  readonly version: number;
  /** set on start points (video key frames; audio units of a stream without video, or of an audio-only form) */
  readonly init: FlvInit | undefined;
  /** Copies the config tags that changed with this unit into `into` from `at`; returns where they end. */
  copyConfig(into: Buffer, at: number): number;
  /** Copies the unit's media tags into `into` from `at` (mediaBytes of room); returns where they end. */
  copyMedia(into: Buffer, at: number): number;
}

/** The form an FlvFormEncoder makes of a unit's wire tags. */
export type FlvFormMaker<F> = (w: WireUnit, version: number, init: FlvInit | undefined) => F;

interface Inc {
  inc(): void;
}

/** What an encoder counts and reports for the output that made its format (flv-out's metrics); all optional. */
export interface FlvFormHooks {
  /** tags made, by type */
  tags?: { video: Inc; audio: Inc; script: Inc };
  /** an audio unit left out (codec not carried, or AAC without a config yet) */
  audioSkipped?: Inc;
  /** the first audio unit of a codec a stream's encoder leaves out (to log once, not per unit) */
  audioSkipStarted?(stream: string, codec: string): void;
  /** an encoder started (+1) or stopped (-1) */
  encoders?(delta: 1 | -1): void;
}

export interface FlvFormOptions {
  /** audio codecs carried (others are left out, see FlvMuxerOptions.audioCodecs) */
  audioCodecs: readonly AudioCodec[];
  /** one track only: 'video' (a file header without the audio flag), 'audio' (every audio unit a start point) */
  only?: 'video' | 'audio';
}

/** How the file header and onMetaData are written (flv-out: node-media-server's; default: the SDK's). */
export interface FlvFormWriting {
  header?(hasAudio: boolean, hasVideo: boolean): Buffer;
  metaBody?: (props: Record<string, AmfValue>) => Buffer;
}

/**
 * An FLV format's encoder: one per stream, framing every unit once for all the format's readers. The configuration
 * version counts units that carried config tags; start points carry the FlvInit made for the current version.
 */
export class FlvFormEncoder<F> implements FormatEncoder<F> {
  private readonly muxer: FlvMuxer;
  private version = 0;
  private init: FlvInit | undefined;
  private initVersion = -1;
  private closed = false;
  /**
   * An audio codec this form does not carry (not in audioCodecs, or FLV cannot): its units are counted and left
   * out here, without the muxer. A stream without audio-aac sends 50 of them a second; the muxer's way to the same
   * answer (and a map lookup to log it) was ~4 % of the main thread's profile at 250 such streams.
   */
  private skipCodec: string | undefined;
  /** audio codecs already reported to audioSkipStarted */
  private reported: string[] = [];
  /**
   * `o.only`, read once: the options objects of the site's forms come in many shapes, so `this.o.only` in encode (once
   * a unit) was a megamorphic load, ~1 % of the main thread at 500 terminals (perf).
   */
  private readonly only: 'video' | 'audio' | undefined;

  constructor(
    private readonly stream: StreamInfo,
    private readonly o: FlvFormOptions & FlvFormWriting,
    private readonly h: FlvFormHooks,
    private readonly make: FlvFormMaker<F>,
  ) {
    this.muxer = new FlvMuxer({ audioCodecs: o.audioCodecs, metaBody: o.metaBody ?? encodeOnMetaData });
    this.only = o.only;
    h.encoders?.(1);
  }

  tracks(list: ReadonlyArray<TrackInfo>): void {
    // a track this form leaves out is not announced either: its file header and onMetaData say only what it carries
    for (const t of list) if (this.only === undefined || t.kind === this.only) this.muxer.setTrack(t);
    // a new audio track (another rate, say) may be one the muxer carries
    this.skipCodec = undefined;
  }

  encode(unit: AccessUnit): F | undefined {
    if (this.only !== undefined && unit.kind !== this.only) return undefined;
    if (unit.codec === this.skipCodec && unit.kind === 'audio') {
      if (unit.payload.length > 0) this.h.audioSkipped?.inc();
      return undefined;
    }
    const w = this.muxer.pushWire(unit);
    if (w === undefined) {
      if (unit.kind === 'audio' && unit.payload.length > 0) this.skipped(unit.codec);
      return undefined;
    }
    this.count(w);
    if (w.config !== undefined) this.version++;
    const start = w.keyframe || (unit.kind === 'audio' && !this.muxer.hasVideo);
    return this.make(w, this.version, start ? this.initAt(w.timestamp) : undefined);
  }

  /**
   * A new encoder's forms of the GOP: the same tags, their own FlvInit; configuration versions on their own count
   * (a reader that falls behind while still in them writes the configuration again at its next start: one set of
   * sequence headers more, never one less). Counted nowhere: the tags were counted when the units came.
   */
  catchUp(units: ReadonlyArray<AccessUnit>, tracks: ReadonlyArray<TrackInfo>): Array<F | undefined> {
    const e = new FlvFormEncoder(this.stream, this.o, {}, this.make);
    e.tracks(tracks);
    return units.map((u) => e.encode(u));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.h.encoders?.(-1);
  }

  private skipped(codec: string): void {
    this.h.audioSkipped?.inc();
    // (AAC before its config is skipped too, but only until the config comes: not a codec to skip for good)
    if (this.muxer.skipsAudio(codec)) this.skipCodec = codec;
    if (this.reported.includes(codec)) return;
    this.reported.push(codec);
    this.h.audioSkipStarted?.(this.stream.name, codec);
  }

  private count(w: WireUnit): void {
    const tags = this.h.tags;
    if (tags === undefined) return;
    if (w.config !== undefined) {
      for (const c of w.config) (c[0] === FLV_TAG_SCRIPT ? tags.script : c[0] === FLV_TAG_AUDIO ? tags.audio : tags.video).inc();
    }
    const media = w.mediaType === FLV_TAG_AUDIO ? tags.audio : tags.video;
    for (let i = 0; i < w.mediaTags; i++) media.inc();
  }

  /** Rebuilt only when the configuration changed since the last start point. */
  private initAt(timestamp: number): FlvInit {
    if (this.init !== undefined && this.initVersion === this.version) return this.init;
    const m = this.muxer;
    const header = this.o.header?.(m.hasAudio, m.hasVideo) ?? flvFileHeader(m.hasVideo, m.hasAudio);
    // kept until the configuration changes again, so copied out of Node's pool (kept-bytes)
    this.init = { header: keptCopy(header), config: keptCopy(Buffer.concat(m.configTags(timestamp).map(serializeTag))) };
    this.initVersion = this.version;
    return this.init;
  }
}

/** Copies a form's config tags (FlvForm.config) into `into` from `at`; returns where they end. For FlvForm.copyConfig. */
export function copyConfigTags(config: Buffer[] | undefined, into: Buffer, at: number): number {
  if (config !== undefined) for (let i = 0; i < config.length; i++) at += copyBytes(config[i], 0, lengthOf(config[i]), into, at);
  return at;
}

/** The SDK's own form: the wire unit as pushWire made it (its small parts in the muxer's shared slab). */
export class WireForm implements FlvForm {
  readonly config: Buffer[] | undefined;
  readonly mediaBytes: number;
  constructor(
    private readonly w: WireUnit,
    readonly version: number,
    readonly init: FlvInit | undefined,
  ) {
    this.config = w.config;
    this.mediaBytes = w.mediaBytes;
  }

  copyConfig(into: Buffer, at: number): number {
    return copyConfigTags(this.config, into, at);
  }

  copyMedia(into: Buffer, at: number): number {
    const r = this.w.ranges;
    // (copyBytes, not Buffer.copy: plugin-sdk/byte-views.ts)
    for (let i = 0; i < r.length; i += 2) at += copyBytes((i & 2) === 0 ? this.w.mem : this.w.payload, r[i], r[i + 1], into, at);
    return at;
  }
}

/** The key of an FLV format's options: formats with equal keys make the same media bytes. */
export function flvFormatKey(o: FlvFormOptions): string {
  return `${o.only ?? 'av'}|${[...new Set(o.audioCodecs)].sort().join(',')}`;
}

/** Makes `format` the one the gateway's readers asking for these options get (flv-out shares its own). */
export function shareFlvFormat(bus: Pick<MediaBus, 'shareFormat'>, o: FlvFormOptions, format: UnitFormat<FlvForm>): void {
  bus.shareFormat(flvFormatKey(o), format as UnitFormat<unknown>);
}

/** The gateway's FLV format for these options: the one shared for them, else one made now (and shared from now on). */
export function flvFormatOf(bus: Pick<MediaBus, 'sharedFormat'>, o: FlvFormOptions): UnitFormat<FlvForm> {
  const key = flvFormatKey(o);
  return bus.sharedFormat<FlvForm>(key, () => {
    const opts: FlvFormOptions = { audioCodecs: [...o.audioCodecs], only: o.only };
    return defineFormat<FlvForm>(`flv:${key}`, (stream) => new FlvFormEncoder<FlvForm>(stream, opts, {}, (w, v, init) => new WireForm(w, v, init)));
  });
}

/**
 * Moves the timestamps of the FLV tags in buf[from, to) back by `base` ms (not below 0: script tags stay at 0, as
 * ffmpeg wants them), in place; calls `seen` with each tag's type. For bytes a reader owns (a copy of a form).
 */
export function retimeFlvTags(buf: Buffer, from: number, to: number, base: number, seen?: (type: number) => void): void {
  for (let at = from; at + 11 <= to;) {
    const size = (buf[at + 1] << 16) | (buf[at + 2] << 8) | buf[at + 3];
    const ts = ((buf[at + 7] << 24) | (buf[at + 4] << 16) | (buf[at + 5] << 8) | buf[at + 6]) >>> 0;
    const t = Math.max(0, ts - base);
    buf[at + 4] = (t >> 16) & 0xff;
    buf[at + 5] = (t >> 8) & 0xff;
    buf[at + 6] = t & 0xff;
    buf[at + 7] = (t >>> 24) & 0xff;
    seen?.(buf[at]);
    at += 11 + size + 4;
  }
}

/** The timestamp (ms) of the FLV tag at `at`. */
export function flvTagTimestamp(buf: Buffer, at: number): number {
  return ((buf[at + 7] << 24) | (buf[at + 4] << 16) | (buf[at + 5] << 8) | buf[at + 6]) >>> 0;
}
