/**
 * The parser's searching-state decision: is the magic at pos the start of a real packet, and in which
 * layout? (See parser.ts for the two states.) A candidate header is accepted when the header that must
 * follow its body also validates ("chained" validation), which tells the 2013 layout from the 2019 one
 * and rejects a truncated packet whose length field would swallow the packets behind it.
 *
 * Separate from parser.ts because it is a self-contained judgement over a byte range: it reads no parser
 * state but the preferred layout and the body limit, and runs only while searching (per candidate magic,
 * not per packet of a synced stream). The parser holds one instance for its lifetime, so the check
 * allocates nothing; its results come back in fields, not in an object per call.
 */
import { Jt1078Layout, MAGIC, PROBE_INVALID, PROBE_NEED_MORE, otherLayout, probeHeader } from './packet';

/** check(): more bytes are needed to decide */
export const WAIT = -1;
/** check(): not a packet start */
export const REJECT = -2;
/** packets followed ahead when telling the layouts apart */
const CHAIN_DEPTH = 8;
/** bytes worth waiting for when both layouts read the data so far equally well */
const MAX_TIE_WAIT = 16384;

export class CandidateCheck {
  /** layout of the candidate check() accepted */
  layout: Jt1078Layout = '2013';
  private walkOk = false;
  private walkLen = 0;
  /** the walk stopped because the bytes ran out, not at a bad header */
  private walkCut = false;

  constructor(private readonly maxBody: number) {}

  /**
   * Decides on a candidate header at pos (a magic is there). Returns its packet length (and sets
   * layout), WAIT when more bytes are needed to decide, or REJECT.
   * `pref`: the layout tried first (the current layout, else the port's guess).
   * `final` means no more bytes will follow buf (datagram end, stream end).
   *
   * Both layouts are followed along the chain of headers as far as the buffered bytes allow (up to
   * CHAIN_DEPTH packets) and the longer valid chain wins. That matters: a 2019 audio header and a 2013
   * video header are both 30 bytes with the length at the same offset, and a typical zero-padded 2019
   * SIM reads as a valid 2013 channel and data type, so a run of 2019 audio packets chains perfectly as
   * 2013; the first video packet breaks that reading. While the reading that is not ahead could still
   * catch up (its chain stopped where the bytes ran out), the decision waits for more (up to MAX_TIE_WAIT
   * bytes); a tie after that goes to the port's guess (or
   * the current layout), and a wrong pick is corrected by the first packet that breaks it.
   */
  check(buf: Buffer, pos: number, end: number, pref: Jt1078Layout, final: boolean): number {
    const r1 = this.walk(buf, pos, end, pref, final);
    const ok1 = this.walkOk;
    const len1 = this.walkLen;
    const cut1 = this.walkCut;
    const other = otherLayout(pref);
    const r2 = this.walk(buf, pos, end, other, final);
    const ok2 = r2 > 0 && this.walkOk;
    if (r1 === WAIT) {
      // The preferred reading claims more bytes than are here (a misread length can claim up to 64 KiB);
      // rather than wait for them, take the other reading when it already chains over several packets.
      if (ok2 && this.walkLen >= 3) {
        this.layout = other;
        return r2;
      }
      return WAIT;
    }
    if (ok1 && ok2 && !final && end - pos < MAX_TIE_WAIT && ((len1 <= this.walkLen && cut1) || (this.walkLen <= len1 && this.walkCut))) {
      // Both readings hold, and the one not ahead only stopped because the bytes ran out (header sizes
      // differ, so the chains end at different places): a few more packets settle it.
      return WAIT;
    }
    if (ok1 && (!ok2 || len1 >= this.walkLen)) {
      this.layout = pref;
      return r1;
    }
    if (ok2) {
      this.layout = other;
      return r2;
    }
    if (r2 === WAIT) return WAIT;
    // The header after this body is junk. Either this packet is whole and junk follows it, or it was
    // cut short and a real packet starts inside what its length field claims. A magic inside the claimed
    // span tells the second case; without one, the preferred layout's packet is kept.
    if (r1 > 0 && buf.subarray(pos + 4, pos + r1).indexOf(MAGIC) < 0) {
      this.layout = pref;
      return r1;
    }
    return REJECT;
  }

  /**
   * Follows the chain of headers from pos in one layout. Returns the first packet's length, WAIT or
   * REJECT; sets walkOk (the first packet is confirmed by a valid header after it, or by the end of a
   * final buffer) and walkLen (valid headers found along the chain).
   */
  private walk(buf: Buffer, pos: number, end: number, L: Jt1078Layout, final: boolean): number {
    this.walkOk = false;
    this.walkLen = 0;
    this.walkCut = false;
    const r = probeHeader(buf, pos, end, L, this.maxBody);
    if (r === PROBE_INVALID) return REJECT;
    if (r === PROBE_NEED_MORE || pos + r > end) return final ? REJECT : WAIT;
    let n = 1;
    let p = pos + r;
    while (n < CHAIN_DEPTH) {
      if (p === end) {
        if (final) this.walkOk = true;
        else if (n === 1) return WAIT;
        else this.walkCut = true;
        break;
      }
      const q = probeHeader(buf, p, end, L, this.maxBody);
      if (q === PROBE_NEED_MORE) {
        if (n === 1 && !final) return WAIT;
        this.walkCut = !final;
        break;
      }
      if (q === PROBE_INVALID) break;
      this.walkOk = true;
      n++;
      if (p + q > end) {
        this.walkCut = !final;
        break;
      }
      p += q;
    }
    this.walkLen = n;
    return r;
  }
}
