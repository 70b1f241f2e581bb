/**
 * FLV framing: the tag type, the file header, tag headers and PreviousTagSize, and tag bodies allocated with room
 * for both around them so `serializeTag` can frame them in place (part of formats/flv, which re-exports the public
 * names).
 */
import { BufferSlab } from '../buffer-slab';
import { keptAlloc } from '../kept-bytes';
import { writeU24BE } from './byte-order';
import { Buffer } from 'node:buffer';

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

export const TAG_HEADER_SIZE = 11;
export const PREV_SIZE_SIZE = 4;

/** FLV file header (9 bytes) followed by PreviousTagSize0 (4 zero bytes). */
export function flvFileHeader(hasVideo: boolean, hasAudio: boolean): Buffer {
  const b = Buffer.from([0x46, 0x4c, 0x56, 0x01, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00]);
  b[4] = (hasAudio ? 0x04 : 0) | (hasVideo ? 0x01 : 0);
  return b;
}

/** Bodies the muxer allocated with header/trailer room around them, so they can be framed in place. */
const framedBodies = new WeakMap<Buffer, Buffer>();

/** A config tag's body (sequence header, onMetaData): kept as long as its stream, so not from Node's pool (kept-bytes). */
export function allocBody(len: number): Buffer {
  const framed = keptAlloc(TAG_HEADER_SIZE + len + PREV_SIZE_SIZE);
  const body = framed.subarray(TAG_HEADER_SIZE, TAG_HEADER_SIZE + len);
  framedBodies.set(body, framed);
  return body;
}

/**
 * Frame bodies of one muxer, carved with room for header and trailer from its own slab (see BufferSlab for why
 * per stream). Config tags, kept for as long as the stream lives, use allocBody instead.
 */
export class BodySlab {
  private readonly slab = new BufferSlab();

  allocBody(len: number): Buffer {
    const framed = this.slab.take(TAG_HEADER_SIZE + len + PREV_SIZE_SIZE);
    const body = framed.subarray(TAG_HEADER_SIZE, TAG_HEADER_SIZE + len);
    framedBodies.set(body, framed);
    return body;
  }
}

/**
 * The error for a tag body past FLV's 24-bit DataSize. Made here, not in a template at the throw: inlined in pushWire,
 * such a template had V8 turn the size into a string on every unit, ahead of the check (a NumberToString call a
 * unit in the optimised code, ~0.3 % of the gateway's samples at 750 terminals).
 */
export function dataSizeError(dataSize: number): RangeError {
  return new RangeError('FLV tag body of ' + String(dataSize) + ' bytes exceeds the 24-bit DataSize field');
}

export function writeTagHeader(out: Buffer, at: number, type: number, dataSize: number, timestamp: number): void {
  if (dataSize > 0xffffff) throw dataSizeError(dataSize);
  const ts = timestamp >>> 0;
  out[at] = type;
  // (by index, not writeUIntBE: a generic property load and its checks, three times a tag; byte-order.ts)
  writeU24BE(out, dataSize, at + 1);
  writeU24BE(out, ts & 0xffffff, at + 4);
  out[at + 7] = (ts >>> 24) & 0xff; // TimestampExtended
  writeU24BE(out, 0, at + 8); // StreamID
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
