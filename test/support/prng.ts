/** mulberry32: a small seeded PRNG, so fuzz, loss and benchmark data reproduce run after run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n bytes drawn from `rnd` (e.g. a `prng(seed)`), one draw a byte. */
export function randomBytes(rnd: () => number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (rnd() * 256) | 0;
  return b;
}
