/**
 * RTP packetisation of access units: H.264 (RFC 6184: single NAL unit, STAP-A, FU-A), H.265 (RFC 7798: single,
 * AP, FU), G.711 (RFC 3551) and AAC (RFC 3640 mpeg4-generic, AAC-hbr).
 *
 * A packet is kept as its small bytes (a 4-byte interleaved prefix, the 12-byte RTP header, the payload header or
 * an aggregation of small NAL units) and a range of the unit's own payload. Large NAL units are never copied: the
 * bus keeps a unit's RTP form as long as the unit (GOP cache, readers' queues), and a copy would double what a GOP
 * holds. Small parts of many units share 4 KiB chunks (the same reasoning as flv-out's FlvFrame).
 */
import { splitAnnexB } from '../../../plugin-sdk/formats';

/** tracks of a presentation, in SDP order; also the default interleaved channel pair (2 x index) */
export const VIDEO = 0;
export const AUDIO = 1;
export type TrackIndex = typeof VIDEO | typeof AUDIO;

const RTP_HEADER = 12;
const PREFIX = 4;
/** NAL units up to this size may be copied into an aggregation packet (parameter sets, SEI, small slices) */
const AGGREGATE_MAX = 256;

/** A unit's RTP packets, shared by every reader of the stream in this format. */
export class RtpUnit {
  constructor(
    readonly track: TrackIndex,
    /** the chunk holding the small parts, then the table (3 x uint32 LE per packet: head length, payload from, to) */
    private readonly mem: Buffer,
    private readonly at: number,
    private readonly tableAt: number,
    readonly count: number,
    private readonly payload: Buffer,
    /** sequence number of the first packet */
    readonly firstSeq: number,
    /** RTP timestamp of the unit (of its first packet) */
    readonly timestamp: number,
    readonly ssrc: number,
    /** RTP bytes of all its packets (no interleaved prefixes) */
    readonly rtpBytes: number,
  ) {}

  /**
   * Each packet as `head` (4-byte interleaved prefix for this track's default channel, then the RTP header and any
   * payload header or aggregated NAL units) and `body` (a range of the unit's payload, or undefined). Views made now.
   */
  forEach(fn: (head: Buffer, body: Buffer | undefined) => void): void {
    let h = this.at;
    for (let i = 0, t = this.tableAt; i < this.count; i++, t += 12) {
      const len = this.mem.readUInt32LE(t);
      const from = this.mem.readUInt32LE(t + 4);
      const to = this.mem.readUInt32LE(t + 8);
      fn(this.mem.subarray(h, h + len), to > from ? this.payload.subarray(from, to) : undefined);
      h += len;
    }
  }
}

const CHUNK = 4096;

/** Small parts of many units in shared chunks: a form holds its chunk and offsets, not a view per piece. */
class FormMemory {
  private chunk = Buffer.allocUnsafeSlow(CHUNK);
  private used = 0;
  last = 0;

  take(n: number): Buffer {
    if (this.used + n > this.chunk.length) {
      this.chunk = Buffer.allocUnsafeSlow(Math.max(CHUNK, n));
      this.used = 0;
    }
    this.last = this.used;
    this.used += n;
    return this.chunk;
  }
}

/** Per track of an encoder: what RFC 3550 says must be random, and the running sequence number. */
export interface RtpTrackState {
  readonly ssrc: number;
  seq: number;
  readonly tsOffset: number;
}

/**
 * Builds one unit's packets in a scratch buffer, then copies the small parts into shared memory. One per encoder
 * (one per stream), reused for every unit.
 */
export class Packetizer {
  private scratch = Buffer.allocUnsafe(16 * 1024);
  private len = 0;
  // the unit being built: 3 numbers a packet in `table`, one in `tsDelta`; emptied by their counts, since
  // `length = 0` makes V8 drop an array's backing store (a new one to grow for every unit)
  private table: number[] = [];
  private tableLen = 0;
  private tsDelta: number[] = [];
  private packets = 0;
  private readonly mem = new FormMemory();
  private readonly maxPayload: number;

  /** @param mtu the largest RTP packet (header included) */
  constructor(mtu: number) {
    this.maxPayload = mtu - RTP_HEADER;
  }

