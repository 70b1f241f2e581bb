/**
 * H.264 (RFC 6184: single NAL unit, STAP-A, FU-A) and H.265 (RFC 7798: single NAL unit, AP, FU) into Annex-B access
 * units. An access unit ends at the marker bit or where the timestamp changes (cameras that never set the marker
 * exist). Keyframes carry their parameter sets: when a camera sends them only in the SDP (sprop-*), or only once at
 * the start, the last known ones are put in front, where the track receiver reads them (tracks.ts) to announce the
 * track and its changes.
 */
import type { RtpPacket } from '../rtp';
import { START_CODE, type Depacketizer, type DepacketizerStats, type Frame } from './types';

interface Codec {
  /** bytes of the NAL unit header */
  headerBytes: number;
  typeOf(nal: Buffer): number;
  isKey(type: number): boolean;
  /** parameter-set slot of a NAL type: 0..2 (H.265 VPS, SPS, PPS; H.264 SPS, PPS), or -1 */
  psIndex(type: number): number;
  aggregate: number;
  fragment: number;
  /** other aggregation / fragmentation types we do not take (STAP-B, MTAP, FU-B; PACI) */
  unsupported(type: number): boolean;
  /** the NAL unit header rebuilt from a fragment's payload header and FU header */
  fuHeader(payload: Buffer): Buffer;
  /** FU header offset in the payload */
  fuHeaderAt: number;
}

const H264: Codec = {
  headerBytes: 1,
  typeOf: (n) => n[0] & 0x1f,
  isKey: (t) => t === 5,
  psIndex: (t) => (t === 7 ? 0 : t === 8 ? 1 : -1),
  aggregate: 24,
  fragment: 28,
  unsupported: (t) => t === 0 || t === 25 || t === 26 || t === 27 || t >= 29,
  fuHeader: (p) => Buffer.from([(p[0] & 0xe0) | (p[1] & 0x1f)]),
  fuHeaderAt: 1,
};

const H265: Codec = {
  headerBytes: 2,
  typeOf: (n) => (n[0] >> 1) & 0x3f,
  isKey: (t) => t >= 16 && t <= 21,
  psIndex: (t) => (t >= 32 && t <= 34 ? t - 32 : -1),
  aggregate: 48,
  fragment: 49,
  unsupported: (t) => t >= 50,
  fuHeader: (p) => Buffer.from([(p[0] & 0x81) | ((p[2] & 0x3f) << 1), p[1]]),
  fuHeaderAt: 2,
};

class VideoDepacketizer implements Depacketizer {
  readonly stats: DepacketizerStats = { malformed: 0, droppedFrames: 0 };
  private nals: Buffer[] = [];
  private bytes = 0;
  private ts: number | undefined;
  private fu: Buffer[] | undefined;
  /** the unit being assembled has a hole */
  private broken = false;
  /** after a dropped unit: decoders cannot use what follows until a keyframe */
  private waitKey = false;
  /** last known parameter sets by slot */
  private readonly ps: Array<Buffer | undefined> = [undefined, undefined, undefined];

  constructor(
    private readonly c: Codec,
    private readonly maxFrameBytes: number,
    private readonly donl: boolean,
    initial: ReadonlyArray<Buffer | undefined>,
  ) {
    initial.forEach((b, i) => {
      if (b && b.length > 0) this.ps[i] = b;
    });
  }

  push(p: RtpPacket, gap: boolean): Frame[] {
    const out: Frame[] = [];
    if (gap) {
      this.fu = undefined;
      if (this.nals.length > 0 || this.ts === p.timestamp) this.broken = true;
      else this.waitKey = true;
    }
    if (this.ts !== undefined && p.timestamp !== this.ts && (this.nals.length > 0 || this.broken)) this.flush(out);
    this.ts = p.timestamp;
    this.take(p.payload);
    if (p.marker) this.flush(out);
    return out;
  }

  private bad(): void {
    this.stats.malformed++;
    this.broken = true;
    this.fu = undefined;
  }

  private add(nal: Buffer): void {
    if (nal.length < this.c.headerBytes) return this.bad();
    this.bytes += nal.length + 4;
    if (this.bytes > this.maxFrameBytes) {
      this.broken = true;
      return;
    }
    if (!this.broken) this.nals.push(nal);
  }

