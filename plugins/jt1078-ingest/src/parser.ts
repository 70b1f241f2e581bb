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
 *   packets behind it. The listening port's version is only the first guess.
 *
 * In the synced state a packet is emitted as soon as its body is complete, without waiting for the next
 * header: confirming every packet would delay each frame's last packet by a whole frame interval. The cost
 * is that a packet truncated mid-stream can swallow up to its claimed length of what follows; the sequence
 * gap then drops the affected frame downstream and the stream recovers at the next I frame.
 */
import {
  DEFAULT_MAX_BODY, Jt1078Layout, Jt1078Packet, MAGIC, MAX_HEADER_LENGTH, PROBE_INVALID, PROBE_NEED_MORE,
  SimDecoder, decodePacket, otherLayout, probeHeader,
} from './packet';

export interface ParserOptions {
  /** First guess for the layout (the listening port's version); detection overrides it. Default '2013'. */
  layout?: Jt1078Layout;
  /** Largest body accepted, bytes; default 65535 (anything a u16 can say). */
  maxBodyLength?: number;
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

const WAIT = -1;
const REJECT = -2;

export class Jt1078Parser {
  readonly stats: ParserStats = { bytes: 0, packets: 0, transparent: 0, resyncs: 0, junkBytes: 0, layoutSwitches: 0 };

  private confirmed: Jt1078Layout | undefined;
  private readonly guess: Jt1078Layout;
  private readonly maxBody: number;
  private readonly sims = new SimDecoder();

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
  /** layout of the candidate tryCandidate accepted */
  private candLayout: Jt1078Layout = '2013';

  constructor(private readonly onPacket: PacketHandler, opts: ParserOptions = {}) {
    this.guess = opts.layout ?? '2013';
    this.maxBody = opts.maxBodyLength ?? DEFAULT_MAX_BODY;
  }

  /** The layout confirmed by the packets themselves, or undefined before the first packet. */
  get layout(): Jt1078Layout | undefined {
    return this.confirmed;
  }

  /** Bytes retained between calls (a straddling packet or a search window); bounded by one packet + one header. */
  get pendingBytes(): number {
    return (this.sbuf ? this.sbuf.length : 0) + (this.carry ? this.carry.length : this.carryLen);
  }

  /** Feeds a piece of the TCP byte stream, split anywhere. */
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
        if (r > 0 && off + r <= end) {
          off += r;
          this.emit(d, off - r, L);
          continue;
        }
      }
      const idx = d.indexOf(MAGIC, off);
      if (idx < 0) {
        junk += end - off;
        break;
      }
      junk += idx - off;
      const t = this.tryCandidate(d, idx, end, true);
      if (t > 0) {
        if (junk > 0) this.stats.resyncs++;
        this.stats.junkBytes += junk;
        junk = 0;
        this.acceptLayout(this.candLayout);
        off = idx + t;
        this.emit(d, idx, this.candLayout);
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
      const t = this.tryCandidate(buf, pos, end, final);
      if (t === WAIT) {
        // Copy when the kept part is small next to the buffer, so a large chunk is not pinned by a tail.
        const rest = buf.subarray(pos);
        this.sbuf = rest.length * 2 < buf.length ? Buffer.from(rest) : rest;
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
      this.acceptLayout(this.candLayout);
      this.synced = true;
      pos += t;
      this.emit(buf, pos - t, this.candLayout);
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

  /**
   * Decides on a candidate header at pos (a magic is there). Returns its packet length (and sets
   * candLayout), WAIT when more bytes are needed to decide, or REJECT.
   * `final` means no more bytes will follow buf (datagram end, stream end).
   */
  private tryCandidate(buf: Buffer, pos: number, end: number, final: boolean): number {
    const pref = this.confirmed ?? this.guess;
    let fallback = 0;
    for (let i = 0; i < 2; i++) {
      const L = i === 0 ? pref : otherLayout(pref);
      const r = probeHeader(buf, pos, end, L, this.maxBody);
      if (r === PROBE_INVALID) continue;
      if (r === PROBE_NEED_MORE) {
        if (final) continue;
        return WAIT;
      }
      const next = pos + r;
      if (next > end) {
        if (final) continue;
        return WAIT;
      }
      if (next === end) {
        if (final) {
          this.candLayout = L;
          return r;
        }
        return WAIT;
      }
      const q = probeHeader(buf, next, end, L, this.maxBody);
      if (q > 0) {
        this.candLayout = L;
        return r;
      }
      if (q === PROBE_NEED_MORE && !final) return WAIT;
      // The header after this body is junk. Either this packet is whole and junk follows it, or it was
      // cut short and a real packet starts inside what its length field claims. A magic inside the claimed
      // span tells the second case; without one, the preferred layout's packet is kept.
      if (i === 0 && buf.subarray(pos + 4, next).indexOf(MAGIC) < 0) fallback = r;
    }
    if (fallback > 0) {
      this.candLayout = pref;
      return fallback;
    }
    return REJECT;
  }

  private emit(buf: Buffer, off: number, L: Jt1078Layout): void {
    this.stats.packets++;
    const dataType = buf[off + (L === '2019' ? 19 : 15)] >> 4;
    if (dataType === 4) {
      // Transparent data (serial-port pass-through) is not media; counted only.
      this.stats.transparent++;
      return;
    }
    this.onPacket(decodePacket(buf, off, L, this.sims));
  }
}
