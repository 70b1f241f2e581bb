/**
 * Builds JT/T 1078 packets (either layout): single packets from fields, and whole frames split into
 * subpackages. Used by the terminal simulator, by tests, and for intercom audio sent to terminals.
 */
import { DATA_TYPE, Jt1078Layout, SUB_MARK, headerLength, simBytes } from './packet';
import { Buffer } from 'node:buffer';

/** The standard's subpackage limit. */
export const DEFAULT_MAX_SUBPACKAGE = 950;

export interface PacketFields {
  layout: Jt1078Layout;
  /** decimal digits; padded with leading zeros to 12 (2013) or 20 (2019) */
  sim: string;
  channel: number;
  pt: number;
  marker: boolean;
  seq: number;
  dataType: number;
  subMark: number;
  /** ms; ignored for transparent data */
  timestamp: number;
  lastIFrameInterval?: number;
  lastFrameInterval?: number;
}

/** The SIM as BCD bytes for a layout; throws on non-digits or too many digits. */
export function encodeSim(sim: string, layout: Jt1078Layout): Buffer {
  const n = simBytes(layout);
  if (!/^[0-9]+$/.test(sim)) throw new Error(`SIM must be decimal digits, got '${sim}'`);
  if (sim.length > n * 2) throw new Error(`SIM '${sim}' has more than ${n * 2} digits (${layout} layout)`);
  const s = sim.padStart(n * 2, '0');
  const out = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) out[i] = ((s.charCodeAt(2 * i) - 48) << 4) | (s.charCodeAt(2 * i + 1) - 48);
  return out;
}

function checkFields(f: PacketFields, bodyLength: number): void {
  if (!Number.isInteger(f.channel) || f.channel < 1 || f.channel > 255) throw new Error(`channel must be 1..255, got ${f.channel}`);
  if (!Number.isInteger(f.pt) || f.pt < 0 || f.pt > 127) throw new Error(`payload type must be 0..127, got ${f.pt}`);
  if (!Number.isInteger(f.dataType) || f.dataType < 0 || f.dataType > 4) throw new Error(`data type must be 0..4, got ${f.dataType}`);
  if (!Number.isInteger(f.subMark) || f.subMark < 0 || f.subMark > 3) throw new Error(`subpackage mark must be 0..3, got ${f.subMark}`);
  if (bodyLength > 0xffff) throw new Error(`body of ${bodyLength} bytes does not fit a packet (max 65535)`);
  if (f.dataType !== DATA_TYPE.TRANSPARENT && !(f.timestamp >= 0 && Number.isSafeInteger(f.timestamp))) {
    throw new Error(`timestamp must be a non-negative integer, got ${f.timestamp}`);
  }
}

/**
 * Writes a header at out[off]; returns its length. simBcd must come from encodeSim for the same layout
 * (passed in so a caller sending many packets encodes it once).
 */
export function writeHeader(out: Buffer, off: number, f: PacketFields, simBcd: Buffer, bodyLength: number): number {
  checkFields(f, bodyLength);
  out[off] = 0x30;
  out[off + 1] = 0x31;
  out[off + 2] = 0x63;
  out[off + 3] = 0x64;
  out[off + 4] = 0x81; // V=2, no padding, no extension, CC=1 (what terminals send)
  out[off + 5] = (f.marker ? 0x80 : 0) | f.pt;
  out.writeUInt16BE(f.seq & 0xffff, off + 6);
  simBcd.copy(out, off + 8);
  let p = off + 8 + simBcd.length;
  out[p++] = f.channel;
  out[p++] = (f.dataType << 4) | f.subMark;
  if (f.dataType !== DATA_TYPE.TRANSPARENT) {
    out.writeUInt32BE(Math.floor(f.timestamp / 0x100000000), p);
    out.writeUInt32BE(f.timestamp % 0x100000000, p + 4);
    p += 8;
  }
  if (f.dataType <= DATA_TYPE.VIDEO_B) {
    out.writeUInt16BE((f.lastIFrameInterval ?? 0) & 0xffff, p);
    out.writeUInt16BE((f.lastFrameInterval ?? 0) & 0xffff, p + 2);
    p += 4;
  }
  out.writeUInt16BE(bodyLength, p);
  return p + 2 - off;
}

