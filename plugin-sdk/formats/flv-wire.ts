/**
 * The wire form of a unit's FLV tags (`FlvMuxer.pushWire`, flv-out): the WireUnit layout, `wireParts` to write it,
 * and the framing of audio tags as one (part of formats/flv, which re-exports the public names).
 */
import { FLV_TAG_AUDIO, FLV_TAG_SCRIPT, FLV_TAG_VIDEO, serializeTag, type FlvTag } from './flv-tag';
import { Buffer } from 'node:buffer';

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

/** Whether a muxer tag is configuration (onMetaData, a sequence header) rather than media. */
function isConfigTag(t: FlvTag): boolean {
  if (t.type === FLV_TAG_SCRIPT) return true;
  const b = t.body;
  if (t.type === FLV_TAG_AUDIO) return b[0] >> 4 === 10 && b[1] === 0;
  return b[0] & 0x80 ? (b[0] & 0x0f) === 0 : b[1] === 0;
}

/** The config tags, framed whole; undefined for none. */
export function configOf(tags: FlvTag[]): Buffer[] | undefined {
  return tags.length === 0 ? undefined : tags.map(serializeTag);
}

export function bytesOf(bufs: Buffer[] | undefined): number {
  let n = 0;
  if (bufs) for (const b of bufs) n += b.length;
  return n;
}

/**
 * Audio tags (config ones lead, as the muxer emits them) as a WireUnit, copied whole: for a packet of ADTS frames,
 * which makes several tags (a raw frame's tag is laid out by flv-audio.ts's pushAudioWire, the frame by reference).
 */
export function wireOfTags(tags: FlvTag[], payload: Buffer): WireUnit | undefined {
  let c = 0;
  while (c < tags.length && isConfigTag(tags[c])) c++;
  if (c === tags.length) return undefined;
  const config = configOf(tags.slice(0, c));
  // (several media tags only from ADTS input, which the bus's units do not carry: one copy is no matter then)
  const mem = tags.length - c === 1 ? serializeTag(tags[c]) : Buffer.concat(tags.slice(c).map(serializeTag));
  return {
    config,
    configBytes: bytesOf(config),
    mem,
    payload,
    ranges: [0, mem.length],
    mediaBytes: mem.length,
    mediaType: tags[c].type === FLV_TAG_VIDEO ? FLV_TAG_VIDEO : FLV_TAG_AUDIO,
    mediaTags: tags.length - c,
    timestamp: tags[c].timestamp,
    keyframe: false,
  };
}
