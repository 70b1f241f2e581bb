/**
 * Audio codecs for the narrow-band audio terminals send (G.711, G.726, IMA ADPCM): decoders to 16-bit PCM for the
 * AAC stage, encoders from 16-bit PCM for intercom, and a resampler to the rates AAC takes. Exact: each module says
 * which ffmpeg codec it matches bit for bit, and the two places it chooses not to by default (G.726 overflow, IMA
 * rounding), each with an option that does. Allocation-light: state is allocated once per object, nothing per sample,
 * and decode() reuses one output buffer.
 */
import type { AudioCodec, AudioTrackInfo, G726Packing } from '../media';
import { G711Decoder, G711Encoder } from './g711';
import { G726Decoder, G726Encoder } from './g726';
import { ImaAdpcmDecoder, ImaAdpcmEncoder, type AdpcmOptions } from './ima-adpcm';
import { checkRoom, DecoderBase, type AudioDecoder, type AudioEncoder } from './types';

export type { AudioDecoder, AudioEncoder } from './types';
export { G711Decoder, G711Encoder, ALAW_TO_PCM, ULAW_TO_PCM, alawEncodeSample, ulawEncodeSample, type G711Law } from './g711';
export { G726Decoder, G726Encoder, type G726Options } from './g726';
export { G726State } from './g726-adpcm';
export {
  ImaAdpcmDecoder,
  ImaAdpcmEncoder,
  ADPCM_LAYOUTS,
  ADPCM_HEADER_BYTES,
  type AdpcmLayout,
  type AdpcmByteOrder,
  type AdpcmRounding,
  type AdpcmOptions,
  type AdpcmCodecOptions,
} from './ima-adpcm';
export { Resampler, AAC_OUTPUT_RATES, type ResamplerOptions } from './resampler';

/** Codecs createDecoder / createEncoder handle. */
export const PCM_CODECS: readonly AudioCodec[] = ['g711a', 'g711u', 'g726', 'g721', 'adpcm', 'pcm'];

/** What the track does not say and a site may: how its ADPCM blocks are laid out (see ima-adpcm.ts). */
export interface CodecOptions {
  adpcm?: AdpcmOptions;
}

/**
 * A decoder for a track as the bus announces it, or undefined for codecs decoded elsewhere or not at all (AAC, MP3,
 * G.722, G.723, G.729, unknown). G.726 takes `bitsPerSample` (default 4, i.e. 32 kbit/s, G.721) and `packing`
 * (default 'left', the ingest's default); 'g721' is G.726 at 4 bits; 'adpcm' takes `options.adpcm` (default: 'dvi4'
 * layout, little-endian header, IMA rounding: what HiSilicon terminals send); 'pcm' is 16-bit little-endian. Throws
 * on a G.726 track whose bitsPerSample is not 2..5.
 */
export function createDecoder(track: AudioTrackInfo, options: CodecOptions = {}): AudioDecoder | undefined {
  const rate = track.sampleRate || 8000;
  switch (track.codec) {
    case 'g711a':
      return new G711Decoder('alaw', rate);
    case 'g711u':
      return new G711Decoder('ulaw', rate);
    case 'g726':
    case 'g721': {
      const bits = track.codec === 'g721' ? 4 : (track.bitsPerSample ?? 4);
      return new G726Decoder({ bitsPerSample: bits, packing: track.packing, sampleRate: rate });
    }
    case 'adpcm':
      return new ImaAdpcmDecoder({ ...options.adpcm, sampleRate: rate });
    case 'pcm':
      return track.bitsPerSample === undefined || track.bitsPerSample === 16 ? new Pcm16Decoder(rate) : undefined;
    default:
      return undefined;
  }
}

/** What an encoder makes: the terminal's own track parameters (an AudioTrackInfo fits). */
export interface EncoderSpec {
  codec: AudioCodec;
  sampleRate?: number;
  /** G.726: 2..5 (default 4); 'pcm': 16 or absent */
  bitsPerSample?: number;
  /** G.726 (default 'left') */
  packing?: G726Packing;
}

/**
 * An encoder for intercom audio to a terminal, or undefined for codecs we do not encode (AAC, MP3, G.722/3/9,
 * unknown). Throws on G.726 bits other than 2..5.
 */
export function createEncoder(spec: EncoderSpec, options: CodecOptions = {}): AudioEncoder | undefined {
  const rate = spec.sampleRate || 8000;
  switch (spec.codec) {
    case 'g711a':
      return new G711Encoder('alaw', rate);
    case 'g711u':
      return new G711Encoder('ulaw', rate);
    case 'g726':
    case 'g721': {
      const bits = spec.codec === 'g721' ? 4 : (spec.bitsPerSample ?? 4);
      return new G726Encoder({ bitsPerSample: bits, packing: spec.packing, sampleRate: rate });
    }
    case 'adpcm':
      return new ImaAdpcmEncoder({ ...options.adpcm, sampleRate: rate });
    case 'pcm':
      return spec.bitsPerSample === undefined || spec.bitsPerSample === 16 ? new Pcm16Encoder(rate) : undefined;
    default:
      return undefined;
  }
}

/** 16-bit little-endian PCM (an odd trailing byte is dropped). */
export class Pcm16Decoder extends DecoderBase {
  readonly codec: AudioCodec = 'pcm';

  constructor(readonly sampleRate = 8000) {
    super();
  }

  samplesIn(frameBytes: number): number {
    return frameBytes >> 1;
  }

  decodeInto(frame: Uint8Array, out: Int16Array, offset = 0): number {
    const n = frame.length >> 1;
    checkRoom('PCM decode', n, out.length - offset);
    for (let i = 0; i < n; i++) out[offset + i] = ((frame[2 * i] | (frame[2 * i + 1] << 8)) << 16) >> 16;
    return n;
  }

  reset(): void {
    // stateless
  }
}

export class Pcm16Encoder implements AudioEncoder {
  readonly codec: AudioCodec = 'pcm';

  constructor(readonly sampleRate = 8000) {}

  bytesFor(samples: number): number {
    return samples * 2;
  }

  encode(pcm: Int16Array): Buffer {
    const out = Buffer.allocUnsafe(pcm.length * 2);
    this.encodeInto(pcm, out, 0);
    return out;
  }

  encodeInto(pcm: Int16Array, out: Uint8Array, offset = 0): number {
    checkRoom('PCM encode', pcm.length * 2, out.length - offset);
    for (let i = 0, o = offset; i < pcm.length; i++) {
      const v = pcm[i];
      out[o++] = v & 0xff;
      out[o++] = (v >> 8) & 0xff;
    }
    return pcm.length * 2;
  }

  reset(): void {
    // stateless
  }
}

// A plain copy keeps each importer's read a fast property load (see plugin-sdk/index.ts).
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- module.exports is typed any; the copy is the same names
module.exports = { __esModule: true, ...module.exports };