  private take(pl: Buffer): void {
    const c = this.c;
    if (pl.length < c.headerBytes + 1) return this.bad();
    if (pl[0] & 0x80) return this.bad(); // forbidden_zero_bit
    const t = c.typeOf(pl);
    if (t === c.aggregate) {
      let off = c.headerBytes;
      let first = true;
      if (this.donl) off += 2;
      while (off < pl.length) {
        if (this.donl && !first) off += 1; // DOND
        if (off + 2 > pl.length) return this.bad();
        const size = pl.readUInt16BE(off);
        off += 2;
        if (size === 0 || off + size > pl.length) return this.bad();
        this.add(pl.subarray(off, off + size));
        off += size;
        first = false;
      }
      return;
    }
    if (t === c.fragment) {
      const fh = pl[c.fuHeaderAt];
      const start = (fh & 0x80) !== 0;
      const end = (fh & 0x40) !== 0;
      let dataAt = c.fuHeaderAt + 1;
      if (this.donl && start) dataAt += 2;
      if (pl.length <= dataAt || (start && end)) return this.bad();
      if (start) {
        if (this.fu) this.bad();
        this.fu = [c.fuHeader(pl), pl.subarray(dataAt)];
      } else if (!this.fu) {
        // a middle or end without its start: lost before, or joined mid-unit; nothing to complete
        this.broken = true;
        return;
      } else {
        this.fu.push(pl.subarray(dataAt));
      }
      if (end) {
        const nal = Buffer.concat(this.fu);
        this.fu = undefined;
        this.add(nal);
      }
      return;
    }
    if (c.unsupported(t)) return this.bad();
    if (this.donl) {
      if (pl.length < c.headerBytes + 3) return this.bad();
      this.add(Buffer.concat([pl.subarray(0, c.headerBytes), pl.subarray(c.headerBytes + 2)]));
      return;
    }
    this.add(pl);
  }

  private flush(out: Frame[]): void {
    const nals = this.nals;
    const broken = this.broken || this.fu !== undefined;
    const ts = this.ts!;
    this.nals = [];
    this.bytes = 0;
    this.broken = false;
    this.fu = undefined;
    if (nals.length === 0 && !broken) return;
    if (broken) {
      this.stats.droppedFrames++;
      this.waitKey = true;
      return;
    }
    let key = false;
    const seen = [false, false, false];
    for (const n of nals) {
      const t = this.c.typeOf(n);
      const i = this.c.psIndex(t);
      if (i >= 0) {
        seen[i] = true;
        if (!this.ps[i] || !this.ps[i]!.equals(n)) this.ps[i] = Buffer.from(n);
      } else if (this.c.isKey(t)) {
        key = true;
      }
    }
    if (this.waitKey && !key) {
      this.stats.droppedFrames++;
      return;
    }
    this.waitKey = false;
    const parts: Buffer[] = [];
    if (key) {
      // the known parameter sets the unit lacks go first, in their order (VPS, SPS, PPS)
      this.ps.forEach((b, i) => {
        if (b && !seen[i]) parts.push(START_CODE, b);
      });
    }
    for (const n of nals) parts.push(START_CODE, n);
    out.push({ payload: Buffer.concat(parts), timestamp: ts, keyframe: key, duration: 0 });
  }
}

function b64(s: string | undefined): Buffer | undefined {
  if (!s) return undefined;
  const b = Buffer.from(s.trim(), 'base64');
  return b.length > 0 ? b : undefined;
}

/** H.264; `sprop-parameter-sets` (SPS,PPS in base64) seeds the parameter sets */
export function h264Depacketizer(fmtp: Record<string, string>, maxFrameBytes: number): Depacketizer {
  const sets = (fmtp['sprop-parameter-sets'] ?? '').split(',').map(b64);
  let sps: Buffer | undefined;
  let pps: Buffer | undefined;
  for (const s of sets) {
    if (!s) continue;
    const t = s[0] & 0x1f;
    if (t === 7) sps ??= s;
    else if (t === 8) pps ??= s;
  }
  return new VideoDepacketizer(H264, maxFrameBytes, false, [sps, pps]);
}

/** H.265; `sprop-vps/sps/pps` seed the parameter sets; `sprop-max-don-diff` > 0 means DONL fields are present */
export function h265Depacketizer(fmtp: Record<string, string>, maxFrameBytes: number): Depacketizer {
  const donl = Number(fmtp['sprop-max-don-diff'] ?? 0) > 0;
  const first = (s: string | undefined) => b64((s ?? '').split(',')[0]);
  return new VideoDepacketizer(H265, maxFrameBytes, donl, [first(fmtp['sprop-vps']), first(fmtp['sprop-sps']), first(fmtp['sprop-pps'])]);
}
