/** RTP (RFC 3550) packet headers and the one RTCP message pulling uses: the sender report's clock pair. */

export interface RtpPacket {
  payloadType: number;
  marker: boolean;
  seq: number;
  timestamp: number;
  ssrc: number;
  /** a view of the input (no copy) */
  payload: Buffer;
}

/** undefined when the bytes are not an RTP packet (version, lengths, padding, extension out of bounds) */
export function parseRtp(b: Buffer): RtpPacket | undefined {
  if (b.length < 12 || b[0] >> 6 !== 2) return undefined;
  const cc = b[0] & 0x0f;
  let off = 12 + cc * 4;
  if (off > b.length) return undefined;
  if (b[0] & 0x10) {
    if (off + 4 > b.length) return undefined;
    off += 4 + b.readUInt16BE(off + 2) * 4;
    if (off > b.length) return undefined;
  }
  let end = b.length;
  if (b[0] & 0x20) {
    const pad = b[b.length - 1];
    if (pad === 0 || end - pad < off) return undefined;
    end -= pad;
  }
  return {
    payloadType: b[1] & 0x7f,
    marker: (b[1] & 0x80) !== 0,
    seq: b.readUInt16BE(2),
    timestamp: b.readUInt32BE(4),
    ssrc: b.readUInt32BE(8),
    payload: b.subarray(off, end),
  };
}

export interface SenderReport {
  ssrc: number;
  /** the NTP time of the report, as ms since the Unix epoch */
  epochMs: number;
  /** the RTP timestamp of the same instant */
  rtpTimestamp: number;
}

/** seconds from 1900 (NTP) to 1970 (Unix) */
const NTP_UNIX_OFFSET = 2_208_988_800;

/**
 * The sender report of a compound RTCP packet, if it has one. `bad` is true when the bytes are not RTCP at all
 * (counted by the caller as malformed).
 */
export function parseRtcpSr(b: Buffer): { sr?: SenderReport; bad: boolean } {
  let off = 0;
  if (b.length < 4) return { bad: true };
  while (off + 4 <= b.length) {
    if (b[off] >> 6 !== 2) return { bad: true };
    const pt = b[off + 1];
    const len = (b.readUInt16BE(off + 2) + 1) * 4;
    if (off + len > b.length) return { bad: true };
    if (pt === 200 && len >= 28) {
      const ntpSec = b.readUInt32BE(off + 8);
      const ntpFrac = b.readUInt32BE(off + 12);
      // an NTP time of 0 means the sender has no wall clock (RFC 3550 §6.4.1)
      if (ntpSec === 0 && ntpFrac === 0) return { bad: false };
      return {
        bad: false,
        sr: { ssrc: b.readUInt32BE(off + 4), epochMs: (ntpSec - NTP_UNIX_OFFSET) * 1000 + (ntpFrac / 2 ** 32) * 1000, rtpTimestamp: b.readUInt32BE(off + 16) },
      };
    }
    off += len;
  }
  return { bad: false };
}

/**
 * Extends 32-bit RTP timestamps (they wrap every 13 h at 90 kHz, every 6 days at 8 kHz) to a continuous count: a
 * step of under half the range either way is taken as the shortest way round.
 */
export class TimestampUnwrapper {
  private last: number | undefined;
  private ext = 0;
  unwrap(ts: number): number {
    if (this.last === undefined) {
      this.last = ts;
      this.ext = ts;
      return ts;
    }
    let d = ts - this.last;
    if (d > 0x7fffffff) d -= 0x1_0000_0000;
    else if (d < -0x80000000) d += 0x1_0000_0000;
    this.last = ts;
    this.ext += d;
    return this.ext;
  }
  /** the extended value of a timestamp near the last one, without moving on (for sender reports) */
  peek(ts: number): number | undefined {
    if (this.last === undefined) return undefined;
    let d = ts - this.last;
    if (d > 0x7fffffff) d -= 0x1_0000_0000;
    else if (d < -0x80000000) d += 0x1_0000_0000;
    return this.ext + d;
  }
}
