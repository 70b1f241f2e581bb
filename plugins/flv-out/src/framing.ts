/**
 * The framing a transport puts around a piece of the FLV stream: an HTTP/1.1 chunk (size line, CRLF after) or a
 * WebSocket binary message (its header). A unit's framing is the same for every player of a transport kind, so the
 * unit's form keeps one of each once a player needed it (FlvFrame).
 */
import type { BufferSlab } from '../../../plugin-sdk';

/** What ends every chunk of a chunked HTTP/1.1 body. */
export const CRLF = Buffer.from('\r\n', 'latin1');
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/** Memory for n bytes: from `slab` when the result is kept with the unit, else node's pool (short-lived). */
function take(n: number, slab: BufferSlab | undefined): Buffer {
  return slab ? slab.take(n) : Buffer.allocUnsafe(n);
}

/** The size line ("<hex>\r\n") in front of an n-byte chunk. */
export function chunkSizeLine(n: number, slab?: BufferSlab): Buffer {
  let digits = 1;
  for (let v = n >>> 4; v > 0; v >>>= 4) digits++;
  const line = take(digits + 2, slab);
  for (let i = digits - 1, v = n; i >= 0; i--, v >>>= 4) line[i] = HEX_DIGITS[v & 15];
  line[digits] = 13;
  line[digits + 1] = 10;
  return line;
}

/** The header of a final, unmasked binary WebSocket frame (a server's message) of n bytes (RFC 6455 5.2). */
export function wsHeader(n: number, slab?: BufferSlab): Buffer {
  if (n < 126) {
    const h = take(2, slab);
    h[0] = 0x82;
    h[1] = n;
    return h;
  }
  if (n < 0x10000) {
    const h = take(4, slab);
    h[0] = 0x82;
    h[1] = 126;
    h.writeUInt16BE(n, 2);
    return h;
  }
  const h = take(10, slab);
  h[0] = 0x82;
  h[1] = 127;
  h.writeUInt32BE(Math.floor(n / 0x100000000), 2);
  h.writeUInt32BE(n >>> 0, 6);
  return h;
}
