/**
 * Memory for small bytes a stream keeps as long as it lives (parameter sets, sequence headers, a file header): their
 * own allocation, not Node's shared pool.
 *
 * Why: Buffer.from, Buffer.concat and Buffer.allocUnsafe carve anything under 4 KiB from an 8 KiB slab that the whole
 * process shares, and a slab is freed only once every slice of it is gone. A few bytes kept for a stream's life pin
 * the slab, whatever else was carved from it and dropped long ago: a heap snapshot of the gateway at 450 streams
 * (test/bench/README.md) had 257 such slabs, 2 MiB, held only by SPS, PPS and FLV config tags. Short-lived
 * buffers should keep using the pool, which is what it is good at.
 */
import { Buffer } from 'node:buffer';

/** n bytes of their own memory, not zeroed: the caller writes every byte */
export function keptAlloc(n: number): Buffer {
  return Buffer.allocUnsafeSlow(n);
}

/** A copy of `src` in memory of its own. */
export function keptCopy(src: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(src.length);
  out.set(src);
  return out;
}
