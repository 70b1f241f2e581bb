/**
 * What a talk client sends and hears (decisions.md): 16-bit little-endian mono PCM at 8 kHz by default, or G.711
 * A-law / µ-law bytes (`fmt=g711a|g711u`), one sample per byte, also at 8 kHz.
 */
import type { WebSocket } from 'ws';
import { ALAW_TO_PCM, ULAW_TO_PCM, alawEncodeSample, ulawEncodeSample, Resampler } from '../../../plugin-sdk/codecs';

export const CLIENT_FORMATS = ['pcm16', 'g711a', 'g711u'] as const;
export type ClientFormat = (typeof CLIENT_FORMATS)[number];

/** the client side's sample rate, whatever the terminal's */
export const CLIENT_RATE = 8000;

export function parseClientFormat(v: string | null): ClientFormat | undefined {
  if (v === null || v === '') return 'pcm16';
  return (CLIENT_FORMATS as readonly string[]).includes(v) ? (v as ClientFormat) : undefined;
}

/** A message's audio as PCM, or a string saying why it is malformed. */
export function decodeClient(fmt: ClientFormat, data: Buffer): Int16Array | string {
  if (fmt === 'pcm16') {
    if (data.length % 2 !== 0) return `PCM16 message of ${data.length} bytes: an odd length is not whole samples`;
    const out = new Int16Array(data.length >> 1);
    for (let i = 0; i < out.length; i++) out[i] = data.readInt16LE(2 * i);
    return out;
  }
  const table = fmt === 'g711a' ? ALAW_TO_PCM : ULAW_TO_PCM;
  const out = new Int16Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = table[data[i]!];
  return out;
}

/** PCM to the client's format: a new Buffer (the socket keeps it until written). */
export function encodeClient(fmt: ClientFormat, pcm: Int16Array): Buffer {
  if (fmt === 'pcm16') {
    const out = Buffer.allocUnsafe(pcm.length * 2);
    for (let i = 0; i < pcm.length; i++) out.writeInt16LE(pcm[i], 2 * i);
    return out;
  }
  const enc = fmt === 'g711a' ? alawEncodeSample : ulawEncodeSample;
  const out = Buffer.allocUnsafe(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = enc(pcm[i]);
  return out;
}

/** Int16 PCM from one rate to another (the Resampler works in floats); identity when the rates are equal. */
export class PcmRateConverter {
  private readonly rs: Resampler | undefined;

  constructor(inputRate: number, outputRate: number) {
    this.rs = inputRate === outputRate ? undefined : new Resampler({ inputRate, outputRate, channels: 1 });
  }

  process(pcm: Int16Array): Int16Array {
    if (!this.rs) return pcm;
    const f = this.rs.process(pcm);
    const out = new Int16Array(f.length);
    for (let i = 0; i < f.length; i++) out[i] = Math.max(-32768, Math.min(32767, Math.round(f[i] * 32768)));
    return out;
  }
}

export function toBuffer(data: Buffer | ArrayBuffer | Buffer[]): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * Closes a socket that is still open with a code we may send (1000, 1001, 1003, 1007-1011, 3000-4999; a code the
 * peer sent, like 1005, is answered with 1000) and a reason cut to the 123 bytes a close frame holds.
 */
export function closeWs(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState !== ws.OPEN && ws.readyState !== ws.CONNECTING) return;
  const sendable = code === 1000 || code === 1001 || code === 1003 || (code >= 1007 && code <= 1011) || (code >= 3000 && code <= 4999);
  let r = Buffer.from(reason, 'utf8');
  if (r.length > 123) r = r.subarray(0, 120);
  ws.close(sendable ? code : 1000, r.toString('utf8').replace(/\uFFFD$/, ''));
}
