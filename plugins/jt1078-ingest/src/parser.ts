/**
 * Incremental JT/T 1078 packet parser for a TCP byte stream (push) or UDP datagrams (pushDatagram).
 *
 * Two states:
 * - synced: the layout is known and the next byte starts a packet. Packets are decoded straight out of
 *   the incoming chunk (bodies are subarrays, no copy); only a packet that straddles two chunks is copied,
 *   into a buffer sized for exactly that packet.
 * - searching: at the start of a connection and after junk. A candidate header is accepted when the
 *   header that must follow its body also validates ("chained" validation). That is what tells the 2013
 *   layout from the 2019 one (a single header often validates both ways because BCD digits, channel and
 *   data type all look alike) and what rejects a truncated packet whose length field would swallow the
 *   packets behind it. The listening port's version is only the first guess. That check is in
 *   candidate-check.ts.
 *
 * In the synced state a packet is emitted as soon as its body is complete, without waiting for the next
 * header: confirming every packet would delay each frame's last packet by a whole frame interval. The cost
 * is that a packet truncated mid-stream can swallow up to its claimed length of what follows; the sequence
 * gap then drops the affected frame downstream and the stream recovers at the next I frame.
 */
import { BYTE_TOTAL_START } from '../../../plugin-sdk';
import { CandidateCheck, REJECT, WAIT } from './candidate-check';
import {
  blankPacket,
  DEFAULT_MAX_BODY,
  Jt1078Layout,
  Jt1078Packet,
  MAGIC,
  MAX_HEADER_LENGTH,
  PROBE_INVALID,
  PROBE_NEED_MORE,
  SimDecoder,
  decodePacket,
  probeHeader,
} from './packet';
import { Buffer } from 'node:buffer';

export interface ParserOptions {
  /** First guess for the layout (the listening port's version); detection overrides it. Default '2013'. */
  layout?: Jt1078Layout;
  /** Largest body accepted, bytes; default 65535 (anything a u16 can say). */
  maxBodyLength?: number;
  /**
   * The handler gets one packet object, refilled for every packet, valid only during the call (its body view too,
   * as always with a borrowed chunk). For a consumer that keeps nothing of a packet but copies (TCP ingest): at
   * ~140 packets a second per terminal, a new object each (and its timestamp, a boxed number) was a quarter of the
   * gateway's JavaScript allocation. Default false: a new object per packet, which a handler may keep.
   */
  reusePacket?: boolean;
}

export interface ParserStats {
  /** bytes pushed in */
  bytes: number;
  /** valid packets found, transparent ones included */
  packets: number;
  /** transparent-data packets (type 4), counted and skipped */
  transparent: number;
  /** times the parser found its way back to a valid packet after junk */
  resyncs: number;
  /** bytes skipped as junk (including a packet cut off by end()) */
  junkBytes: number;
  /** times a confirmed layout was replaced by the other one */
  layoutSwitches: number;
}

export type PacketHandler = (packet: Jt1078Packet) => void;

/**
 * A packet longer than this is emitted only once the header after it is seen. Subpackages are at most
 * 950 bytes by the standard, so a longer one is either a terminal that does not split frames (its big
 * packets wait for the next header, one frame interval) or a corrupted length field, which would
 * otherwise swallow up to 64 KiB of good packets behind it.
 */
const CONFIRM_ABOVE = 8192 + MAX_HEADER_LENGTH;

export class Jt1078Parser {
  readonly stats: ParserStats = { bytes: BYTE_TOTAL_START, packets: 0, transparent: 0, resyncs: 0, junkBytes: 0, layoutSwitches: 0 };

  private confirmed: Jt1078Layout | undefined;
  private readonly guess: Jt1078Layout;
  private readonly maxBody: number;
  private readonly sims = new SimDecoder();
  private readonly reused: Jt1078Packet | undefined;

  private synced = false;
  /** searching: bytes kept from earlier chunks (a candidate waiting for more, or a possible magic prefix) */
  private sbuf: Buffer | null = null;
  /** synced: a packet straddling chunks. carryTotal 0 while its header is still incomplete (bytes in hdr). */
  private carry: Buffer | null = null;
  private carryLen = 0;
  private carryTotal = 0;
  private readonly hdr = Buffer.alloc(MAX_HEADER_LENGTH);
  private lostSync = false;
  private episodeJunk = 0;
  /** searching: the chained check of a candidate header (candidate-check.ts); cand.layout is the accepted one's */
  private readonly cand: CandidateCheck;

