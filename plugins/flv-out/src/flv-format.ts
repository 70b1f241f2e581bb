/**
 * FLV as a bus format: one encoder per stream frames each unit once, for every FLV player of the stream. The bus
 * keeps a unit's form with the unit (readers' queues; the GOP cache only while a format without catchUp is in use),
 * so a form holds no copy of a large payload: the muxer's wire form refers to ranges of the unit's own payload
 * (FlvMuxer.pushWire).
 */
import { defineFormat, type AccessUnit, type FormatEncoder, type StreamInfo, type TrackInfo, type UnitFormat } from '../../../plugin-sdk';
// per unit: from the defining modules, not the barrel (test/core/module-exports.test.ts says why)
import { readU32LE, writeU32LE } from '../../../plugin-sdk/formats';
import { FLV_TAG_AUDIO, FLV_TAG_SCRIPT, serializeTag } from '../../../plugin-sdk/formats';
import { FlvMuxer } from '../../../plugin-sdk/formats';
import type { WireUnit } from '../../../plugin-sdk/formats';
import type { AudioCodec } from '../../../plugin-sdk';
import { keptCopy } from '../../../plugin-sdk';
import { sizeLineLength, writeSizeLine, wsHeader } from './framing';
import { flvHeader, onMetaDataBody } from './nms';

/** What a player starting at a unit writes before it; shared by every start point until the configuration changes. */
export interface FlvInit {
  /** FLV file header (flags from the tracks known then) and PreviousTagSize0; only the very first start sends it */
  readonly header: Buffer;
  /** onMetaData and the current sequence headers, framed */
  readonly config: Buffer;
}

/**
 * Where units' small bytes live: 4 KiB chunks shared by many units, each unit holding its chunk and offsets rather than
 * a Buffer view (a view per piece, measured, grows the FLV output's old-space heap by ~40 %). One memory for every
 * encoder of the process: since the GOP cache keeps no forms (FormatEncoder.catchUp), a form dies young with its unit,
 * and so does a chunk all streams fill, within milliseconds at hundreds of streams. A chunk of its own per stream would
 * take ~1.7 s to fill (~100 B a frame), outlive two young-generation collections, and its 4 KiB then wait for a full
 * collection: at 1,000 streams ~2.4 MB/s of dead ArrayBuffers in the old generation. What a kept form pins (a slow
 * player's queue, a GOP kept for a format without catchUp) is bounded by the chunks made while it is kept, whoever's
 * forms share them.
 */
const FORM_CHUNK = 4096;

class FormMemory {
  private chunk = Buffer.allocUnsafeSlow(FORM_CHUNK);
  private at = 0;

  /** Room for n bytes: returns the chunk holding it; the room starts at `last` */
  take(n: number): Buffer {
    if (this.at + n > this.chunk.length) {
      this.chunk = Buffer.allocUnsafeSlow(Math.max(FORM_CHUNK, n));
      this.at = 0;
    }
    this.last = this.at;
    this.at += n;
    return this.chunk;
  }

  last = 0;
}

/**
 * A unit's FLV form, shared by every FLV player of its stream and kept as long as the unit. Its
 * bytes in `buf` from `lineAt`: the HTTP/1.1 chunk-size line for the whole unit, then the small parts of its tags
 * (headers, length fields, short NAL units), then the ranges (uint32 LE, alternating: small parts, relative to
 * `memAt`; the unit's payload) that the tags are made of, in order.
 */
export class FlvFrame {
  /** its added latency was observed (by the first player it was written to) */
  observed = false;
  private wsHead: Buffer | undefined = undefined;

