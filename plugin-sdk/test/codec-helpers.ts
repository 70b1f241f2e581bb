/** Helpers the audio codec tests share: frames through a codec, comparisons, signal measures. */
import assert from 'node:assert/strict';
import type { AudioDecoder, AudioEncoder } from '../codecs';
import type { AudioCodec, AudioTrackInfo } from '../media';

export const track = (codec: AudioCodec, extra: Partial<AudioTrackInfo> = {}): AudioTrackInfo => ({
  kind: 'audio',
  codec,
  sampleRate: 8000,
  channels: 1,
  ...extra,
});

/** Runs a decoder over a stream cut into frames of `frameBytes`, into one array. */
export function decodeFrames(dec: AudioDecoder, data: Uint8Array, frameBytes: number): Int16Array {
  let total = 0;
  for (let off = 0; off < data.length; off += frameBytes) total += dec.samplesIn(Math.min(frameBytes, data.length - off));
  const out = new Int16Array(total);
  let o = 0;
  for (let off = 0; off < data.length; off += frameBytes) o += dec.decodeInto(data.subarray(off, off + frameBytes), out, o);
  assert.equal(o, total);
  return out;
}

export function encodeFrames(enc: AudioEncoder, pcm: Int16Array, frameSamples: number): Buffer {
  const parts: Buffer[] = [];
  for (let off = 0; off < pcm.length; off += frameSamples) parts.push(enc.encode(pcm.subarray(off, off + frameSamples)));
  return Buffer.concat(parts);
}

export function assertSamplesEqual(ours: Int16Array, ref: Int16Array, what: string): void {
  assert.equal(ours.length, ref.length, `${what}: sample count`);
  let diff = 0;
  let first = -1;
  for (let i = 0; i < ref.length; i++) {
    if (ours[i] !== ref[i]) {
      if (first < 0) first = i;
      diff++;
    }
  }
  assert.equal(diff, 0, `${what}: ${diff} samples differ, first at ${first} (ours ${ours[first]}, ref ${ref[first]})`);
}

export function assertBytesEqual(ours: Buffer, ref: Buffer, what: string): void {
  assert.equal(ours.length, ref.length, `${what}: byte count`);
  const at = ours.findIndex((v, i) => v !== ref[i]);
  assert.equal(at, -1, `${what}: first differing byte at ${at}`);
}

export function snrDb(ref: Int16Array, got: Int16Array): number {
  let s = 0;
  let e = 0;
  for (let i = 0; i < ref.length; i++) {
    s += ref[i] * ref[i];
    e += (ref[i] - got[i]) ** 2;
  }
  return 10 * Math.log10(s / e);
}

export function correlation(a: Int16Array, b: Int16Array): number {
  const n = Math.min(a.length, b.length);
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < n; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}