  constructor(
    private readonly onPacket: PacketHandler,
    opts: ParserOptions = {},
  ) {
    this.guess = opts.layout ?? '2013';
    this.maxBody = opts.maxBodyLength ?? DEFAULT_MAX_BODY;
    this.cand = new CandidateCheck(this.maxBody);
    this.reused = opts.reusePacket ? blankPacket() : undefined;
  }

  /** The layout confirmed by the packets themselves, or undefined before the first packet. */
  get layout(): Jt1078Layout | undefined {
    return this.confirmed;
  }

  /** Bytes retained between calls (a straddling packet or a search window); bounded by one packet + one header. */
  get pendingBytes(): number {
    return (this.sbuf ? this.sbuf.length : 0) + (this.carry ? this.carry.length : this.carryLen);
  }

  /**
   * Feeds a piece of the TCP byte stream, split anywhere. The chunk is borrowed (it may be a socket's read buffer,
   * reused after this returns): what the parser keeps of it is copied, and packets' bodies, views of it, are valid
   * only during the handler call.
   */
  push(chunk: Buffer): void {
    this.stats.bytes += chunk.length;
    if (chunk.length === 0) return;
    let off = 0;
    if (this.synced && this.carryLen > 0) off = this.fillCarry(chunk);
    if (off >= chunk.length) return;
    if (!this.synced && this.sbuf) {
      const buf = Buffer.concat([this.sbuf, off > 0 ? chunk.subarray(off) : chunk]);
      this.sbuf = null;
      this.process(buf, 0, false);
    } else {
      this.process(chunk, off, false);
    }
  }

  /**
   * The stream ended (connection closed): a candidate that ends exactly at the end of the data is accepted,
   * an incomplete packet is counted as junk. The parser is then ready for a new stream (same layout).
   */
  end(): void {
    if (!this.synced && this.sbuf) {
      const b = this.sbuf;
      this.sbuf = null;
      this.process(b, 0, true);
    }
    if (this.carryLen > 0) this.stats.junkBytes += this.carryLen;
    this.carry = null;
    this.carryLen = 0;
    this.carryTotal = 0;
    this.sbuf = null;
    this.synced = false;
    this.lostSync = false;
    this.episodeJunk = 0;
  }

  /**
   * Feeds one UDP datagram holding one or more whole packets. Packets never straddle datagrams, so the
   * datagram's end confirms the last packet; this path leaves the stream state alone.
   */
  pushDatagram(d: Buffer): void {
    this.stats.bytes += d.length;
    const end = d.length;
    let off = 0;
    let junk = 0;
    while (off < end) {
      const L = this.confirmed;
      if (L !== undefined) {
        const r = probeHeader(d, off, end, L, this.maxBody);
        // Packets tile a datagram exactly: the packet ends the datagram or a valid header follows it.
        if (r > 0 && (off + r === end || (off + r < end && probeHeader(d, off + r, end, L, this.maxBody) > 0))) {
          off += r;
          this.emit(d, off - r, L, true);
          continue;
        }
      }
      const idx = d.indexOf(MAGIC, off);
      if (idx < 0) {
        junk += end - off;
        break;
      }
      junk += idx - off;
      const t = this.cand.check(d, idx, end, this.confirmed ?? this.guess, true);
      if (t > 0) {
        if (junk > 0) this.stats.resyncs++;
        this.stats.junkBytes += junk;
        junk = 0;
        this.acceptLayout(this.cand.layout);
        off = idx + t;
        this.emit(d, idx, this.cand.layout, true);
      } else {
        junk++;
        off = idx + 1;
      }
    }
    this.stats.junkBytes += junk;
  }

