/**
 * A byte view's memory, offset and length, and copies between views, through the typed-array functions read once.
 *
 * Why: Node 20's TurboFan compiles on a background thread, and there every property of a Buffer or Uint8Array that
 * lives on a prototype (`buffer`, `byteOffset`, `length`, `set`, `copy`...) becomes a generic LoadIC call in the
 * optimised code, and `.buffer` then runs its C++ getter; the same function compiled on the main thread loads the
 * fields inline (`--print-opt-code`, test/bench/README.md). A function the compiler knows, called with `.call`, is
 * reduced as the property would have been. Buffer.prototype.copy also checks its arguments again and reads the
 * source's `buffer` and `byteOffset` to make a view of it, for every copy.
 */
const TYPED_ARRAY = Object.getPrototypeOf(Uint8Array.prototype) as object;

function getter<T>(name: string): (this: Uint8Array) => T {
  const d = Object.getOwnPropertyDescriptor(TYPED_ARRAY, name);
  // eslint-disable-next-line @typescript-eslint/unbound-method -- taken to be called with .call on a view
  const get = d?.get;
  if (get === undefined) throw new Error(`no %TypedArray%.prototype.${name} getter`);
  return get as (this: Uint8Array) => T;
}

const BUFFER = getter<ArrayBufferLike>('buffer');
const BYTE_OFFSET = getter<number>('byteOffset');
const LENGTH = getter<number>('length');
const SET = (TYPED_ARRAY as { set: (this: Uint8Array, src: ArrayLike<number>, offset?: number) => void }).set;

/** v.buffer */
export function memOf(v: Uint8Array): ArrayBufferLike {
  return BUFFER.call(v);
}

/** v.byteOffset */
export function offsetOf(v: Uint8Array): number {
  return BYTE_OFFSET.call(v);
}

/** v.length */
export function lengthOf(v: Uint8Array): number {
  return LENGTH.call(v);
}

/** dst.set(src, at): src whole into dst at `at` (a RangeError if it does not fit). */
export function setBytes(dst: Uint8Array, src: Uint8Array, at: number): void {
  SET.call(dst, src, at);
}

/**
 * src[from, to) into dst at `at`; returns the bytes copied, to - from. Unlike Buffer.copy it does not clamp: a range
 * outside src, or one that does not fit in dst, is a RangeError (never bytes of src's memory outside src). The whole
 * of src is copied from src itself, as Buffer.copy does; only a part of it needs a view made.
 */
export function copyBytes(src: Uint8Array, from: number, to: number, dst: Uint8Array, at: number): number {
  const n = to - from;
  const len = LENGTH.call(src);
  if (from < 0 || n < 0 || to > len) throw new RangeError(`bytes [${from}, ${to}) outside a view of ${len}`);
  SET.call(dst, n === len ? src : new Uint8Array(BUFFER.call(src), BYTE_OFFSET.call(src) + from, n), at);
  return n;
}