  h264(payload: Buffer, track: TrackIndex, pt: number, ts: number, st: RtpTrackState): RtpUnit | undefined {
    this.begin();
    const nals = splitAnnexB(payload).filter((n) => n.length > 0 && (n[0] & 0x1f) !== 9); // access unit delimiters mean nothing in RTP
    for (let i = 0; i < nals.length;) {
      const group = this.aggregateRun(nals, i, 1);
      if (group > 1) {
        let nri = 0;
        let f = 0;
        for (let k = i; k < i + group; k++) {
          nri = Math.max(nri, nals[k][0] & 0x60);
          f |= nals[k][0] & 0x80;
        }
        this.aggregate(nals, i, group, Buffer.from([f | nri | 24]));
        i += group;
        continue;
      }
      const nal = nals[i++];
      const at = nal.byteOffset - payload.byteOffset;
      if (nal.length <= this.maxPayload) {
        this.single(at, at + nal.length);
        continue;
      }
      // FU-A: the NAL header becomes the FU indicator and header; fragments carry the rest
      const indicator = (nal[0] & 0xe0) | 28;
      const type = nal[0] & 0x1f;
      const step = this.maxPayload - 2;
      for (let pos = 1; pos < nal.length; pos += step) {
        const n = Math.min(step, nal.length - pos);
        const o = this.open(2);
        this.scratch[o] = indicator;
        this.scratch[o + 1] = (pos === 1 ? 0x80 : 0) | (pos + n === nal.length ? 0x40 : 0) | type;
        this.close(o + 2, at + pos, at + pos + n);
      }
    }
    return this.finish(track, pt, ts, st, true, payload);
  }

  h265(payload: Buffer, track: TrackIndex, pt: number, ts: number, st: RtpTrackState): RtpUnit | undefined {
    this.begin();
    const nals = splitAnnexB(payload).filter((n) => n.length > 2 && ((n[0] >> 1) & 0x3f) !== 35); // no AUDs
    for (let i = 0; i < nals.length;) {
      const group = this.aggregateRun(nals, i, 2);
      if (group > 1) {
        // AP payload header: F is the OR, LayerId and TID the lowest of the aggregated units (RFC 7798 4.4.2)
        let f = 0;
        let layer = 63;
        let tid = 7;
        for (let k = i; k < i + group; k++) {
          const n = nals[k];
          f |= n[0] & 0x80;
          layer = Math.min(layer, ((n[0] & 1) << 5) | (n[1] >> 3));
          tid = Math.min(tid, n[1] & 7);
        }
        this.aggregate(nals, i, group, Buffer.from([f | (48 << 1) | (layer >> 5), ((layer & 0x1f) << 3) | tid]));
        i += group;
        continue;
      }
      const nal = nals[i++];
      const at = nal.byteOffset - payload.byteOffset;
      if (nal.length <= this.maxPayload) {
        this.single(at, at + nal.length);
        continue;
      }
      const h0 = (nal[0] & 0x81) | (49 << 1);
      const h1 = nal[1];
      const type = (nal[0] >> 1) & 0x3f;
      const step = this.maxPayload - 3;
      for (let pos = 2; pos < nal.length; pos += step) {
        const n = Math.min(step, nal.length - pos);
        const o = this.open(3);
        this.scratch[o] = h0;
        this.scratch[o + 1] = h1;
        this.scratch[o + 2] = (pos === 2 ? 0x80 : 0) | (pos + n === nal.length ? 0x40 : 0) | type;
        this.close(o + 3, at + pos, at + pos + n);
      }
    }
    return this.finish(track, pt, ts, st, true, payload);
  }

  /** G.711 code words as received; a unit over the MTU is split, each part timed by its first sample. */
  g711(payload: Buffer, track: TrackIndex, pt: number, ts: number, st: RtpTrackState, channels: number): RtpUnit | undefined {
    this.begin();
    const step = this.maxPayload - (this.maxPayload % Math.max(1, channels));
    for (let pos = 0; pos < payload.length; pos += step) {
      const o = this.open(0);
      this.close(o, pos, Math.min(payload.length, pos + step));
      this.tsDelta[this.packets - 1] = pos / Math.max(1, channels);
    }
    // RFC 3551 4.1: the marker flags the start of a talkspurt, which a continuous source does not have
    return this.finish(track, pt, ts, st, false, payload);
  }

