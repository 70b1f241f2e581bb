/**
 * Audio payloads: AAC as RFC 3640 (mpeg4-generic, AAC-hbr and AAC-lbr: AU headers, several frames per packet, or
 * one frame in fragments), and G.711 (RFC 3551 PCMA/PCMU: the payload is the samples, one unit per packet).
 */
import type { RtpPacket } from '../rtp';
import type { Depacketizer, DepacketizerStats, Frame } from './types';

/** AAC sample rates by samplingFrequencyIndex (ISO 14496-3 1.6.3.4) */
const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export interface AacConfig {
  config: Buffer;
  sampleRate: number;
  channels: number;
  frameSamples: number;
}

/** The AudioSpecificConfig of `config=` (hex), or undefined when it is missing or makes no sense. */
export function parseAacConfig(hex: string | undefined): AacConfig | undefined {
  if (!hex || !/^[0-9a-fA-F]+$/.test(hex) || hex.length % 2 !== 0 || hex.length < 4) return undefined;
  const b = Buffer.from(hex, 'hex');
  let bits = 0;
  let pos = 0;
  const read = (n: number): number => {
    let v = 0;
    for (let i = 0; i < n; i++) {
      const byte = b[pos >> 3];
      if (byte === undefined) throw new RangeError('short');
      v = (v << 1) | ((byte >> (7 - (pos & 7))) & 1);
      pos++;
    }
    bits += n;
    return v;
  };
  try {
    let aot = read(5);
    if (aot === 31) aot = 32 + read(6);
    const fi = read(4);
    const sampleRate = fi === 15 ? read(24) : AAC_RATES[fi];
    const channels = read(4);
    // GASpecificConfig's frameLengthFlag (AAC-LC and friends): 960-sample frames
    const frameLengthFlag = aot >= 1 && aot <= 4 && bits + 1 <= b.length * 8 ? read(1) : 0;
    if (!sampleRate || aot === 0) return undefined;
    return { config: b, sampleRate, channels: channels || 2, frameSamples: frameLengthFlag ? 960 : 1024 };
  } catch {
    return undefined;
  }
}

class BitCursor {
  constructor(
    private readonly b: Buffer,
    public pos: number,
    private readonly end: number,
  ) {}
  read(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) {
      if (this.pos >= this.end) throw new RangeError('AU headers run past their length');
      v = v * 2 + ((this.b[this.pos >> 3] >> (7 - (this.pos & 7))) & 1);
      this.pos++;
    }
    return v;
  }
}

/** RFC 3640 with the AU-header layout of its fmtp (sizelength, indexlength, indexdeltalength, ...) */
export class AacDepacketizer implements Depacketizer {
  readonly stats: DepacketizerStats = { malformed: 0, droppedFrames: 0 };
  private readonly sizeLength: number;
  private readonly indexLength: number;
  private readonly indexDeltaLength: number;
  private readonly ctsDeltaLength: number;
  private readonly dtsDeltaLength: number;
  private readonly rap: boolean;
  private readonly streamStateLength: number;
  /** a frame arriving in fragments: its parts, its size and timestamp */
  private frag: { parts: Buffer[]; have: number; size: number; ts: number } | undefined;

  constructor(
    fmtp: Record<string, string>,
    private readonly frameSamples: number,
    private readonly maxFrameBytes: number,
  ) {
    const n = (k: string) => {
      const v = Number(fmtp[k] ?? 0);
      return Number.isInteger(v) && v >= 0 && v <= 32 ? v : 0;
    };
    this.sizeLength = n('sizelength');
    this.indexLength = n('indexlength');
    this.indexDeltaLength = n('indexdeltalength');
    this.ctsDeltaLength = n('ctsdeltalength');
    this.dtsDeltaLength = n('dtsdeltalength');
    this.rap = fmtp.randomaccessindication === '1';
    this.streamStateLength = n('streamstateindication');
  }

  push(p: RtpPacket, gap: boolean): Frame[] {
    if (gap && this.frag) {
      this.frag = undefined;
      this.stats.droppedFrames++;
    }
    const pl = p.payload;
    if (pl.length < 2 || this.sizeLength === 0) {
      this.stats.malformed++;
      return [];
    }
    const headerBits = pl.readUInt16BE(0);
    const dataAt = 2 + Math.ceil(headerBits / 8);
    if (dataAt > pl.length) {
      this.stats.malformed++;
      return [];
    }
    // the AU headers follow the 16-bit AU-headers-length
    const cur = new BitCursor(pl, 16, 16 + headerBits);
    const sizes: number[] = [];
    try {
      while (cur.pos < 16 + headerBits) {
        sizes.push(cur.read(this.sizeLength));
        cur.read(sizes.length === 1 ? this.indexLength : this.indexDeltaLength);
        if (this.ctsDeltaLength && sizes.length > 1 && cur.read(1)) cur.read(this.ctsDeltaLength);
        if (this.dtsDeltaLength && cur.read(1)) cur.read(this.dtsDeltaLength);
        if (this.rap) cur.read(1);
        if (this.streamStateLength) cur.read(this.streamStateLength);
      }
    } catch {
      this.stats.malformed++;
      return [];
    }
    const data = pl.subarray(dataAt);
    // one AU larger than the packet: a fragment (RFC 3640 §3.2.3); the marker bit ends the frame
    if (sizes.length === 1 && sizes[0] > data.length) return this.fragment(p, sizes[0], data);
    if (this.frag) {
      // the fragments stopped without their end
      this.frag = undefined;
      this.stats.droppedFrames++;
    }
    const out: Frame[] = [];
    let off = 0;
    for (let i = 0; i < sizes.length; i++) {
      const size = sizes[i];
      if (off + size > data.length) {
        this.stats.malformed++;
        break;
      }
      if (size > 0)
        out.push({
          payload: Buffer.from(data.subarray(off, off + size)),
          timestamp: (p.timestamp + i * this.frameSamples) >>> 0,
          keyframe: true,
          duration: this.frameSamples,
        });
      off += size;
    }
    return out;
  }

  private fragment(p: RtpPacket, size: number, data: Buffer): Frame[] {
    if (size > this.maxFrameBytes) {
      this.stats.malformed++;
      return [];
    }
    const f = this.frag;
    if (!f || f.ts !== p.timestamp || f.size !== size) {
      if (f) this.stats.droppedFrames++;
      this.frag = { parts: [Buffer.from(data)], have: data.length, size, ts: p.timestamp };
    } else {
      f.parts.push(Buffer.from(data));
      f.have += data.length;
    }
    const cur = this.frag!;
    if (cur.have > cur.size) {
      this.frag = undefined;
      this.stats.malformed++;
      return [];
    }
    if (!p.marker && cur.have < cur.size) return [];
    this.frag = undefined;
    if (cur.have !== cur.size) {
      this.stats.droppedFrames++;
      return [];
    }
    return [{ payload: Buffer.concat(cur.parts), timestamp: cur.ts, keyframe: true, duration: this.frameSamples }];
  }
}

/** PCMA/PCMU: every byte a sample (per channel); copied, since the packet is a view of a larger read */
export class G711Depacketizer implements Depacketizer {
  readonly stats: DepacketizerStats = { malformed: 0, droppedFrames: 0 };
  constructor(private readonly channels: number) {}
  push(p: RtpPacket): Frame[] {
    if (p.payload.length === 0 || p.payload.length % this.channels !== 0) {
      this.stats.malformed++;
      return [];
    }
    return [{ payload: Buffer.from(p.payload), timestamp: p.timestamp, keyframe: true, duration: p.payload.length / this.channels }];
  }
}
