/**
 * RTP packetisation of access units: H.264 (RFC 6184: single NAL unit, STAP-A, FU-A), H.265 (RFC 7798: single,
 * AP, FU), G.711 (RFC 3551) and AAC (RFC 3640 mpeg4-generic, AAC-hbr), into the RtpUnit forms of rtp-unit.ts.
 */
import type { AccessUnit } from '../media';
import { NAL_FLAG, NalUnits } from '../formats/nal-index';
import { PREFIX, RtpUnit, type TrackIndex } from './rtp-unit';

const RTP_HEADER = 12;
/** NAL units up to this size may be copied into an aggregation packet (parameter sets, SEI, small slices) */
const AGGREGATE_MAX = 256;

const CHUNK = 4096;
const NO_BYTES = Buffer.alloc(0);

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
  /** reads a unit's NAL index */
  private readonly nals = new NalUnits();
  // the NAL units of the unit being built: [srcFrom, srcTo) of srcBuf (the payload, or a track's parameter set),
  // emptied by their count like the table
  private srcBuf: Buffer[] = [];
  private srcFrom: number[] = [];
  private srcTo: number[] = [];
  private srcN = 0;
  private payload: Buffer = NO_BYTES;

  /** @param mtu the largest RTP packet (header included) */
  constructor(mtu: number) {
    this.maxPayload = mtu - RTP_HEADER;
  }

  /**
   * An H.264 unit's packets, its NAL units read from its index; a key frame without an SPS of its own gets the
   * track's `paramSets` (SPS, PPS) first, so a client that reads them in-band rather than from the SDP has them.
   */
  h264(unit: AccessUnit, paramSets: readonly Buffer[] | undefined, track: TrackIndex, pt: number, ts: number, st: RtpTrackState): RtpUnit | undefined {
    this.begin();
    this.sources(unit, paramSets, false);
    for (let i = 0; i < this.srcN;) {
      const group = this.aggregateRun(i, 1);
      if (group > 1) {
        let nri = 0;
        let f = 0;
        for (let k = i; k < i + group; k++) {
          const h = this.srcBuf[k]![this.srcFrom[k]!]!;
          nri = Math.max(nri, h & 0x60);
          f |= h & 0x80;
        }
        this.aggregate(i, group, f | nri | 24, -1);
        i += group;
        continue;
      }
      const k = i++;
      const nal = this.srcBuf[k];
      const from = this.srcFrom[k];
      const to = this.srcTo[k];
      if (to - from <= this.maxPayload) {
        this.single(k);
        continue;
      }
      // FU-A: the NAL header becomes the FU indicator and header; fragments carry the rest
      const indicator = (nal[from] & 0xe0) | 28;
      const type = nal[from] & 0x1f;
      const step = this.maxPayload - 2;
      for (let pos = from + 1; pos < to; pos += step) {
        const n = Math.min(step, to - pos);
        const o = this.open(2);
        this.scratch[o] = indicator;
        this.scratch[o + 1] = (pos === from + 1 ? 0x80 : 0) | (pos + n === to ? 0x40 : 0) | type;
        this.fragment(k, o + 2, pos, pos + n);
      }
    }
    this.letGo();
    return this.finish(track, pt, ts, st, true, unit.payload);
  }

  /** An H.265 unit's packets, as h264 does them (RFC 7798); the track's `paramSets` are VPS, SPS, PPS. */
  h265(unit: AccessUnit, paramSets: readonly Buffer[] | undefined, track: TrackIndex, pt: number, ts: number, st: RtpTrackState): RtpUnit | undefined {
    this.begin();
    this.sources(unit, paramSets, true);
    for (let i = 0; i < this.srcN;) {
      const group = this.aggregateRun(i, 2);
      if (group > 1) {
        // AP payload header: F is the OR, LayerId and TID the lowest of the aggregated units (RFC 7798 4.4.2)
        let f = 0;
        let layer = 63;
        let tid = 7;
        for (let k = i; k < i + group; k++) {
          const b = this.srcBuf[k]!;
          const h0 = b[this.srcFrom[k]!]!;
          const h1 = b[this.srcFrom[k]! + 1]!;
          f |= h0 & 0x80;
          layer = Math.min(layer, ((h0 & 1) << 5) | (h1 >> 3));
          tid = Math.min(tid, h1 & 7);
        }
        this.aggregate(i, group, f | (48 << 1) | (layer >> 5), ((layer & 0x1f) << 3) | tid);
        i += group;
        continue;
      }
      const k = i++;
      const nal = this.srcBuf[k];
      const from = this.srcFrom[k];
      const to = this.srcTo[k];
      if (to - from <= this.maxPayload) {
        this.single(k);
        continue;
      }
      const h0 = (nal[from] & 0x81) | (49 << 1);
      const h1 = nal[from + 1];
      const type = (nal[from] >> 1) & 0x3f;
      const step = this.maxPayload - 3;
      for (let pos = from + 2; pos < to; pos += step) {
        const n = Math.min(step, to - pos);
        const o = this.open(3);
        this.scratch[o] = h0;
        this.scratch[o + 1] = h1;
        this.scratch[o + 2] = (pos === from + 2 ? 0x80 : 0) | (pos + n === to ? 0x40 : 0) | type;
        this.fragment(k, o + 3, pos, pos + n);
      }
    }
    this.letGo();
    return this.finish(track, pt, ts, st, true, unit.payload);
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

  /**
   * The NAL units to send, in order: the track's parameter sets when a key frame has no SPS of its own, then the
   * unit's NAL units from its index, without access unit delimiters (they mean nothing in RTP; H.265 ones shorter
   * than their 2-byte header are left out too).
   */
  private sources(unit: AccessUnit, paramSets: readonly Buffer[] | undefined, hevc: boolean): void {
    this.srcN = 0;
    const r = this.nals;
    const n = r.of(unit);
    if (paramSets !== undefined && unit.keyframe && !(r.flags & NAL_FLAG.SPS)) for (const ps of paramSets) this.source(ps, 0, ps.length);
    const payload = unit.payload;
    for (let i = 0; i < n; i++) {
      const from = r.start(i);
      const to = r.end(i);
      if (hevc ? to - from > 2 && ((payload[from] >> 1) & 0x3f) !== 35 : (payload[from] & 0x1f) !== 9) this.source(payload, from, to);
    }
    this.payload = payload;
  }

  /** The unit's buffers are not kept past its packets. */
  private letGo(): void {
    for (let k = 0; k < this.srcN; k++) this.srcBuf[k] = NO_BYTES;
    this.payload = NO_BYTES;
  }

  private source(buf: Buffer, from: number, to: number): void {
    const k = this.srcN++;
    this.srcBuf[k] = buf;
    this.srcFrom[k] = from;
    this.srcTo[k] = to;
  }

  /** How many NAL units from i fit in one aggregation packet (1: aggregate nothing). */
  private aggregateRun(i: number, headerBytes: number): number {
    let total = headerBytes;
    let k = i;
    while (k < this.srcN) {
      const len = this.srcTo[k] - this.srcFrom[k];
      if (len > AGGREGATE_MAX || total + 2 + len > this.maxPayload) break;
      total += 2 + len;
      k++;
    }
    return k - i;
  }

  /** An aggregation packet (STAP-A: one header byte h0; AP: two, h1 >= 0) of `count` NAL units from i, copied. */
  private aggregate(i: number, count: number, h0: number, h1: number): void {
    const header = h1 < 0 ? 1 : 2;
    let size = header;
    for (let k = i; k < i + count; k++) size += 2 + this.srcTo[k] - this.srcFrom[k];
    let o = this.open(size);
    this.scratch[o++] = h0;
    if (h1 >= 0) this.scratch[o++] = h1;
    for (let k = i; k < i + count; k++) {
      const len = this.srcTo[k] - this.srcFrom[k];
      this.scratch.writeUInt16BE(len, o);
      this.srcBuf[k].copy(this.scratch, o + 2, this.srcFrom[k], this.srcTo[k]);
      o += 2 + len;
    }
    this.close(o, 0, 0);
  }

  /** NAL unit k in a packet of its own: a range of the payload, or (a track's parameter set) copied. */
  private single(k: number): void {
    this.fragment(k, this.open(0), this.srcFrom[k], this.srcTo[k]);
  }

  /** Bytes [from, to) of NAL unit k as a packet's body after its head (which ends at headEnd). */
  private fragment(k: number, headEnd: number, from: number, to: number): void {
    if (this.srcBuf[k] === this.payload) {
      this.close(headEnd, from, to);
      return;
    }
    headEnd = this.grow(headEnd, to - from);
    this.srcBuf[k].copy(this.scratch, headEnd, from, to);
    this.close(headEnd + to - from, 0, 0);
  }

  /** Room for `extra` bytes more at the end of the packet being built (its head ends at headEnd). */
  private grow(headEnd: number, extra: number): number {
    const need = headEnd + extra;
    if (need > this.scratch.length) {
      const bigger = Buffer.allocUnsafe(Math.max(need, this.scratch.length * 2));
      this.scratch.copy(bigger, 0, 0, headEnd);
      this.scratch = bigger;
    }
    return headEnd;
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