  /** One raw AAC frame with its AU header (AU-size 13 bits, AU-index 3); fragmented over the MTU (RFC 3640 3.2.3). */
  aac(payload: Buffer, track: TrackIndex, pt: number, ts: number, st: RtpTrackState): RtpUnit | undefined {
    if (payload.length === 0 || payload.length >= 1 << 13) return undefined;
    this.begin();
    const step = this.maxPayload - 4;
    for (let pos = 0; pos < payload.length; pos += step) {
      const o = this.open(4);
      this.scratch.writeUInt16BE(16, o); // AU-headers-length in bits
      this.scratch.writeUInt16BE(payload.length << 3, o + 2); // a fragment names the whole AU's size
      this.close(o + 4, pos, Math.min(payload.length, pos + step));
    }
    return this.finish(track, pt, ts, st, true, payload);
  }

  // --- building -----------------------------------------------------------------------------------------------

  private begin(): void {
    this.len = 0;
    this.tableLen = 0;
    this.packets = 0;
  }

  /** How many NAL units from i fit in one aggregation packet (1: aggregate nothing). */
  private aggregateRun(nals: Buffer[], i: number, headerBytes: number): number {
    let total = headerBytes;
    let k = i;
    while (k < nals.length && nals[k].length <= AGGREGATE_MAX && total + 2 + nals[k].length <= this.maxPayload) {
      total += 2 + nals[k].length;
      k++;
    }
    return k - i;
  }

  private aggregate(nals: Buffer[], i: number, count: number, header: Buffer): void {
    let size = header.length;
    for (let k = i; k < i + count; k++) size += 2 + nals[k].length;
    let o = this.open(size);
    header.copy(this.scratch, o);
    o += header.length;
    for (let k = i; k < i + count; k++) {
      this.scratch.writeUInt16BE(nals[k].length, o);
      nals[k].copy(this.scratch, o + 2);
      o += 2 + nals[k].length;
    }
    this.close(o, 0, 0);
  }

  private single(from: number, to: number): void {
    this.close(this.open(0), from, to);
  }

  /** Room for a packet's prefix, RTP header and `extra` bytes; returns where the extra bytes go. */
  private open(extra: number): number {
    const need = this.len + PREFIX + RTP_HEADER + extra;
    if (need > this.scratch.length) {
      const bigger = Buffer.allocUnsafe(Math.max(need, this.scratch.length * 2));
      this.scratch.copy(bigger, 0, 0, this.len);
      this.scratch = bigger;
    }
    this.table[this.tableLen++] = this.len;
    this.tsDelta[this.packets++] = 0;
    return this.len + PREFIX + RTP_HEADER;
  }

  private close(headEnd: number, from: number, to: number): void {
    const start = this.table[this.tableLen - 1];
    this.table[this.tableLen - 1] = headEnd - start;
    this.table[this.tableLen++] = from;
    this.table[this.tableLen++] = to;
    this.len = headEnd;
  }

  /** Writes prefixes and RTP headers (numbering the packets), then copies the unit's small parts into shared memory. */
  private finish(track: TrackIndex, pt: number, ts: number, st: RtpTrackState, markLast: boolean, payload: Buffer): RtpUnit | undefined {
    const count = this.tableLen / 3;
    if (count === 0) return undefined;
    const s = this.scratch;
    const firstSeq = st.seq;
    let at = 0;
    let rtpBytes = 0;
    for (let i = 0; i < count; i++) {
      const headLen = this.table[3 * i];
      const bodyLen = this.table[3 * i + 2] - this.table[3 * i + 1];
      const rtpLen = headLen - PREFIX + bodyLen;
      rtpBytes += rtpLen;
      s[at] = 0x24;
      s[at + 1] = track * 2;
      s.writeUInt16BE(rtpLen, at + 2);
      s[at + 4] = 0x80; // V=2, no padding, no extension, no CSRC
      s[at + 5] = (markLast && i === count - 1 ? 0x80 : 0) | pt;
      s.writeUInt16BE(st.seq, at + 6);
      st.seq = (st.seq + 1) & 0xffff;
      s.writeUInt32BE((ts + this.tsDelta[i]) >>> 0, at + 8);
      s.writeUInt32BE(st.ssrc, at + 12);
      at += headLen;
    }
    const buf = this.mem.take(this.len + 12 * count);
    const base = this.mem.last;
    s.copy(buf, base, 0, this.len);
    const tableAt = base + this.len;
    for (let i = 0; i < this.tableLen; i++) buf.writeUInt32LE(this.table[i], tableAt + 4 * i);
    return new RtpUnit(track, buf, base, tableAt, count, payload, firstSeq, ts >>> 0, st.ssrc, rtpBytes);
  }
}
