/**
 * flv-out's FLV form: the SDK's FLV bus format (formats/flv-form.ts: one encoder per stream frames each unit once,
 * for every FLV reader of the stream, players and recordings alike) with the form a player writes, which holds the
 * HTTP/1.1 chunk-size line and the WebSocket header for all players. The bus keeps a unit's form with the unit
 * (readers' queues; the GOP cache only while a format without catchUp is in use), so a form holds no copy of a large
 * payload: it refers to ranges of the unit's own payload (FlvMuxer.pushWire).
 */
import { defineFormat, type MediaBus, type UnitFormat } from '../../../plugin-sdk';
// per unit: from the defining modules, not the barrel (test/core/module-exports.test.ts says why)
import { readU32LE, writeU32LE } from '../../../plugin-sdk/formats';
import { FlvFormEncoder, copyConfigTags, shareFlvFormat, type FlvForm, type FlvFormHooks, type FlvInit } from '../../../plugin-sdk/formats';
import type { WireUnit } from '../../../plugin-sdk/formats';
import type { AudioCodec } from '../../../plugin-sdk';
import { sizeLineLength, writeSizeLine, wsHeader } from './framing';
import { flvHeader, onMetaDataBody } from './nms';
import { copyBytes } from '../../../plugin-sdk';
import { Buffer } from 'node:buffer';

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
export class FlvFrame implements FlvForm {
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
    return copyConfigTags(this.config, into, at);
  }

  /** Copies the unit's media tags into `into` from `at` (mediaBytes of room); returns where they end. */
  copyMedia(into: Buffer, at: number): number {
    const b = this.buf;
    const base = this.memAt;
    const payload = this.payload;
    for (let i = 0, r = this.rangesAt; i < this.rangeCount; i += 2, r += 8) {
      const from = readU32LE(b, r);
      const to = readU32LE(b, r + 4);
      // (copyBytes, not Buffer.copy: a generic property load and a view made from two more, each part; byte-views.ts)
      if ((i & 2) !== 0) {
        at += copyBytes(payload, from, to, into, at);
      } else if (to - from <= 32) {
        // the small parts (tag headers, length fields) are a few bytes: a loop beats a call that makes a view
        for (let k = base + from, end = base + to; k < end; k++) into[at++] = b[k];
      } else {
        at += copyBytes(b, base + from, base + to, into, at);
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

/** flv-out's counters and reports; all of them (see FlvFormHooks) */
export interface FlvFormatHooks extends Required<FlvFormHooks> {
  audioCodecs: readonly AudioCodec[];
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

/**
 * The FLV formats of one flv-out instance. With `bus`, each is also the one the gateway's other FLV readers (the
 * recorder) get when they ask for the same options (shareFlvFormat): one encoder per stream then serves both.
 */
export function createFlvFormats(hooks: FlvFormatHooks, bus?: Pick<MediaBus, 'shareFormat'>): FlvFormats {
  const writing = { header: flvHeader, metaBody: onMetaDataBody };
  const format = (name: string, only: 'video' | 'audio' | undefined): UnitFormat<FlvFrame> => {
    const o = { audioCodecs: hooks.audioCodecs, only };
    const f = defineFormat<FlvFrame>(name, (stream) => new FlvFormEncoder<FlvFrame>(stream, { ...o, ...writing }, hooks, frameOf));
    if (bus !== undefined) shareFlvFormat(bus, o, f);
    return f;
  };
  return { av: format('flv', undefined), v: format('flv-video', 'video'), a: format('flv-audio', 'audio') };
}
