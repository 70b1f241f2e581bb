/**
 * IMA (Intel/DVI) ADPCM, 4 bits per sample, in blocks that start with a 4-byte state header: a 16-bit predictor, the
 * step index (0..88) and a reserved byte. Two layouts of what follows the header, chosen by `layout`:
 *
 * - 'dvi4' (the default; what the JT/T 1078 ingest publishes for HiSilicon ADPCM, PT 26, and DVI4, PT 12/13): the
 *   header is the decoder's state before the block's first sample (RFC 3551 4.5.1: "predicted value of the first
 *   sample from the previous block") and is not itself output; then two samples per byte, high nibble first.
 *   A block of n bytes holds 2 * (n - 4) samples.
 * - 'ima-wav' (Microsoft IMA ADPCM as in WAV files, ffmpeg's adpcm_ima_wav, mono): the header's predictor is the
 *   block's first sample and is output; then two samples per byte, low nibble first. 1 + 2 * (n - 4) samples.
 *
 * The header's predictor is little-endian by default ('le': HiSilicon terminals, WAV, and the JT/T 1078 servers that
 * decode HiSilicon audio). RFC 3551 writes it in network order; `headerByteOrder: 'be'` reads and writes that.
 *
 * Rounding: the IMA reference adds step/8 plus step, step/2, step/4 for the code's magnitude bits, each shift
 * truncating on its own ('ima', the default: Microsoft's and HiSilicon's codecs, the RFC, ffmpeg's QuickTime and
 * SSI IMA decoders). ffmpeg's adpcm_ima_wav decoder and encoder instead compute (2 * magnitude + 1) * step / 8 with
 * one truncation ('ffmpeg'), which differs by up to 2 per sample; the error then runs on to the block's end. Both
 * ends of a link must agree, so the option exists for WAV files from ffmpeg; terminals get 'ima'.
 *
 * The encoder picks codes as the reference encoder does ('ima') or as ffmpeg's does ('ffmpeg': its blocks are then
 * byte for byte ffmpeg's), and reconstructs each sample exactly as the decoder with the same rounding will, so the
 * two never drift apart.
 */
import type { AudioCodec } from '../media';
import { checkRoom, DecoderBase, type AudioEncoder } from './types';

export type AdpcmLayout = 'dvi4' | 'ima-wav';
export type AdpcmByteOrder = 'le' | 'be';
export type AdpcmRounding = 'ima' | 'ffmpeg';

export interface AdpcmOptions {
  /** what follows the state header, and whether its predictor is a sample: default 'dvi4' */
  layout?: AdpcmLayout;
  /** byte order of the header's 16-bit predictor: default 'le' */
  headerByteOrder?: AdpcmByteOrder;
  /** how a code's step is rounded: default 'ima' (see above) */
  rounding?: AdpcmRounding;
}

export interface AdpcmCodecOptions extends AdpcmOptions {
  /** default 8000 (DVI4 PT 13 is 16000); only passed through */
  sampleRate?: number;
}

export const ADPCM_LAYOUTS: readonly AdpcmLayout[] = ['dvi4', 'ima-wav'];

const STEP = Int16Array.of(
  7,
  8,
  9,
  10,
  11,
  12,
  13,
  14,
  16,
  17,
  19,
  21,
  23,
  25,
  28,
  31,
  34,
  37,
  41,
  45,
  50,
  55,
  60,
  66,
  73,
  80,
  88,
  97,
  107,
  118,
  130,
  143,
  157,
  173,
  190,
  209,
  230,
  253,
  279,
  307,
  337,
  371,
  408,
  449,
  494,
  544,
  598,
  658,
  724,
  796,
  876,
  963,
  1060,
  1166,
  1282,
  1411,
  1552,
  1707,
  1878,
  2066,
  2272,
  2499,
  2749,
  3024,
  3327,
  3660,
  4026,
  4428,
  4871,
  5358,
  5894,
  6484,
  7132,
  7845,
  8630,
  9493,
  10442,
  11487,
  12635,
  13899,
  15289,
  16818,
  18500,
  20350,
  22385,
  24623,
  27086,
  29794,
  32767,
);
const INDEX_STEP = Int8Array.of(-1, -1, -1, -1, 2, 4, 6, 8, -1, -1, -1, -1, 2, 4, 6, 8);
/** header bytes before the codes */
export const ADPCM_HEADER_BYTES = 4;

