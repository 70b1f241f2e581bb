/**
 * RTP and RTCP bytes as this plugin meets them: packets of the stream's RTP form copied out per session with the
 * session's payload type, sequence number and SSRC (RFC 3550 5.1), and the browser's packets read back: its RTCP
 * feedback (RFC 4585 PLI, RFC 5104 FIR) and, for talk, its audio RTP with header extensions skipped (RFC 8285).
 */

/** one packet's bytes, built here and copied by the library before send returns: one buffer for the process */
const scratch = Buffer.allocUnsafeSlow(2048);

/** Per session and track: the values the browser was told, and the running sequence number. */
export interface RtpRewrite {
  pt: number;
  ssrc: number;
  seq: number;
}

/**
 * The packet `head` (after its 4-byte interleaved prefix) and `body` in one buffer, with `r`'s payload type (the
 * marker bit kept), next sequence number and SSRC. The buffer is reused by the next call.
 */
export function sessionPacket(head: Buffer, body: Buffer | undefined, r: RtpRewrite): Buffer {
  const h = head.length - 4;
  const n = h + (body ? body.length : 0);
  const out = n <= scratch.length ? scratch : Buffer.allocUnsafe(n);
  head.copy(out, 0, 4);
  if (body) body.copy(out, h);
  out[1] = (out[1] & 0x80) | r.pt;
  out[2] = (r.seq >>> 8) & 0xff;
  out[3] = r.seq & 0xff;
  r.seq = (r.seq + 1) & 0xffff;
  out.writeUInt32BE(r.ssrc, 8);
  return out.subarray(0, n);
}

/** An RTP packet from `pt`, `seq`, `ts`, `ssrc` and a payload (talk's downlink audio). */
export function rtpPacket(pt: number, marker: boolean, seq: number, ts: number, ssrc: number, payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(12 + payload.length);
  out[0] = 0x80;
  out[1] = (marker ? 0x80 : 0) | pt;
  out.writeUInt16BE(seq & 0xffff, 2);
  out.writeUInt32BE(ts >>> 0, 4);
  out.writeUInt32BE(ssrc >>> 0, 8);
  payload.copy(out, 12);
  return out;
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