  /**
   * The stream state machine over buf from pos, as one loop (junk-heavy input must not recurse).
   * `final`: no more bytes will follow (end of stream).
   */
  private process(buf: Buffer, pos: number, final: boolean): void {
    const end = buf.length;
    while (pos < end) {
      if (this.synced) {
        const L = this.confirmed as Jt1078Layout;
        const r = probeHeader(buf, pos, end, L, this.maxBody);
        if (r > CONFIRM_ABOVE) {
          // Unusually long: confirm it by the header after it, like a candidate found while searching
          // (not a loss of sync, so not counted as a resync).
          this.synced = false;
          continue;
        }
        if (r > 0 && pos + r <= end) {
          // Advance before emitting: a throwing handler must not leave the offset behind.
          pos += r;
          this.emit(buf, pos - r, L);
          continue;
        }
        if (r !== PROBE_INVALID) {
          this.startCarry(buf, pos, r > 0 ? r : 0);
          return;
        }
        this.synced = false;
        this.lostSync = true;
        continue;
      }
      const idx = buf.indexOf(MAGIC, pos);
      if (idx < 0) {
        // Keep up to 3 bytes: they may be the start of a magic split across chunks.
        const keep = final ? 0 : Math.min(3, end - pos);
        this.addJunk(end - pos - keep);
        this.sbuf = keep > 0 ? Buffer.from(buf.subarray(end - keep)) : null;
        return;
      }
      this.addJunk(idx - pos);
      pos = idx;
      const t = this.cand.check(buf, pos, end, this.confirmed ?? this.guess, final);
      if (t === WAIT) {
        // copied: the chunk may be a borrowed read buffer (see push)
        this.sbuf = Buffer.from(buf.subarray(pos));
        return;
      }
      if (t === REJECT) {
        this.addJunk(1);
        pos++;
        continue;
      }
      if (this.lostSync || this.episodeJunk > 0) this.stats.resyncs++;
      this.lostSync = false;
      this.episodeJunk = 0;
      this.acceptLayout(this.cand.layout);
      this.synced = true;
      pos += t;
      this.emit(buf, pos - t, this.cand.layout);
    }
  }

  private startCarry(buf: Buffer, off: number, total: number): void {
    const n = buf.length - off;
    if (total > 0) {
      this.carry = Buffer.allocUnsafe(total);
      buf.copy(this.carry, 0, off);
      this.carryTotal = total;
    } else {
      buf.copy(this.hdr, 0, off);
      this.carry = null;
      this.carryTotal = 0;
    }
    this.carryLen = n;
  }

  /**
   * Continues a straddling packet with the new chunk; returns the bytes of chunk consumed. When the
   * completed header turns out to be junk, the carried bytes move to the search buffer, the parser
   * leaves the synced state and 0 is returned (the whole chunk still to be searched).
   */
  private fillCarry(chunk: Buffer): number {
    const L = this.confirmed as Jt1078Layout;
    if (this.carryTotal === 0) {
      const take = Math.min(MAX_HEADER_LENGTH - this.carryLen, chunk.length);
      chunk.copy(this.hdr, this.carryLen, 0, take);
      const r = probeHeader(this.hdr, 0, this.carryLen + take, L, this.maxBody);
      if (r === PROBE_NEED_MORE) {
        this.carryLen += take;
        return chunk.length;
      }
      if (r === PROBE_INVALID) {
        this.sbuf = Buffer.from(this.hdr.subarray(0, this.carryLen));
        this.carryLen = 0;
        this.synced = false;
        this.lostSync = true;
        return 0;
      }
      if (r > CONFIRM_ABOVE) {
        this.sbuf = Buffer.from(this.hdr.subarray(0, this.carryLen));
        this.carryLen = 0;
        this.synced = false;
        return 0;
      }
      this.carry = Buffer.allocUnsafe(r);
      this.hdr.copy(this.carry, 0, 0, this.carryLen);
      this.carryTotal = r;
    }
    const carry = this.carry as Buffer;
    const take = Math.min(this.carryTotal - this.carryLen, chunk.length);
    chunk.copy(carry, this.carryLen, 0, take);
    this.carryLen += take;
    if (this.carryLen === this.carryTotal) {
      this.carry = null;
      this.carryLen = 0;
      this.carryTotal = 0;
      this.emit(carry, 0, L);
    }
    return take;
  }

  private addJunk(n: number): void {
    this.stats.junkBytes += n;
    this.episodeJunk += n;
  }

  private acceptLayout(l: Jt1078Layout): void {
    if (this.confirmed !== l) {
      if (this.confirmed !== undefined) this.stats.layoutSwitches++;
      this.confirmed = l;
    }
  }

  /** `held`: the packet may be kept (a datagram's, which the UDP reorder buffer holds): never the reused object */
  private emit(buf: Buffer, off: number, L: Jt1078Layout, held = false): void {
    this.stats.packets++;
    const dataType = buf[off + (L === '2019' ? 19 : 15)] >> 4;
    if (dataType === 4) {
      // Transparent data (serial-port pass-through) is not media; counted only.
      this.stats.transparent++;
      return;
    }
    this.onPacket(decodePacket(buf, off, L, this.sims, held ? undefined : this.reused));
  }
}