function checkOptions(o: AdpcmOptions): { layout: AdpcmLayout; be: boolean; rounding: AdpcmRounding } {
  const layout = o.layout ?? 'dvi4';
  if (!ADPCM_LAYOUTS.includes(layout)) throw new RangeError(`ADPCM layout '${layout}': 'dvi4' or 'ima-wav'`);
  // strings: a JavaScript caller can pass anything, and the checks below narrow them
  const order: string = o.headerByteOrder ?? 'le';
  if (order !== 'le' && order !== 'be') throw new RangeError(`ADPCM header byte order '${order}': 'le' or 'be'`);
  const rounding: string = o.rounding ?? 'ima';
  if (rounding !== 'ima' && rounding !== 'ffmpeg') throw new RangeError(`ADPCM rounding '${rounding}': 'ima' or 'ffmpeg'`);
  return { layout, be: order === 'be', rounding };
}

/** the predictor's change for a code's magnitude (0..7) at this step size */
function stepDiff(magnitude: number, step: number, oneRounding: boolean): number {
  if (oneRounding) return ((2 * magnitude + 1) * step) >> 3;
  let diff = step >> 3;
  if ((magnitude & 4) !== 0) diff += step;
  if ((magnitude & 2) !== 0) diff += step >> 1;
  if ((magnitude & 1) !== 0) diff += step >> 2;
  return diff;
}

export class ImaAdpcmDecoder extends DecoderBase {
  readonly codec: AudioCodec = 'adpcm';
  readonly sampleRate: number;
  readonly layout: AdpcmLayout;
  readonly rounding: AdpcmRounding;
  private readonly be: boolean;
  /** the state the last block left (every block's header sets it again) */
  private predictor = 0;
  private index = 0;
  /** blocks whose header held a step index above 88 (clamped; ffmpeg refuses such a block) */
  badIndexBlocks = 0;

  constructor(options: AdpcmCodecOptions = {}) {
    super();
    const o = checkOptions(options);
    this.sampleRate = options.sampleRate ?? 8000;
    this.layout = o.layout;
    this.be = o.be;
    this.rounding = o.rounding;
  }

  /** a frame no longer than its header holds no samples */
  samplesIn(frameBytes: number): number {
    if (frameBytes < ADPCM_HEADER_BYTES) return 0;
    return 2 * (frameBytes - ADPCM_HEADER_BYTES) + (this.layout === 'ima-wav' ? 1 : 0);
  }

  decodeInto(frame: Uint8Array, out: Int16Array, offset = 0): number {
    const total = this.samplesIn(frame.length);
    checkRoom('ADPCM decode', total, out.length - offset);
    if (total === 0) return 0;
    let pred = this.be ? (frame[0] << 8) | frame[1] : frame[0] | (frame[1] << 8);
    pred = (pred << 16) >> 16;
    let index = frame[2]!;
    if (index > 88) {
      index = 88;
      this.badIndexBlocks++;
    }
    let o = offset;
    const lowFirst = this.layout === 'ima-wav';
    if (lowFirst) out[o++] = pred;
    const one = this.rounding === 'ffmpeg';
    let step = STEP[index];
    for (let i = ADPCM_HEADER_BYTES; i < frame.length; i++) {
      const byte = frame[i];
      for (let h = 0; h < 2; h++) {
        const code = lowFirst === (h === 0) ? byte & 15 : byte >> 4;
        const diff = stepDiff(code & 7, step, one);
        pred = (code & 8) !== 0 ? pred - diff : pred + diff;
        pred = pred > 32767 ? 32767 : pred < -32768 ? -32768 : pred;
        index += INDEX_STEP[code];
        index = index < 0 ? 0 : index > 88 ? 88 : index;
        step = STEP[index];
        out[o++] = pred;
      }
    }
    this.predictor = pred;
    this.index = index;
    return total;
  }

  /** predictor and step index after the last block (what a 'dvi4' encoder would put in the next header) */
  get state(): { predictor: number; index: number } {
    return { predictor: this.predictor, index: this.index };
  }

