/**
 * A unit's media tag as one chunked RTMP message, made with one copy. The FLV muxer's wire form (`pushWire`) lays
 * the tag out as ranges of small parts and of the unit's own payload (its large NAL units); the message is the tag's
 * body under a type-0 chunk header, with a one-byte type-3 header (plus the extended timestamp past 2^24-1 ms) every
 * CHUNK_SIZE bytes. Copying the ranges straight into the message spares what `push` then `chunksCreate` cost per
 * unit: a tag body laid out, then copied again into a zero-filled buffer (test/bench rtmp-players: 2.6 s more
 * garbage collection per minute at 200 streams).
 *
 * Messages are carved from 256 KiB blocks shared by every stream of the process: a form lives as long as a player's
 * queue holds it (the GOP cache keeps units, not forms), so a block all streams fill dies young, and one
 * ArrayBuffer stands for dozens of messages.
 */
import type { WireUnit } from '../../../plugin-sdk/formats';
import { TAG_HEADER_SIZE, PREV_SIZE_SIZE } from '../../../plugin-sdk/formats';

/** the chunk size every connection announces (NMS's RTMP_MAX_CHUNK_SIZE, which its chunksCreate uses too) */
export const CHUNK_SIZE = 0xffff;
const EXTENDED = 0xffffff;
const BLOCK = 256 * 1024;

class MessageMemory {
  private block = Buffer.allocUnsafeSlow(BLOCK);
  private at = 0;

  take(n: number): Buffer {
    if (n > BLOCK / 4) return Buffer.allocUnsafeSlow(n);
    if (this.at + n > this.block.length) {
      this.block = Buffer.allocUnsafeSlow(BLOCK);
      this.at = 0;
    }
    const b = this.block.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }
}

const MEMORY = new MessageMemory();

/**
 * The message of a wire unit's one media tag on chunk stream `cid` (< 64) and message stream `streamId`; undefined
 * when the unit holds several tags (ADTS input): the caller frames those one by one.
 */
export function wireMessage(w: WireUnit, cid: number, streamId: number): Buffer | undefined {
  if (w.mediaTags !== 1) return undefined;
  const bodyLen = w.mediaBytes - TAG_HEADER_SIZE - PREV_SIZE_SIZE;
  const ts = w.timestamp;
  const ext = ts >= EXTENDED ? 4 : 0;
  const continuations = bodyLen > 0 ? Math.floor((bodyLen - 1) / CHUNK_SIZE) : 0;
  const out = MEMORY.take(12 + ext + bodyLen + continuations * (1 + ext));
  out[0] = cid;
  out.writeUIntBE(ext ? EXTENDED : ts, 1, 3);
  out.writeUIntBE(bodyLen, 4, 3);
  out[7] = w.mediaType;
  out.writeUInt32LE(streamId, 8);
  let at = 12;
  if (ext) at = out.writeUInt32BE(ts, at);
  // the body is the wire bytes from TAG_HEADER_SIZE to bodyLen more, cut every CHUNK_SIZE bytes by a type-3 header
  let skip = TAG_HEADER_SIZE;
  let left = bodyLen;
  let room = CHUNK_SIZE;
  const r = w.ranges;
  for (let i = 0; i < r.length && left > 0; i += 2) {
    const src = (i & 2) === 0 ? w.mem : w.payload;
    let from = r[i];
    const to = r[i + 1];
    if (skip > 0) {
      const s = Math.min(skip, to - from);
      from += s;
      skip -= s;
    }
    while (from < to && left > 0) {
      if (room === 0) {
        out[at++] = 0xc0 | cid;
        if (ext) at = out.writeUInt32BE(ts, at);
        room = CHUNK_SIZE;
      }
      const n = Math.min(to - from, room, left);
      at += src.copy(out, at, from, from + n);
      from += n;
      room -= n;
      left -= n;
    }
  }
  return out;
}
