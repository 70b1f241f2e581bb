/**
 * RTCP packets a sender makes (RFC 3550 6.4.1, 6.5, 6.6): sender reports with SDES CNAME, and BYE. A sender report
 * maps an RTP timestamp to wall-clock (NTP) time; clients use the two tracks' reports to line audio up with video.
 */

/** seconds from 1900-01-01 (NTP era 0) to 1970-01-01 */
export const NTP_UNIX_OFFSET = 2_208_988_800;

/** An epoch time in ms as the 64-bit NTP timestamp (seconds, fraction of 2^32). */
export function ntpOf(epochMs: number): { sec: number; frac: number } {
  const whole = Math.floor(epochMs / 1000);
  const frac = Math.floor(((epochMs - whole * 1000) / 1000) * 2 ** 32);
  return { sec: (whole + NTP_UNIX_OFFSET) >>> 0, frac: Math.min(frac, 2 ** 32 - 1) >>> 0 };
}

/** The epoch time (ms) of an NTP timestamp (era 0: until 2036). */
export function epochMsOfNtp(sec: number, frac: number): number {
  return (sec - NTP_UNIX_OFFSET) * 1000 + (frac / 2 ** 32) * 1000;
}

/** SDES with one CNAME chunk, padded to 32 bits. */
function sdes(ssrc: number, cname: string): Buffer {
  const text = Buffer.from(cname.slice(0, 255), 'utf8').subarray(0, 255);
  // chunk: SSRC, CNAME item (type, length, text), at least one null octet ending the list, padded to 4
  const chunk = 4 + 2 + text.length + 1;
  const padded = (chunk + 3) & ~3;
  const b = Buffer.alloc(4 + padded);
  b[0] = 0x81; // V=2, SC=1
  b[1] = 202;
  b.writeUInt16BE(b.length / 4 - 1, 2);
  b.writeUInt32BE(ssrc >>> 0, 4);
  b[8] = 1; // CNAME
  b[9] = text.length;
  text.copy(b, 10);
  return b;
}

export interface SenderReport {
  ssrc: number;
  /** wall-clock time (epoch ms) of the instant `rtpTime` stands for */
  epochMs: number;
  rtpTime: number;
  packets: number;
  octets: number;
  cname: string;
}

/** A compound packet: SR (no report blocks: this sender receives nothing) then SDES CNAME. */
export function senderReport(r: SenderReport): Buffer {
  const sr = Buffer.alloc(28);
  sr[0] = 0x80;
  sr[1] = 200;
  sr.writeUInt16BE(6, 2);
  sr.writeUInt32BE(r.ssrc >>> 0, 4);
  const ntp = ntpOf(r.epochMs);
  sr.writeUInt32BE(ntp.sec, 8);
  sr.writeUInt32BE(ntp.frac, 12);
  sr.writeUInt32BE(r.rtpTime >>> 0, 16);
  sr.writeUInt32BE(r.packets >>> 0, 20);
  sr.writeUInt32BE(r.octets >>> 0, 24);
  return Buffer.concat([sr, sdes(r.ssrc, r.cname)]);
}

/** A compound packet ending a source: an empty RR (a compound starts with SR or RR), then BYE. */
export function bye(ssrc: number): Buffer {
  const b = Buffer.alloc(16);
  b[0] = 0x80;
  b[1] = 201;
  b.writeUInt16BE(1, 2);
  b.writeUInt32BE(ssrc >>> 0, 4);
  b[8] = 0x81; // V=2, SC=1
  b[9] = 203;
  b.writeUInt16BE(1, 10);
  b.writeUInt32BE(ssrc >>> 0, 12);
  return b;
}

/** RTCP packet types in a compound packet (for tests and for recognising a client's reports). */
export function rtcpPacketTypes(buf: Buffer): number[] {
  const out: number[] = [];
  for (let at = 0; at + 4 <= buf.length;) {
    if (buf[at] >> 6 !== 2) break;
    out.push(buf[at + 1]);
    at += (buf.readUInt16BE(at + 2) + 1) * 4;
  }
  return out;
}
