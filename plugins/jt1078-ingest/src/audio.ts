/**
 * Audio payload details: the HiSilicon frame header many terminals (HiSilicon SoCs) put in front of each audio
 * frame, ADTS framing of AAC, and what can be learnt about G.726's rate from the packets themselves.
 */
import { Buffer } from 'node:buffer';

/**
 * Removes a HiSilicon audio header: 00 01 nn 00, where nn (with the 4th byte as the high byte) is the number of
 * 16-bit words that follow. Matching the length exactly keeps a plain payload that happens to start with 00 01
 * from being cut. Returns a subarray, or the input itself when there is no header.
 */
export function stripHisiliconHeader(payload: Buffer): Buffer {
  if (hasHisiliconHeader(payload)) return payload.subarray(4);
  return payload;
}

export function hasHisiliconHeader(payload: Buffer): boolean {
  return payload.length >= 4 && payload[0] === 0 && payload[1] === 1 && (payload[2] | (payload[3] << 8)) * 2 === payload.length - 4;
}

/** Prepends a HiSilicon header (terminals whose own audio has one expect it on intercom audio too). */
export function addHisiliconHeader(payload: Buffer): Buffer {
  if (payload.length % 2 !== 0 || payload.length / 2 > 0xffff) {
    throw new RangeError(`a HiSilicon audio frame holds an even number of bytes, at most 131070 (got ${payload.length})`);
  }
  const out = Buffer.allocUnsafe(payload.length + 4);
  out[0] = 0;
  out[1] = 1;
  out[2] = (payload.length / 2) & 0xff;
  out[3] = (payload.length / 2) >> 8;
  payload.copy(out, 4);
  return out;
}

export const AAC_RATES: readonly number[] = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/** samples in one AAC frame (raw data block) of AAC-LC / Main / LTP, the object types ADTS can name */
export const AAC_FRAME_SAMPLES = 1024;

/**
 * One ADTS header, read in place: the assembler keeps one and reads every frame of every packet into it, so
 * splitting packets into frames allocates nothing but the frames' own payload views.
 */
export class AdtsHeader {
  /** 7, or 9 with a CRC */
  headerLength = 0;
  /** header included */
  frameLength = 0;
  sampleRate = 0;
  channels = 0;
  /** raw data blocks in the frame minus one (0 for nearly every encoder) */
  extraBlocks = 0;
  /** the 2-byte AudioSpecificConfig as a number, to compare frames without building a Buffer */
  asc = 0;

  /**
   * Reads the header at buf[off]; false when none starts there or it is unusable: no sync word, layer not 0, a
   * reserved sampling index, channel configuration 0 (channels given by a PCE in the stream, which no header
   * carries), or a frame length shorter than its own header.
   */
  read(buf: Buffer, off: number): boolean {
    if (buf.length - off < 7 || buf[off] !== 0xff || (buf[off + 1] & 0xf6) !== 0xf0) return false;
    const b2 = buf[off + 2];
    const sfi = (b2 >> 2) & 0x0f;
    const channels = ((b2 & 1) << 2) | (buf[off + 3] >> 6);
    if (sfi >= AAC_RATES.length || channels === 0) return false;
    const headerLength = (buf[off + 1] & 1) === 1 ? 7 : 9;
    const frameLength = ((buf[off + 3] & 3) << 11) | (buf[off + 4] << 3) | (buf[off + 5] >> 5);
    if (frameLength < headerLength) return false;
    const objectType = (b2 >> 6) + 1;
    this.headerLength = headerLength;
    this.frameLength = frameLength;
    this.sampleRate = AAC_RATES[sfi];
    this.channels = channels;
    this.extraBlocks = buf[off + 6] & 3;
    this.asc = (objectType << 11) | (sfi << 7) | (channels << 3);
    return true;
  }

  /** The AudioSpecificConfig of the header last read. */
  config(): Buffer {
    return Buffer.from([this.asc >> 8, this.asc & 0xff]);
  }
}

export interface AdtsInfo {
  sampleRate: number;
  channels: number;
  /** AudioSpecificConfig (2 bytes) for muxers */
  config: Buffer;
}

/** Parameters from an ADTS header at the start of an AAC payload, or undefined when there is none. */
export function parseAdts(buf: Buffer): AdtsInfo | undefined {
  const h = new AdtsHeader();
  if (!h.read(buf, 0)) return undefined;
  return { sampleRate: h.sampleRate, channels: h.channels, config: h.config() };
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
 * G.726 bits per sample from a frame's length alone, the last resort when timing says nothing: HiSilicon encoders
 * make frames of 320 samples (40 ms) by default, else 160; 32 kbit/s when neither fits. (80 bytes fits both 320
 * samples at 16 kbit/s and 160 at 32: the default frame wins.)
 */
export function g726BitsFromFrameLength(bytes: number): number {
  for (const samples of [320, 160]) {
    const bits = (bytes * 8) / samples;
    if (Number.isInteger(bits) && bits >= 2 && bits <= 5) return bits;
  }
  return 4;
}

/** frames after which the estimator stops waiting for two agreeing measurements */
export const G726_GIVE_UP_FRAMES = 25;

/**
 * G.726 packs 2..5 bits per 8 kHz sample, and a G.726 packet (PT 8) does not say which. Bytes per millisecond of
 * audio equal the bits per sample (8 samples per ms, 8 bits per byte), and the time between two consecutive audio
 * frames is the first one's duration. Two consecutive agreeing measurements settle it. Terminals whose timestamps
 * are too irregular for that get, after G726_GIVE_UP_FRAMES frames, the value measured most often, or failing any
 * measurement the frame-length guess.
 */
export class G726RateEstimator {
  private lastTs = -1;
  private lastBytes = 0;
  private candidate = 0;
  private agreeing = 0;
  private frames = 0;
  /** measurements per bits-per-sample value (index 2..5) */
  private readonly votes = [0, 0, 0, 0, 0, 0];
  private settled: number | undefined;
  private how: 'timing' | 'frame-length' | undefined;

  get bitsPerSample(): number | undefined {
    return this.settled;
  }

  /** what settled it: two agreeing measurements or the most frequent one ('timing'), or the frame length */
  get source(): 'timing' | 'frame-length' | undefined {
    return this.how;
  }

  /** Feeds one frame (device timestamp, payload bytes without any vendor header); returns bits per sample once known. */
  observe(timestamp: number, bytes: number): number | undefined {
    if (this.settled !== undefined) return this.settled;
    this.frames++;
    const dt = timestamp - this.lastTs;
    if (this.lastTs >= 0 && dt > 0 && dt <= 1000) {
      const v = this.lastBytes / dt;
      const r = Math.round(v);
      if (r >= 2 && r <= 5 && Math.abs(v - r) <= 0.1 * r) {
        this.votes[r]++;
        if (r === this.candidate) this.agreeing++;
        else {
          this.candidate = r;
          this.agreeing = 1;
        }
        if (this.agreeing >= 2) this.settle(r, 'timing');
      } else {
        this.agreeing = 0;
      }
    }
    this.lastTs = timestamp;
    this.lastBytes = bytes;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- settle() above may have set it
    if (this.settled === undefined && this.frames >= G726_GIVE_UP_FRAMES) {
      let best = 0;
      for (let b = 2; b <= 5; b++) if (this.votes[b] > (best ? this.votes[best] : 0)) best = b;
      if (best) this.settle(best, 'timing');
      else this.settle(g726BitsFromFrameLength(bytes), 'frame-length');
    }
    return this.settled;
  }

  private settle(bits: number, how: 'timing' | 'frame-length'): void {
    this.settled = bits;
    this.how = how;
  }
}
