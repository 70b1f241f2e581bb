/** Audio checks shared by tests: AAC frames wrapped for ffmpeg, ffmpeg's decode, a tone's frequency, G.711 A-law expansion. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { requireTool } from './tools';

/** ADTS headers around raw AAC-LC frames, from the 2-byte AudioSpecificConfig (what an MPEG-TS muxer writes). */
export function adts(asc: Buffer, frames: ReadonlyArray<{ length: number } & Uint8Array>): Buffer {
  const aot = asc[0]! >> 3;
  const sfi = ((asc[0]! & 7) << 1) | (asc[1]! >> 7);
  const ch = (asc[1]! >> 3) & 15;
  const parts: Buffer[] = [];
  for (const f of frames) {
    const len = f.length + 7;
    parts.push(
      Buffer.from([0xff, 0xf1, ((aot - 1) << 6) | (sfi << 2) | (ch >> 2), ((ch & 3) << 6) | (len >> 11), (len >> 3) & 0xff, ((len & 7) << 5) | 0x1f, 0xfc]),
      Buffer.from(f),
    );
  }
  return Buffer.concat(parts);
}

/** What ffmpeg decodes from `file` in `format`, as interleaved float (extra output options, e.g. ['-ac', '1']). */
export function ffmpegDecode(file: Buffer, format: string, outOpts: string[] = []): Float32Array {
  const r = spawnSync(requireTool('ffmpeg', 'ffmpeg'), ['-v', 'error', '-f', format, '-i', 'pipe:0', ...outOpts, '-f', 'f32le', 'pipe:1'], {
    input: file,
    maxBuffer: 1 << 27,
  });
  assert.equal(r.status, 0, r.stderr.toString());
  const b = Buffer.from(r.stdout);
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
}

/** A tone's frequency from the first and last upward zero crossings (interpolated) in [from, to). */
export function frequency(x: Float32Array, rate: number, from: number, to: number): number {
  let first = NaN;
  let last = NaN;
  let count = 0;
  for (let i = from + 1; i < to; i++) {
    if (x[i - 1]! < 0 && x[i]! >= 0) {
      const t = i - 1 + x[i - 1]! / (x[i - 1]! - x[i]!);
      if (Number.isNaN(first)) first = t;
      else count++;
      last = t;
    }
  }
  return (count * rate) / (last - first);
}

/**
 * ITU-T G.711 A-law expansion to 16-bit linear (as the reference g711.c), written here so the gateway's own table
 * (plugin-sdk/codecs) is not the judge of what it decodes.
 */
export function alawToS16(a: number): number {
  a ^= 0x55;
  let t = (a & 0x0f) << 4;
  const seg = (a & 0x70) >> 4;
  if (seg === 0) t += 8;
  else if (seg === 1) t += 0x108;
  else t = (t + 0x108) << (seg - 1);
  return a & 0x80 ? t : -t;
}
