/**
 * RTP and RTCP bytes as this plugin meets them: packets of the stream's RTP form made whole once a unit, then given
 * each session's payload type, sequence number and SSRC (RFC 3550 5.1), and the browser's packets read back: its RTCP
 * feedback (RFC 4585 PLI, RFC 5104 FIR) and, for talk, its audio RTP with header extensions skipped (RFC 8285).
 */
import type { RtpUnit } from '../../../plugin-sdk/rtp';

/** Per session and track: the values the browser was told, and the running sequence number. */
export interface RtpRewrite {
  pt: number;
  ssrc: number;
  seq: number;
}

/** A unit's RTP packets whole, each a view into one buffer: made once for every session of the stream. */
export interface SessionPackets {
  readonly unit: RtpUnit;
  readonly packets: readonly Buffer[];
  readonly bytes: number;
}

let last: SessionPackets | undefined;
/** where the last unit's packets are made: reused for the next unit, so making them allocates nothing but views */
let store = Buffer.allocUnsafeSlow(64 * 1024);

/**
 * The unit's packets as whole packets (the stream form keeps small heads apart from ranges of the payload, with a
 * 4-byte interleaved prefix). The bus hands a unit to all of a stream's readers in one pass, so one slot serves
 * them all: the unit is copied out once, not once a session, and a reader behind (a late joiner's GOP) makes its own.
 * The packets live in one store that the next unit's overwrite: use them before making another unit's.
 */
export function packetsOf(unit: RtpUnit): SessionPackets {
  if (last?.unit === unit) return last;
  let n = 0;
  unit.forEach((head, body) => {
    n += head.length - 4 + (body ? body.length : 0);
  });
  if (n > store.length) store = Buffer.allocUnsafeSlow(Math.max(n, store.length * 2));
  const buf = store;
  const packets: Buffer[] = [];
  let at = 0;
  unit.forEach((head, body) => {
    const from = at;
    at += head.copy(buf, at, 4);
    if (body) at += body.copy(buf, at);
    packets.push(buf.subarray(from, at));
  });
  last = { unit, packets, bytes: n };
  return last;
}

/**
 * The session's payload type (the marker bit kept), next sequence number and SSRC (RFC 3550 5.1) written into a
 * shared packet, in place: the library copies a packet before its send returns, so the next session rewrites the
 * same bytes for itself.
 */
export function rewrite(p: Buffer, r: RtpRewrite): void {
  p[1] = (p[1] & 0x80) | r.pt;
  p[2] = (r.seq >>> 8) & 0xff;
  p[3] = r.seq & 0xff;
  r.seq = (r.seq + 1) & 0xffff;
  p[8] = r.ssrc >>> 24;
  p[9] = (r.ssrc >>> 16) & 0xff;
  p[10] = (r.ssrc >>> 8) & 0xff;
  p[11] = r.ssrc & 0xff;
}

/** RTCP packet types 192..223 share RTP's second byte: that is how RFC 5761 demultiplexes them on one port */
export function isRtcp(p: Buffer): boolean {
  return p.length >= 8 && p[1] >= 192 && p[1] <= 223;
}

/** how many key-frame requests (PLI, FIR) a compound RTCP packet holds */
export function keyFrameRequests(p: Buffer): number {
  let n = 0;
  for (let at = 0; at + 4 <= p.length;) {
    const fmt = p[at] & 0x1f;
    const pt = p[at + 1];
    const len = (p.readUInt16BE(at + 2) + 1) * 4;
    if (pt === 206 && (fmt === 1 || fmt === 4)) n++;
    if (len <= 0) break;
    at += len;
  }
  return n;
}

/** the payload type and payload of an RTP packet, or undefined for what is not one */
export function rtpPayload(p: Buffer): { pt: number; seq: number; ts: number; payload: Buffer } | undefined {
  if (p.length < 12 || p[0] >> 6 !== 2 || isRtcp(p)) return undefined;
  let at = 12 + (p[0] & 0x0f) * 4;
  if (p[0] & 0x10) {
    if (at + 4 > p.length) return undefined;
    at += 4 + p.readUInt16BE(at + 2) * 4;
  }
  let end = p.length;
  if (p[0] & 0x20) end -= p[p.length - 1];
  if (at > end) return undefined;
  return { pt: p[1] & 0x7f, seq: p.readUInt16BE(2), ts: p.readUInt32BE(4), payload: p.subarray(at, end) };
}
