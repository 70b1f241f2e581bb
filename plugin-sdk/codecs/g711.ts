/**
 * G.711 A-law and µ-law (ITU-T G.711), table-driven both ways.
 *
 * Decoding is the standard expansion (the same values as ffmpeg's pcm_alaw / pcm_mulaw). Encoding picks, for every
 * 14-bit input level, the code whose decoded value is nearest, the way ffmpeg's pcm_alaw / pcm_mulaw encoders build
 * their tables, so our intercom audio is byte-for-byte what `ffmpeg -c:a pcm_alaw` would send. (ITU's G.191 reference
 * truncates instead; nearest is 6 dB quieter in quantisation noise at the bottom of each segment.)
 */
import type { AudioCodec } from '../media';
import { checkRoom, DecoderBase, type AudioEncoder } from './types';

export type G711Law = 'alaw' | 'ulaw';

function alawToLinear(code: number): number {
  const a = code ^ 0x55;
  const mant = a & 0x0f;
  const seg = (a & 0x70) >> 4;
  const mag = seg === 0 ? (mant * 2 + 1) << 3 : (mant * 2 + 1 + 32) << (seg + 2);
  return (a & 0x80) !== 0 ? mag : -mag;
}

function ulawToLinear(code: number): number {
  const u = ~code & 0xff;
  const t = (((u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
  return (u & 0x80) !== 0 ? 0x84 - t : t - 0x84;
}

function expandTable(toLinear: (code: number) => number): Int16Array {
  const t = new Int16Array(256);
  for (let c = 0; c < 256; c++) t[c] = toLinear(c);
  return t;
}

/**
 * 16384 entries, one per 14-bit level ((sample + 32768) >> 2): each level gets the code of the nearest decoded value,
 * the boundary between two codes lying halfway between their values. `mask` turns a magnitude rank 0..127 into a
 * code (A-law inverts the even bits, µ-law all of them).
 */
function compressTable(toLinear: (code: number) => number, mask: number): Uint8Array {
  const t = new Uint8Array(16384);
  let j = 1;
  t[8192] = mask;
  for (let i = 0; i < 127; i++) {
    const v1 = toLinear(i ^ mask);
    const v2 = toLinear((i + 1) ^ mask);
    const v = (v1 + v2 + 4) >> 3;
    for (; j < v; j++) {
      t[8192 - j] = i ^ (mask ^ 0x80);
      t[8192 + j] = i ^ mask;
    }
  }
  for (; j < 8192; j++) {
    t[8192 - j] = 127 ^ (mask ^ 0x80);
    t[8192 + j] = 127 ^ mask;
  }
  t[0] = t[1];
  return t;
}

/** code -> linear PCM (A-law) */
export const ALAW_TO_PCM: Readonly<Int16Array> = expandTable(alawToLinear);
/** code -> linear PCM (µ-law) */
export const ULAW_TO_PCM: Readonly<Int16Array> = expandTable(ulawToLinear);
const PCM_TO_ALAW = compressTable(alawToLinear, 0xd5);
const PCM_TO_ULAW = compressTable(ulawToLinear, 0xff);

export function alawEncodeSample(s: number): number {
  return PCM_TO_ALAW[(s + 32768) >> 2];
}

export function ulawEncodeSample(s: number): number {
  return PCM_TO_ULAW[(s + 32768) >> 2];
}

/** G.711 has no state: one object per track only to fit the AudioDecoder shape. */
export class G711Decoder extends DecoderBase {
  readonly codec: AudioCodec;
  private readonly table: Int16Array;

  constructor(
    readonly law: G711Law,
    readonly sampleRate = 8000,
  ) {
    super();
    this.codec = law === 'alaw' ? 'g711a' : 'g711u';
    this.table = law === 'alaw' ? ALAW_TO_PCM : ULAW_TO_PCM;
  }

  samplesIn(frameBytes: number): number {
    return frameBytes;
  }

  decodeInto(frame: Uint8Array, out: Int16Array, offset = 0): number {
    const n = frame.length;
    checkRoom('G.711 decode', n, out.length - offset);
    const t = this.table;
    for (let i = 0; i < n; i++) out[offset + i] = t[frame[i]!];
    return n;
  }

  reset(): void {
    // stateless
  }
}

export class G711Encoder implements AudioEncoder {
  readonly codec: AudioCodec;
  private readonly table: Uint8Array;

  constructor(
    readonly law: G711Law,
    readonly sampleRate = 8000,
  ) {
    this.codec = law === 'alaw' ? 'g711a' : 'g711u';
    this.table = law === 'alaw' ? PCM_TO_ALAW : PCM_TO_ULAW;
  }

  bytesFor(samples: number): number {
    return samples;
  }

  encode(pcm: Int16Array): Buffer {
    const out = Buffer.allocUnsafe(pcm.length);
    this.encodeInto(pcm, out, 0);
    return out;
  }

  encodeInto(pcm: Int16Array, out: Uint8Array, offset = 0): number {
    const n = pcm.length;
    checkRoom('G.711 encode', n, out.length - offset);
    const t = this.table;
    for (let i = 0; i < n; i++) out[offset + i] = t[(pcm[i] + 32768) >> 2];
    return n;
  }

  reset(): void {
    // stateless
  }
}