export function encodeHeader(f: PacketFields, bodyLength: number, simBcd = encodeSim(f.sim, f.layout)): Buffer {
  const out = Buffer.allocUnsafe(headerLength(f.layout, f.dataType));
  writeHeader(out, 0, f, simBcd, bodyLength);
  return out;
}

/** One whole packet (header and body in one buffer). */
export function encodePacket(f: PacketFields, body: Buffer, simBcd = encodeSim(f.sim, f.layout)): Buffer {
  const h = headerLength(f.layout, f.dataType);
  const out = Buffer.allocUnsafe(h + body.length);
  writeHeader(out, 0, f, simBcd, body.length);
  body.copy(out, h);
  return out;
}

export interface PackerOptions {
  layout: Jt1078Layout;
  sim: string;
  channel: number;
  /** largest body per packet; default 950 (the standard's limit) */
  maxBodySize?: number;
  /** first sequence number; default 0 */
  firstSeq?: number;
}

export interface FrameToPack {
  /** 0 I, 1 P, 2 B, 3 audio, 4 transparent */
  dataType: number;
  pt: number;
  timestamp: number;
  payload: Buffer;
  lastIFrameInterval?: number;
  lastFrameInterval?: number;
}

/**
 * Packs frames for one channel of one terminal. One sequence counter for all kinds, as most terminals do.
 */
export class Jt1078Packer {
  readonly layout: Jt1078Layout;
  readonly sim: string;
  readonly channel: number;
  private readonly simBcd: Buffer;
  private readonly maxBody: number;
  private nextSeq: number;

  constructor(opts: PackerOptions) {
    this.layout = opts.layout;
    this.sim = opts.sim;
    this.channel = opts.channel;
    this.simBcd = encodeSim(opts.sim, opts.layout);
    this.maxBody = opts.maxBodySize ?? DEFAULT_MAX_SUBPACKAGE;
    if (!(this.maxBody >= 1 && this.maxBody <= 0xffff)) throw new Error(`maxBodySize must be 1..65535, got ${this.maxBody}`);
    this.nextSeq = (opts.firstSeq ?? 0) & 0xffff;
  }

  /** The sequence number the next packet gets. */
  get seq(): number {
    return this.nextSeq;
  }

  /** Continues from another counter (a link numbers its downlink packets across channels with one). */
  set seq(n: number) {
    this.nextSeq = n & 0xffff;
  }

  /**
   * Splits a frame into packets: one atomic packet when it fits, else first / middle... / last, with the
   * M bit on the last (or only) one. Each returned buffer is one whole packet (one UDP datagram).
   */
  packFrame(frame: FrameToPack): Buffer[] {
    const len = frame.payload.length;
    const n = Math.max(1, Math.ceil(len / this.maxBody));
    const out = new Array<Buffer>(n);
    const h = headerLength(this.layout, frame.dataType);
    const f: PacketFields = {
      layout: this.layout,
      sim: this.sim,
      channel: this.channel,
      pt: frame.pt,
      marker: false,
      seq: 0,
      dataType: frame.dataType,
      subMark: 0,
      timestamp: frame.timestamp,
      lastIFrameInterval: frame.lastIFrameInterval,
      lastFrameInterval: frame.lastFrameInterval,
    };
    for (let i = 0; i < n; i++) {
      const start = i * this.maxBody;
      const end = Math.min(len, start + this.maxBody);
      f.subMark = n === 1 ? SUB_MARK.ATOMIC : i === 0 ? SUB_MARK.FIRST : i === n - 1 ? SUB_MARK.LAST : SUB_MARK.MIDDLE;
      f.marker = i === n - 1;
      f.seq = this.nextSeq;
      this.nextSeq = (this.nextSeq + 1) & 0xffff;
      const pkt = Buffer.allocUnsafe(h + end - start);
      writeHeader(pkt, 0, f, this.simBcd, end - start);
      frame.payload.copy(pkt, h, start, end);
      out[i] = pkt;
    }
    return out;
  }
}
