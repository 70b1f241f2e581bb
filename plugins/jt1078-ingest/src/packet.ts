/**
 * JT/T 1078 stream packet: header layout, validation and decoding.
 *
 * Layout (big endian), 2013/2016 edition; the 2019 edition differs only in a 10-byte SIM:
 *   0  4  frame header 0x30 0x31 0x63 0x64 ("01cd")
 *   4  1  V(2)=2 P(1) X(1) CC(4)
 *   5  1  M(1) PT(7)
 *   6  2  sequence number
 *   8  6  SIM, BCD (2019: 10 bytes)
 *  14  1  logical channel
 *  15  1  data type (high nibble) | subpackage mark (low nibble)
 *  16  8  timestamp, ms                      -- absent for transparent data (type 4)
 *  24  2  last I frame interval, ms          -- video (types 0..2) only
 *  26  2  last frame interval, ms            -- video only
 *  28  2  body length
 *  30     body
 */

// packet.ts is part of the router, which the primary loads alone: the router entry point, not the whole SDK
import { normaliseSim, readU16BE, readU32BE } from '../../../plugin-sdk/router';
import { Buffer } from 'node:buffer';
export type Jt1078Layout = '2013' | '2019';

export const DATA_TYPE = { VIDEO_I: 0, VIDEO_P: 1, VIDEO_B: 2, AUDIO: 3, TRANSPARENT: 4 } as const;
export const SUB_MARK = { ATOMIC: 0, FIRST: 1, LAST: 2, MIDDLE: 3 } as const;

export interface Jt1078Packet {
  layout: Jt1078Layout;
  /** SIM as decimal digits, normalised (leading zeros stripped) */
  sim: string;
  channel: number;
  /** payload type (JT/T 1078 table 12) */
  pt: number;
  /** M bit: set on the last (or only) packet of a frame */
  marker: boolean;
  seq: number;
  /** 0 I, 1 P, 2 B, 3 audio, 4 transparent */
  dataType: number;
  /** 0 atomic, 1 first, 2 last, 3 middle */
  subMark: number;
  /** device timestamp, ms (0 for transparent data, which has none) */
  timestamp: number;
  /** video only, else 0; garbage on some terminals, so nothing here relies on them */
  lastIFrameInterval: number;
  lastFrameInterval: number;
  /**
   * the payload, also `wire` from `bodyAt` to `bodyEnd`. A packet the parser fills again and again (TCP) has
   * WIRE_BODY here instead of a view of its own: making that view for every packet was ~2 % of the main thread at 500
   * terminals (a typed array allocated, a write barrier for storing a young object in the old packet, and the
   * scavenge), and the reassembler copies straight from `wire` then. Any other `body` is the payload, whatever `wire`
   * says: a packet copied with another body (`{ ...p, body }`) is read as it reads.
   */
  body: Buffer;
  /** the bytes the packet was decoded from (the payload itself for a packet made in code) */
  wire: Buffer;
  bodyAt: number;
  bodyEnd: number;
}

/** The payload as a Buffer of its own (a view of `wire` for a packet decoded into a reused one). */
export function bodyOf(p: Jt1078Packet): Buffer {
  return p.body === WIRE_BODY ? p.wire.subarray(p.bodyAt, p.bodyEnd) : p.body;
}

export const MAGIC = Buffer.from([0x30, 0x31, 0x63, 0x64]);
const MAGIC_U32 = 0x30316364;

/** Subpackages are at most 950 bytes by the standard, but real terminals send more; a u16 caps it anyway. */
export const DEFAULT_MAX_BODY = 0xffff;

export function simBytes(layout: Jt1078Layout): number {
  return layout === '2019' ? 10 : 6;
}

/** Header length for a layout and data type (fixed part + timestamp + intervals + body length). */
export function headerLength(layout: Jt1078Layout, dataType: number): number {
  let n = layout === '2019' ? 20 : 16;
  if (dataType !== DATA_TYPE.TRANSPARENT) n += 8;
  if (dataType <= DATA_TYPE.VIDEO_B) n += 4;
  return n + 2;
}

/** The largest header of any kind: 2019 video. */
export const MAX_HEADER_LENGTH = 34;

/** probeHeader results below zero */
export const PROBE_NEED_MORE = -1;
export const PROBE_INVALID = -2;

/**
 * Validates the header at buf[off..end) for one layout without allocating.
 * Returns the whole packet's length (header + body; the body may not be in the buffer yet),
 * PROBE_NEED_MORE when the bytes present are consistent but the header is incomplete,
 * or PROBE_INVALID.
 */
export function probeHeader(buf: Buffer, off: number, end: number, layout: Jt1078Layout, maxBody: number = DEFAULT_MAX_BODY): number {
  const avail = end - off;
  if (avail < 5) {
    // Reject early on a mismatching prefix so junk is skipped without waiting for more bytes.
    for (let i = 0; i < avail; i++) if (buf[off + i] !== MAGIC[i]) return PROBE_INVALID;
    return PROBE_NEED_MORE;
  }
  if (readU32BE(buf, off) !== MAGIC_U32) return PROBE_INVALID;
  if ((buf[off + 4] & 0xc0) !== 0x80) return PROBE_INVALID; // RTP version 2
  const simLen = layout === '2019' ? 10 : 6;
  const fixed = 10 + simLen; // up to and including the data-type byte
  // BCD digits checked as far as they are present
  const simEnd = Math.min(off + 8 + simLen, end);
  for (let i = off + 8; i < simEnd; i++) {
    const b = buf[i];
    if ((b & 0x0f) > 9 || b >> 4 > 9) return PROBE_INVALID;
  }
  if (avail < fixed) return PROBE_NEED_MORE;
  if (buf[off + 8 + simLen] === 0) return PROBE_INVALID; // logical channel 0 is not a channel
  const tb = buf[off + 9 + simLen];
  const dataType = tb >> 4;
  if (dataType > 4 || (tb & 0x0f) > 3) return PROBE_INVALID;
  let h = fixed;
  if (dataType !== 4) h += 8;
  if (dataType <= 2) h += 4;
  if (avail < h + 2) return PROBE_NEED_MORE;
  const bodyLen = readU16BE(buf, off + h);
  if (bodyLen > maxBody) return PROBE_INVALID;
  return h + 2 + bodyLen;
}