  reset(): void {
    this.predictor = 0;
    this.index = 0;
    this.badIndexBlocks = 0;
  }
}

/**
 * PCM to one ADPCM block per call. The state carries from block to block (a 'dvi4' header is the state the previous
 * block left, as RFC 3551 has it), so consecutive blocks decode without a step at their joins. A 'dvi4' block takes
 * an even number of samples, an 'ima-wav' block an odd number (its first sample rides in the header): a nibble cannot
 * be left half-used, so other counts are refused.
 */
export class ImaAdpcmEncoder implements AudioEncoder {
  readonly codec: AudioCodec = 'adpcm';
  readonly sampleRate: number;
  readonly layout: AdpcmLayout;
  readonly rounding: AdpcmRounding;
  private readonly be: boolean;
  private predictor = 0;
  private index = 0;

  constructor(options: AdpcmCodecOptions = {}) {
    const o = checkOptions(options);
    this.sampleRate = options.sampleRate ?? 8000;
    this.layout = o.layout;
    this.be = o.be;
    this.rounding = o.rounding;
  }

  bytesFor(samples: number): number {
    this.checkCount(samples);
    const coded = this.layout === 'ima-wav' ? samples - 1 : samples;
    return ADPCM_HEADER_BYTES + coded / 2;
  }

  encode(pcm: Int16Array): Buffer {
    const out = Buffer.allocUnsafe(this.bytesFor(pcm.length));
    this.encodeInto(pcm, out, 0);
    return out;
  }

  encodeInto(pcm: Int16Array, out: Uint8Array, offset = 0): number {
    const bytes = this.bytesFor(pcm.length);
    checkRoom('ADPCM encode', bytes, out.length - offset);
    let first = 0;
    const lowFirst = this.layout === 'ima-wav';
    if (lowFirst) {
      this.predictor = pcm[0];
      first = 1;
    }
    const p = this.predictor & 0xffff;
    out[offset] = this.be ? p >> 8 : p & 0xff;
    out[offset + 1] = this.be ? p & 0xff : p >> 8;
    out[offset + 2] = this.index;
    out[offset + 3] = 0;
    let pred = this.predictor;
    let index = this.index;
    let o = offset + ADPCM_HEADER_BYTES;
    let pending = 0;
    const one = this.rounding === 'ffmpeg';
    for (let i = first, k = 0; i < pcm.length; i++, k++) {
      const step = STEP[index];
      let diff = pcm[i] - pred;
      let code = 0;
      if (diff < 0) {
        code = 8;
        diff = -diff;
      }
      if (one) {
        // ffmpeg's choice, so that 'ffmpeg' blocks are the bytes its adpcm_ima_wav encoder writes
        const m = ((diff * 4) / step) | 0;
        code |= m > 7 ? 7 : m;
      } else {
        // the reference's successive approximation against step, step/2, step/4
        if (diff >= step) {
          code |= 4;
          diff -= step;
        }
        if (diff >= step >> 1) {
          code |= 2;
          diff -= step >> 1;
        }
        if (diff >= step >> 2) code |= 1;
      }
      // reconstruct as the decoder will, so the next prediction is the one it makes
      const vpdiff = stepDiff(code & 7, step, one);
      pred = (code & 8) !== 0 ? pred - vpdiff : pred + vpdiff;
      pred = pred > 32767 ? 32767 : pred < -32768 ? -32768 : pred;
      index += INDEX_STEP[code];
      index = index < 0 ? 0 : index > 88 ? 88 : index;
      if ((k & 1) === 0) {
        pending = code;
      } else {
        out[o++] = lowFirst ? pending | (code << 4) : (pending << 4) | code;
      }
    }
    this.predictor = pred;
    this.index = index;
    return bytes;
  }

  reset(): void {
    this.predictor = 0;
    this.index = 0;
  }

  private checkCount(samples: number): void {
    const odd = this.layout === 'ima-wav';
    if (!Number.isInteger(samples) || samples < (odd ? 1 : 0) || (samples & 1) !== (odd ? 1 : 0)) {
      throw new RangeError(`an ADPCM '${this.layout}' block holds ${odd ? 'an odd' : 'an even'} number of samples, not ${samples}`);
    }
  }
}
