/**
 * Audio payload details: the HiSilicon frame header many terminals (HiSilicon SoCs) put in front of
 * each audio frame, and what can be learnt about the codec parameters from the payload itself.
 */

/**
 * Removes a HiSilicon audio header: 00 01 nn 00, where nn (with the 4th byte as the high byte) is the
 * number of 16-bit words that follow. Matching the length exactly keeps a plain payload that happens to
 * start with 00 01 from being cut. Returns a subarray, or the input itself when there is no header.
 */
export function stripHisiliconHeader(payload: Buffer): Buffer {
  if (payload.length >= 4 && payload[0] === 0 && payload[1] === 1 &&
      (payload[2] | (payload[3] << 8)) * 2 === payload.length - 4) {
    return payload.subarray(4);
  }
  return payload;
}

/** Prepends a HiSilicon header (for tests and for terminals that expect one on intercom audio). */
export function addHisiliconHeader(payload: Buffer): Buffer {
  if (payload.length % 2 !== 0 || payload.length / 2 > 0xffff) {
    throw new Error('a HiSilicon audio frame holds an even number of bytes, at most 131070');
  }
  const h = Buffer.from([0, 1, (payload.length / 2) & 0xff, (payload.length / 2) >> 8]);
  return Buffer.concat([h, payload]);
}

const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export interface AdtsInfo {
  sampleRate: number;
  channels: number;
  /** AudioSpecificConfig (2 bytes) for muxers */
  config: Buffer;
}

/** Parameters from an ADTS header at the start of an AAC payload, or undefined when there is none. */
export function parseAdts(buf: Buffer): AdtsInfo | undefined {
  if (buf.length < 7 || buf[0] !== 0xff || (buf[1] & 0xf6) !== 0xf0) return undefined;
  const objectType = (buf[2] >> 6) + 1;
  const sfi = (buf[2] >> 2) & 0x0f;
  const channels = ((buf[2] & 1) << 2) | (buf[3] >> 6);
  if (sfi >= AAC_RATES.length || channels === 0) return undefined;
  const asc = (objectType << 11) | (sfi << 7) | (channels << 3);
  return { sampleRate: AAC_RATES[sfi], channels, config: Buffer.from([asc >> 8, asc & 0xff]) };
}

const MPEG_RATES: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };

/** Sample rate and channels from an MPEG audio (MP3) frame header, or undefined. */
export function parseMpegAudioHeader(buf: Buffer): { sampleRate: number; channels: number } | undefined {
  if (buf.length < 4 || buf[0] !== 0xff || (buf[1] & 0xe0) !== 0xe0) return undefined;
  const version = (buf[1] >> 3) & 3;
  const layer = (buf[1] >> 1) & 3;
  const sri = (buf[2] >> 2) & 3;
  const rates = MPEG_RATES[version];
  if (!rates || layer === 0 || sri === 3) return undefined;
  return { sampleRate: rates[sri], channels: buf[3] >> 6 === 3 ? 1 : 2 };
}

/**
 * G.726 packs 2..5 bits per 8 kHz sample, and the packet does not say which. Bytes per millisecond of
 * audio equal the bits per sample (8 samples per ms, 8 bits per byte), and the time between two
 * consecutive audio frames is the first one's duration. Two agreeing measurements settle it.
 */
export class G726RateEstimator {
  private lastTs = -1;
  private lastBytes = 0;
  private candidate = 0;
  private agreeing = 0;
  private settled: number | undefined;

  get bitsPerSample(): number | undefined {
    return this.settled;
  }

  /** Feeds one frame (device timestamp, payload bytes); returns bits per sample once known. */
  observe(timestamp: number, bytes: number): number | undefined {
    if (this.settled !== undefined) return this.settled;
    const dt = timestamp - this.lastTs;
    if (this.lastTs >= 0 && dt > 0 && dt <= 1000) {
      const v = this.lastBytes / dt;
      const r = Math.round(v);
      if (r >= 2 && r <= 5 && Math.abs(v - r) <= 0.1 * r) {
        if (r === this.candidate) this.agreeing++;
        else {
          this.candidate = r;
          this.agreeing = 1;
        }
        if (this.agreeing >= 2) this.settled = r;
      } else {
        this.agreeing = 0;
      }
    }
    this.lastTs = timestamp;
    this.lastBytes = bytes;
    return this.settled;
  }
}