  constructor(
    /** config tags that changed with this unit; a player starting here leaves them out (init has them) */
    readonly config: Buffer[] | undefined,
    readonly buf: Buffer,
    readonly lineAt: number,
    readonly memAt: number,
    readonly rangesAt: number,
    /** numbers in the ranges (two per piece) */
    readonly rangeCount: number,
    readonly payload: Buffer,
    readonly mediaBytes: number,
    /** config and media */
    readonly bytes: number,
    /**
     * The stream's configuration version after this unit (it counts units that carried config tags): a player that
     * resumes here after a skip and last saw another version may have missed a new sequence header.
     */
    readonly version: number,
    /** set on start points (video key frames; audio units of a stream without video) */
    readonly init: FlvInit | undefined,
  ) {}

  /** the HTTP/1.1 chunk-size line for the whole unit */
  sizeLine(): Buffer {
    return this.buf.subarray(this.lineAt, this.memAt);
  }

  /** the WebSocket header of the whole unit as one message (made for the first WS player, then shared) */
  wsHeader(): Buffer {
    return (this.wsHead ??= wsHeader(this.bytes));
  }

  /** Copies the config tags that changed with this unit into `into` from `at`; returns where they end. */
  copyConfig(into: Buffer, at: number): number {
    const c = this.config;
    if (c !== undefined) for (let i = 0; i < c.length; i++) at += c[i].copy(into, at);
    return at;
  }

  /** Copies the unit's media tags into `into` from `at` (mediaBytes of room); returns where they end. */
  copyMedia(into: Buffer, at: number): number {
    const b = this.buf;
    const base = this.memAt;
    const payload = this.payload;
    for (let i = 0, r = this.rangesAt; i < this.rangeCount; i += 2, r += 8) {
      const from = readU32LE(b, r);
      const to = readU32LE(b, r + 4);
      if ((i & 2) !== 0) {
        at += payload.copy(into, at, from, to);
      } else if (to - from <= 32) {
        // the small parts (tag headers, length fields) are a few bytes: a loop beats a call that makes a view
        for (let k = base + from, end = base + to; k < end; k++) into[at++] = b[k];
      } else {
        at += b.copy(into, at, base + from, base + to);
      }
    }
    return at;
  }

  /** Each piece of the unit's media tags, in order (views made now). */
  pieces(write: (b: Buffer) => void): void {
    const b = this.buf;
    const base = this.memAt;
    const payload = this.payload;
    for (let i = 0, at = this.rangesAt; i < this.rangeCount; i += 2, at += 8) {
      const from = readU32LE(b, at);
      const to = readU32LE(b, at + 4);
      write((i & 2) === 0 ? b.subarray(base + from, base + to) : payload.subarray(from, to));
    }
  }
}

/** the process's form memory (see FormMemory) */
const FORMS = new FormMemory();

/** The form of a unit's wire tags: copies the small parts into the form memory with the size line and the ranges. */
function frameOf(w: WireUnit, version: number, init: FlvInit | undefined): FlvFrame {
  const mem = FORMS;
  const bytes = w.configBytes + w.mediaBytes;
  const small = w.mem.length;
  const r = w.ranges;
  const buf = mem.take(sizeLineLength(bytes) + small + 4 * r.length);
  const lineAt = mem.last;
  const memAt = writeSizeLine(bytes, buf, lineAt);
  w.mem.copy(buf, memAt);
  const rangesAt = memAt + small;
  for (let i = 0; i < r.length; i++) writeU32LE(buf, r[i], rangesAt + 4 * i);
  return new FlvFrame(w.config, buf, lineAt, memAt, rangesAt, r.length, w.payload, w.mediaBytes, bytes, version, init);
}

interface Inc {
  inc(): void;
}

export interface FlvFormatHooks {
  audioCodecs: readonly AudioCodec[];
  /** tags_total's children, resolved once */
  tags: { video: Inc; audio: Inc; script: Inc };
  /** an audio unit left out (codec not carried, or AAC without a config yet): counted */
  audioSkipped: Inc;
  /** the first audio unit of a codec a stream's encoder leaves out (to log once, not per unit) */
  audioSkipStarted(stream: string, codec: string): void;
  /** an encoder started (+1) or stopped (-1): a stream has FLV players */
  encoders(delta: 1 | -1): void;
}

