/**
 * The framing a transport puts around a piece of the FLV stream: an HTTP/1.1 chunk (size line, CRLF after) or a
 * WebSocket binary message (its header). A unit's framing is the same for every player of a transport kind, so the
 * unit's form keeps one of each once a player needed it (FlvFrame).
 */
import type { BufferSlab } from '../../../plugin-sdk';
import { Buffer } from 'node:buffer';

/** What ends every chunk of a chunked HTTP/1.1 body. */
export const CRLF = Buffer.from('\r\n', 'latin1');
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/** Memory for n bytes: from `slab` when the result is kept with the unit, else node's pool (short-lived). */
function take(n: number, slab: BufferSlab | undefined): Buffer {
  return slab ? slab.take(n) : Buffer.allocUnsafe(n);
}

/** Bytes of the size line ("<hex>\r\n") in front of an n-byte chunk. */
export function sizeLineLength(n: number): number {
  let digits = 1;
  for (let v = n >>> 4; v > 0; v >>>= 4) digits++;
  return digits + 2;
}

/** Writes the size line of an n-byte chunk into b at `at`; returns where it ends. */
export function writeSizeLine(n: number, b: Buffer, at: number): number {
  const end = at + sizeLineLength(n);
  for (let i = end - 3, v = n; i >= at; i--, v >>>= 4) b[i] = HEX_DIGITS[v & 15];
  b[end - 2] = 13;
  b[end - 1] = 10;
  return end;
}

/** The size line ("<hex>\r\n") in front of an n-byte chunk. */
export function chunkSizeLine(n: number, slab?: BufferSlab): Buffer {
  const line = take(sizeLineLength(n), slab);
  writeSizeLine(n, line, 0);
  return line;
}

/** Bytes of the header of a server's WebSocket message of n bytes. */
export function wsHeaderLength(n: number): number {
  return n < 126 ? 2 : n < 0x10000 ? 4 : 10;
}

/** Writes the header of a final, unmasked binary WebSocket frame of n bytes (RFC 6455 5.2) at `at`; returns its end. */
export function writeWsHeader(n: number, b: Buffer, at: number): number {
  b[at] = 0x82;
  if (n < 126) {
    b[at + 1] = n;
    return at + 2;
  }
  if (n < 0x10000) {
    b[at + 1] = 126;
    b.writeUInt16BE(n, at + 2);
    return at + 4;
  }
  b[at + 1] = 127;
  b.writeUInt32BE(Math.floor(n / 0x100000000), at + 2);
  b.writeUInt32BE(n >>> 0, at + 6);
  return at + 10;
}

/** The header of a final, unmasked binary WebSocket frame (a server's message) of n bytes (RFC 6455 5.2). */
export function wsHeader(n: number, slab?: BufferSlab): Buffer {
  const h = take(wsHeaderLength(n), slab);
  writeWsHeader(n, h, 0);
  return h;
}

/**
 * A transport's framing around a unit laid out in one Buffer (Transport.send): bytes before a piece of n bytes and
 * after it. `key` tells framings apart, so players of one kind share a unit laid out once.
 */
export interface WholeFraming {
  readonly key: number;
  headLength(n: number): number;
  /** writes the bytes before a piece of n bytes at `at`; returns where they end */
  head(n: number, b: Buffer, at: number): number;
  readonly tailLength: number;
  tail(b: Buffer, at: number): number;
}

const noTail = (_b: Buffer, at: number): number => at;

/** HTTP/1.1: each unit a chunk */
export const CHUNKED: WholeFraming = {
  key: 2,
  headLength: sizeLineLength,
  head: writeSizeLine,
  tailLength: CRLF.length,
  // (by index: CRLF.copy is a generic property load in sendWhole's optimised code, and a view made, each unit)
  tail: (b, at) => {
    b[at] = 13;
    b[at + 1] = 10;
    return at + 2;
  },
};

/** HTTP/1.0: the bare stream */
export const BARE: WholeFraming = { key: 4, headLength: () => 0, head: (_n, _b, at) => at, tailLength: 0, tail: noTail };

/** WebSocket: each unit a binary message */
export const WS_MESSAGE: WholeFraming = { key: 6, headLength: wsHeaderLength, head: writeWsHeader, tailLength: 0, tail: noTail };
