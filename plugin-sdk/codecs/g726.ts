/**
 * G.726 ADPCM at 16, 24, 32 and 40 kbit/s (2..5 bits per 8 kHz sample), decoder and encoder, written from ITU-T
 * G.726 section 4 with the integer arithmetic ffmpeg's libavcodec/g726.c uses, so both agree with ffmpeg bit for
 * bit: the encoder with `-c:a g726`/`g726le`, the decoder with `-f g726`/`g726le` decoding except where ffmpeg lets
 * an out-of-range sample wrap around and we saturate it (G726Options.overflow).
 *
 * This module holds what the rest of the gateway uses, the AudioDecoder/AudioEncoder classes and their options: they
 * tie the shared codec state (g726-adpcm.ts) to one of the two byte packings (g726-packing.ts), so that callers see
 * one codec whatever the wire layout.
 */
import type { AudioCodec, G726Packing } from '../media';
import { G726State } from './g726-adpcm';
import { checkPacking, packCodewords, unpackCodewords } from './g726-packing';
import { checkRoom, DecoderBase, type AudioEncoder } from './types';

export interface G726Options {
  /** 2..5 (16, 24, 32, 40 kbit/s) */
  bitsPerSample: number;
  /** default 'left' (ITU / AAL2, ffmpeg `g726`) */
  packing?: G726Packing;
  /** default 8000 (G.726 is defined at 8 kHz; the rate is only passed through) */
  sampleRate?: number;
  /**
   * Decoding a value beyond 14 bits: 'saturate' (default) clips it to 16 bits; 'wrap' gives what ffmpeg's decoder
   * gives (its int16_t cast wraps it to the opposite sign: a full-scale click). The two differ nowhere else.
   */
  overflow?: 'saturate' | 'wrap';
}

/** A G.726 frame (ffmpeg `-f g726` / `g726le` frames, JT/T 1078 PT 8 or G.721 PT 1 payloads) to PCM. */
export class G726Decoder extends DecoderBase {
  readonly codec: AudioCodec = 'g726';
  readonly bitsPerSample: number;
  readonly packing: G726Packing;
  readonly sampleRate: number;
  private readonly state: G726State;
  private readonly mask: number;

  constructor(opts: G726Options) {
    super();
    this.bitsPerSample = opts.bitsPerSample;
    this.packing = checkPacking(opts.packing);
    this.sampleRate = opts.sampleRate ?? 8000;
    this.state = new G726State(opts.bitsPerSample, opts.overflow === 'wrap');
    this.mask = (1 << opts.bitsPerSample) - 1;
  }

  /** bits left over at a frame's end (fewer than a codeword) are dropped, as ffmpeg does */
  samplesIn(frameBytes: number): number {
    return Math.floor((frameBytes * 8) / this.bitsPerSample);
  }

  decodeInto(frame: Uint8Array, out: Int16Array, offset = 0): number {
    const total = this.samplesIn(frame.length);
    checkRoom('G.726 decode', total, out.length - offset);
    unpackCodewords(frame, this.packing, this.bitsPerSample, this.mask, this.state, out, offset, offset + total);
    return total;
  }

  reset(): void {
    this.state.reset();
  }
}

/**
 * PCM to G.726 frames. A frame whose codewords do not fill whole bytes (at 24 and 40 kbit/s: a sample count not a
 * multiple of 8) is padded with zero bits, as ffmpeg pads its last frame; the decoder at the other end then hears
 * one or two extra samples, so intercom frames should be multiples of 8 samples (20 and 40 ms frames are).
 */
export class G726Encoder implements AudioEncoder {
  readonly codec: AudioCodec = 'g726';
  readonly bitsPerSample: number;
  readonly packing: G726Packing;
  readonly sampleRate: number;
  private readonly state: G726State;

  constructor(opts: Omit<G726Options, 'overflow'>) {
    this.bitsPerSample = opts.bitsPerSample;
    this.packing = checkPacking(opts.packing);
    this.sampleRate = opts.sampleRate ?? 8000;
    this.state = new G726State(opts.bitsPerSample);
  }

  bytesFor(samples: number): number {
    return Math.ceil((samples * this.bitsPerSample) / 8);
  }

  encode(pcm: Int16Array): Buffer {
    const out = Buffer.allocUnsafe(this.bytesFor(pcm.length));
    this.encodeInto(pcm, out, 0);
    return out;
  }

  encodeInto(pcm: Int16Array, out: Uint8Array, offset = 0): number {
    const n = pcm.length;
    const bytes = this.bytesFor(n);
    checkRoom('G.726 encode', bytes, out.length - offset);
    packCodewords(pcm, this.packing, this.bitsPerSample, this.state, out, offset);
    return bytes;
  }

  reset(): void {
    this.state.reset();
  }
}