/** Reads the 8-byte timestamp as a number (exact below 2^53, which every real clock is). */
function readU64(buf: Buffer, off: number): number {
  return readU32BE(buf, off) * 0x100000000 + readU32BE(buf, off + 4);
}

/**
 * Decodes the SIM's BCD digits, reusing the previous string while the bytes repeat: a connection carries
 * one terminal, so this turns a per-packet string build into a byte comparison.
 */
export class SimDecoder {
  // The last SIM's bytes as numbers on this object, not in a Buffer of its own: that Buffer's memory was one more
  // cache line to fetch for every packet (at 1,000 terminals every stream's state is out of the cache by its turn).
  private w0 = 0;
  private w1 = 0;
  private w2 = 0;
  private rawLen = 0;
  private last = '';

  decode(buf: Buffer, off: number, len: number): string {
    // 6 bytes (2013) or 10 (2019), as three 32-bit words (the third 0 for 6)
    const w0 = readU32BE(buf, off);
    const long = len === 10;
    const w1 = long ? readU32BE(buf, off + 4) : readU16BE(buf, off + 4);
    const w2 = long ? readU16BE(buf, off + 8) : 0;
    if (len === this.rawLen && w0 === this.w0 && w1 === this.w1 && w2 === this.w2) return this.last;
    let s = '';
    for (let i = 0; i < len; i++) {
      const b = buf[off + i];
      s += String.fromCharCode(48 + (b >> 4), 48 + (b & 0x0f));
    }
    this.w0 = w0;
    this.w1 = w1;
    this.w2 = w2;
    this.rawLen = len;
    this.last = normaliseSim(s);
    return this.last;
  }
}

const NO_BODY = Buffer.alloc(0);
/** `body` of a packet decoded into a reused one: its payload is `wire` from `bodyAt` to `bodyEnd` (see Jt1078Packet.body) */
export const WIRE_BODY = Buffer.alloc(0);

/** A packet for decodePacket to fill again and again (see ParserOptions.reusePacket). */
export function blankPacket(): Jt1078Packet {
  return {
    layout: '2013',
    sim: '',
    channel: 0,
    pt: 0,
    marker: false,
    seq: 0,
    dataType: 0,
    subMark: 0,
    timestamp: 0,
    lastIFrameInterval: 0,
    lastFrameInterval: 0,
    body: WIRE_BODY,
    wire: NO_BODY,
    bodyAt: 0,
    bodyEnd: 0,
  };
}

/**
 * Decodes a packet whose header probeHeader accepted and whose bytes are all present: into `into` when given (its
 * fields overwritten but `body`, WIRE_BODY: see Jt1078Packet.body), else a new object whose body is a subarray of buf.
 */
export function decodePacket(buf: Buffer, off: number, layout: Jt1078Layout, sims: SimDecoder, into?: Jt1078Packet): Jt1078Packet {
  const simLen = layout === '2019' ? 10 : 6;
  const b5 = buf[off + 5];
  let p = off + 8 + simLen;
  const channel = buf[p++];
  const tb = buf[p++];
  const dataType = tb >> 4;
  let timestamp = 0;
  let lastIFrameInterval = 0;
  let lastFrameInterval = 0;
  if (dataType !== 4) {
    timestamp = readU64(buf, p);
    p += 8;
  }
  if (dataType <= 2) {
    lastIFrameInterval = readU16BE(buf, p);
    lastFrameInterval = readU16BE(buf, p + 2);
    p += 4;
  }
  const bodyLen = readU16BE(buf, p);
  p += 2;
  const out = into ?? blankPacket();
  out.layout = layout;
  out.sim = sims.decode(buf, off + 8, simLen);
  out.channel = channel;
  out.pt = b5 & 0x7f;
  out.marker = (b5 & 0x80) !== 0;
  out.seq = readU16BE(buf, off + 6);
  out.dataType = dataType;
  out.subMark = tb & 0x0f;
  out.timestamp = timestamp;
  out.lastIFrameInterval = lastIFrameInterval;
  out.lastFrameInterval = lastFrameInterval;
  // a read's packets share its Buffer: stored once a read, since a young view stored into the reused (old) packet takes
  // the write barrier's slow path every time, though the slot already holds it
  if (out.wire !== buf) out.wire = buf;
  out.bodyAt = p;
  out.bodyEnd = p + bodyLen;
  if (into === undefined) out.body = buf.subarray(p, p + bodyLen);
  return out;
}

export function otherLayout(l: Jt1078Layout): Jt1078Layout {
  return l === '2013' ? '2019' : '2013';
}

export type PacketKind = 'video' | 'audio' | 'data';

export function kindOfDataType(dataType: number): PacketKind {
  return dataType <= 2 ? 'video' : dataType === 3 ? 'audio' : 'data';
}
