/**
 * A unit's RTP packets as the bus keeps them (its form in the RTP format, see rtp-format.ts), made by packetizer.ts.
 *
 * A packet is kept as its small bytes (a 4-byte interleaved prefix, the 12-byte RTP header, the payload header or
 * an aggregation of small NAL units) and a range of the unit's own payload. Large NAL units are never copied: a
 * unit's RTP form lives as long as a reader's queue holds it, and a copy would double what a slow reader's queue
 * holds (the GOP cache keeps no forms: rtp-format.ts makes a joiner's again). Small parts of many units share 4 KiB
 * chunks (the same reasoning as flv-out's FlvFrame).
 */
import { copyBytes } from '../byte-views';

/** tracks of a presentation, in SDP order; also the default interleaved channel pair (2 x index) */
export const VIDEO = 0;
export const AUDIO = 1;
export type TrackIndex = typeof VIDEO | typeof AUDIO;

/** the interleaved frame's prefix in front of each packet: '$', channel, length (RFC 2326 10.12) */
export const PREFIX = 4;

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

  /** bytes of all its packets as interleaved frames: RTP bytes and a 4-byte prefix each */
  get wireBytes(): number {
    return this.rtpBytes + PREFIX * this.count;
  }

  /**
   * Copies its packets into `into` from `at` as forEach gives them, each head then its body (wireBytes of room): the
   * interleaved frames of this track's default channels, for one write. Returns where they end. No view is made for
   * a piece (copyBytes).
   */
  copyWire(into: Buffer, at: number): number {
    const mem = this.mem;
    let h = this.at;
    for (let i = 0, t = this.tableAt; i < this.count; i++, t += 12) {
      const len = mem.readUInt32LE(t);
      const from = mem.readUInt32LE(t + 4);
      const to = mem.readUInt32LE(t + 8);
      at += copyBytes(mem, h, h + len, into, at);
      if (to > from) at += copyBytes(this.payload, from, to, into, at);
      h += len;
    }
    return at;
  }
}
