/**
 * FLV as a bus format: one encoder per stream frames each unit once, for every FLV player of the stream. The bus
 * keeps a unit's form with the unit (GOP cache, readers' queues), so a form holds no copy of a large payload: the
 * muxer's wire form refers to ranges of the unit's own payload (FlvMuxer.pushWire).
 */
import { BufferSlab, defineFormat, type AccessUnit, type FormatEncoder, type StreamInfo, type TrackInfo, type UnitFormat } from '../../../plugin-sdk';
import { FLV_TAG_AUDIO, FLV_TAG_SCRIPT, FlvMuxer, serializeTag, type WireUnit } from '../../../plugin-sdk/formats/flv';
import type { AudioCodec } from '../../../plugin-sdk/media';
import { chunkSizeLine, wsHeader } from './framing';
import { flvHeader, onMetaDataBody } from './nms';

/** What a player starting at a unit writes before it; shared by every start point until the configuration changes. */
export interface FlvInit {
  /** FLV file header (flags from the tracks known then) and PreviousTagSize0; only the very first start sends it */
  readonly header: Buffer;
  /** onMetaData and the current sequence headers, framed */
  readonly config: Buffer;
}

/**
 * A unit's FLV form, shared by every FLV player of its stream and kept as long as the unit (GOP cache included):
 * the WireUnit's fields, no Buffer views of its own (see WireUnit).
 */
export class FlvFrame {
  /** its added latency was observed (by the first player it was written to) */
  observed = false;
  private line: Buffer | undefined = undefined;
  private wsHead: Buffer | undefined = undefined;
  /** config tags that changed with this unit; a player starting here leaves them out (init has them) */
  readonly config: Buffer[] | undefined;
  readonly mem: Buffer;
  readonly payload: Buffer;
  readonly ranges: number[];
  readonly mediaBytes: number;
  /** config and media */
  readonly bytes: number;

  constructor(
    w: WireUnit,
    /**
     * The stream's configuration version after this unit (it counts units that carried config tags): a player that
     * resumes here after a skip and last saw another version may have missed a new sequence header.
     */
    readonly version: number,
    /** set on start points (video key frames; audio units of a stream without video) */
    readonly init: FlvInit | undefined,
    private readonly lines: BufferSlab,
  ) {
    this.config = w.config;
    this.mem = w.mem;
    this.payload = w.payload;
    this.ranges = w.ranges;
    this.mediaBytes = w.mediaBytes;
    this.bytes = w.configBytes + w.mediaBytes;
  }

  // Framing made for the first player that needs it, then shared. From the stream's own slab: a few bytes from
  // node's shared pool would pin a whole pool chunk for as long as the GOP.

  /** the HTTP/1.1 chunk-size line for the whole unit */
  sizeLine(): Buffer {
    return (this.line ??= chunkSizeLine(this.bytes, this.lines));
  }

  /** the WebSocket header of the whole unit as one message */
  wsHeader(): Buffer {
    return (this.wsHead ??= wsHeader(this.bytes, this.lines));
  }
}

interface Inc {
  inc(): void;
}

export interface FlvFormatHooks {
  audioCodecs: readonly AudioCodec[];
  /** tags_total's children, resolved once */
  tags: { video: Inc; audio: Inc; script: Inc };
  /** an audio unit left out (codec not carried, or AAC without a config yet) */
  audioSkipped(stream: string, codec: string): void;
  /** an encoder started (+1) or stopped (-1): a stream has FLV players */
  encoders(delta: 1 | -1): void;
}

class FlvEncoder implements FormatEncoder<FlvFrame> {
  private readonly muxer: FlvMuxer;
  private readonly lines = new BufferSlab(1024);
  private version = 0;
  private init: FlvInit | undefined;
  private initVersion = -1;
  private closed = false;

  constructor(private readonly stream: StreamInfo, private readonly h: FlvFormatHooks) {
    this.muxer = new FlvMuxer({ audioCodecs: h.audioCodecs, metaBody: onMetaDataBody });
    h.encoders(1);
  }

  tracks(list: ReadonlyArray<TrackInfo>): void {
    for (const t of list) this.muxer.setTrack(t);
  }

  encode(unit: AccessUnit): FlvFrame | undefined {
    const w = this.muxer.pushWire(unit);
    if (w === undefined) {
      if (unit.kind === 'audio' && unit.payload.length > 0) this.h.audioSkipped(this.stream.name, unit.codec);
      return undefined;
    }
    this.count(w);
    if (w.config !== undefined) this.version++;
    const start = w.keyframe || (unit.kind === 'audio' && !this.muxer.hasVideo);
    return new FlvFrame(w, this.version, start ? this.initAt(w.timestamp) : undefined, this.lines);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.h.encoders(-1);
  }

  private count(w: WireUnit): void {
    const tags = this.h.tags;
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
    this.init = { header: flvHeader(m.hasAudio, m.hasVideo), config: Buffer.concat(m.configTags(timestamp).map(serializeTag)) };
    this.initVersion = this.version;
    return this.init;
  }
}

/** The FLV format of one flv-out instance (players ask for it by identity, so each gateway has its own). */
export function createFlvFormat(hooks: FlvFormatHooks): UnitFormat<FlvFrame> {
  return defineFormat<FlvFrame>('flv', (stream) => new FlvEncoder(stream, hooks));
}