const NOT_COUNTED: Inc = { inc: () => undefined };

/** the hooks with every count and report left out (what a catch-up encoder frames was counted when it came) */
function uncounted(h: FlvFormatHooks): FlvFormatHooks {
  return {
    audioCodecs: h.audioCodecs, tags: { video: NOT_COUNTED, audio: NOT_COUNTED, script: NOT_COUNTED }, audioSkipped: NOT_COUNTED,
    audioSkipStarted: () => undefined, encoders: () => undefined,
  };
}

class FlvEncoder implements FormatEncoder<FlvFrame> {
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

  constructor(private readonly stream: StreamInfo, private readonly h: FlvFormatHooks, private readonly only: 'video' | 'audio' | undefined) {
    this.muxer = new FlvMuxer({ audioCodecs: h.audioCodecs, metaBody: onMetaDataBody });
    h.encoders(1);
  }

  tracks(list: ReadonlyArray<TrackInfo>): void {
    // a track this form leaves out is not announced either: its file header and onMetaData say only what it carries
    for (const t of list) if (this.only === undefined || t.kind === this.only) this.muxer.setTrack(t);
    // a new audio track (another rate, say) may be one the muxer carries
    this.skipCodec = undefined;
  }

  encode(unit: AccessUnit): FlvFrame | undefined {
    if (this.only !== undefined && unit.kind !== this.only) return undefined;
    if (unit.codec === this.skipCodec && unit.kind === 'audio') {
      if (unit.payload.length > 0) this.h.audioSkipped.inc();
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
    return frameOf(w, this.version, start ? this.initAt(w.timestamp) : undefined);
  }

  /**
   * A new encoder's forms of the GOP: the same tags, their own FlvInit; configuration versions on their own count
   * (a reader that falls behind while still in them sends the configuration again at its next start: one set of
   * sequence headers more, never one less). Counted nowhere: the tags were counted when the units came.
   */
  catchUp(units: ReadonlyArray<AccessUnit>, tracks: ReadonlyArray<TrackInfo>): Array<FlvFrame | undefined> {
    const e = new FlvEncoder(this.stream, uncounted(this.h), this.only);
    e.tracks(tracks);
    return units.map((u) => e.encode(u));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.h.encoders(-1);
  }

  private skipped(codec: string): void {
    this.h.audioSkipped.inc();
    // (AAC before its config is skipped too, but only until the config comes: not a codec to skip for good)
    if (this.muxer.skipsAudio(codec)) this.skipCodec = codec;
    if (this.reported.includes(codec)) return;
    this.reported.push(codec);
    this.h.audioSkipStarted(this.stream.name, codec);
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
    // kept until the configuration changes again, so copied out of Node's pool (kept-bytes)
    this.init = { header: keptCopy(flvHeader(m.hasAudio, m.hasVideo)), config: keptCopy(Buffer.concat(m.configTags(timestamp).map(serializeTag))) };
    this.initVersion = this.version;
    return this.init;
  }
}

/** The FLV format of one flv-out instance (players ask for it by identity, so each gateway has its own). */
export interface FlvFormats {
  /** audio and video */
  av: UnitFormat<FlvFrame>;
  /** video only: a file header without the audio flag (a player told audio comes waits for it) */
  v: UnitFormat<FlvFrame>;
  /** audio only (listen): every audio unit is a start point */
  a: UnitFormat<FlvFrame>;
}

/** The FLV formats of one flv-out instance (players ask for them by identity, so each gateway has its own). */
export function createFlvFormats(hooks: FlvFormatHooks): FlvFormats {
  return {
    av: defineFormat<FlvFrame>('flv', (stream) => new FlvEncoder(stream, hooks, undefined)),
    v: defineFormat<FlvFrame>('flv-video', (stream) => new FlvEncoder(stream, hooks, 'video')),
    a: defineFormat<FlvFrame>('flv-audio', (stream) => new FlvEncoder(stream, hooks, 'audio')),
  };
}
