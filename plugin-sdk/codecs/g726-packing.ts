/**
 * G.726 codeword packing, kept apart from the ADPCM arithmetic because the two orders are a framing convention, not
 * part of the codec: terminals and ffmpeg disagree on it, and one codec state serves either order unchanged.
 *
 * Packing ('left' / 'right', see media.ts G726Packing): the codewords form one continuous bit stream across the
 * bytes of a frame, first codeword in the most significant bits ('left', ITU / AAL2, ffmpeg `g726`) or in the least
 * significant ones ('right', RFC 3551, ffmpeg `g726le`). At 24 and 40 kbit/s codewords straddle bytes.
 */
import type { G726Packing } from '../media';
import type { G726State } from './g726-adpcm';

export function checkPacking(p: G726Packing | undefined): G726Packing {
  // string: a JavaScript caller can pass anything, and the check below narrows it
  const packing: string = p ?? 'left';
  if (packing !== 'left' && packing !== 'right') throw new RangeError(`G.726 packing '${String(p)}': 'left' or 'right'`);
  return packing;
}

/**
 * Reads codewords of `bits` bits (`mask` = 2^bits - 1) from `frame` in `packing` order, decodes each with `st` and
 * writes the samples to out[offset, end).
 */
export function unpackCodewords(
  frame: Uint8Array,
  packing: G726Packing,
  bits: number,
  mask: number,
  st: G726State,
  out: Int16Array,
  offset: number,
  end: number,
): void {
  let acc = 0;
  let have = 0;
  let o = offset;
  if (packing === 'left') {
    for (let i = 0; o < end; i++) {
      acc = ((acc << 8) | frame[i]) & 0xffff;
      have += 8;
      while (have >= bits && o < end) {
        have -= bits;
        out[o++] = st.decode((acc >> have) & mask);
      }
    }
  } else {
    for (let i = 0; o < end; i++) {
      acc |= frame[i] << have;
      have += 8;
      while (have >= bits && o < end) {
        out[o++] = st.decode(acc & mask);
        acc >>>= bits;
        have -= bits;
      }
    }
  }
}

/**
 * Encodes each sample of `pcm` with `st` and writes the codewords of `bits` bits to `out` from `offset` in `packing`
 * order, padding the last byte with zero bits.
 */
export function packCodewords(pcm: Int16Array, packing: G726Packing, bits: number, st: G726State, out: Uint8Array, offset: number): void {
  const n = pcm.length;
  let acc = 0;
  let have = 0;
  let o = offset;
  if (packing === 'left') {
    for (let i = 0; i < n; i++) {
      acc = ((acc << bits) | st.encode(pcm[i])) & 0xffff;
      have += bits;
      if (have >= 8) {
        have -= 8;
        out[o++] = (acc >> have) & 0xff;
      }
    }
    if (have > 0) out[o] = (acc << (8 - have)) & 0xff;
  } else {
    for (let i = 0; i < n; i++) {
      acc |= st.encode(pcm[i]) << have;
      have += bits;
      if (have >= 8) {
        out[o++] = acc & 0xff;
        acc >>>= 8;
        have -= 8;
      }
    }
    if (have > 0) out[o] = acc & 0xff;
  }
}
