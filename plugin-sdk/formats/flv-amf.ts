/** AMF0 (only what onMetaData needs), for the FLV muxer's script tag (part of formats/flv, which re-exports it). */
import { allocBody } from './flv-tag';
import { Buffer } from 'node:buffer';

export type AmfValue = number | boolean | string;

function amfString(s: string): Buffer {
  const b = Buffer.from(s, 'utf8');
  const h = Buffer.allocUnsafe(2);
  h.writeUInt16BE(b.length, 0);
  return Buffer.concat([h, b]);
}

function amfValue(v: AmfValue): Buffer {
  if (typeof v === 'number') {
    const b = Buffer.allocUnsafe(9);
    b[0] = 0x00;
    b.writeDoubleBE(v, 1);
    return b;
  }
  if (typeof v === 'boolean') return Buffer.from([0x01, v ? 1 : 0]);
  return Buffer.concat([Buffer.from([0x02]), amfString(v)]);
}

/** AMF0 "onMetaData" followed by an ECMA array of the given properties. */
export function encodeOnMetaData(props: Record<string, AmfValue>): Buffer {
  const entries = Object.entries(props);
  const count = Buffer.allocUnsafe(5);
  count[0] = 0x08;
  count.writeUInt32BE(entries.length, 1);
  const parts: Buffer[] = [amfValue('onMetaData'), count];
  for (const [k, v] of entries) parts.push(amfString(k), amfValue(v));
  parts.push(Buffer.from([0x00, 0x00, 0x09]));
  const total = parts.reduce((n, p) => n + p.length, 0);
  const body = allocBody(total);
  let at = 0;
  for (const p of parts) at += p.copy(body, at);
  return body;
}
