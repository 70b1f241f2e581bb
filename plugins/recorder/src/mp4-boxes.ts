/**
 * ISO BMFF boxes of a plain (not fragmented) MP4: the generic box writers and the sample entries (avc1 / hvc1 with
 * their avcC / hvcC, mp4a with its esds, and QuickTime's alaw / ulaw for G.711). The tables are in mp4-moov.ts.
 * hls-out has its own fragmented-MP4 writer; plugins do not share code but through plugin-sdk, and these few
 * lines are not worth a shared module.
 */
import type { SampleDescription } from './mp4-samples';

export function box(type: string, ...payload: Buffer[]): Buffer {
  let size = 8;
  for (const p of payload) size += p.length;
  const head = Buffer.allocUnsafe(8);
  head.writeUInt32BE(size, 0);
  head.write(type, 4, 4, 'latin1');
  return Buffer.concat([head, ...payload], size);
}

export function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  const vf = Buffer.allocUnsafe(4);
  vf.writeUInt32BE(((version & 0xff) << 24) | (flags & 0xffffff), 0);
  return box(type, vf, ...payload);
}

export function u32s(...values: number[]): Buffer {
  const b = Buffer.allocUnsafe(values.length * 4);
  values.forEach((v, i) => b.writeUInt32BE(v >>> 0, i * 4));
  return b;
}

export function u16s(...values: number[]): Buffer {
  const b = Buffer.allocUnsafe(values.length * 2);
  values.forEach((v, i) => b.writeUInt16BE(v & 0xffff, i * 2));
  return b;
}

export const MATRIX = u32s(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

/** `isom` with the brands players look for; the file is laid out for progressive play (moov first) */
export function ftyp(hevc: boolean): Buffer {
  return box('ftyp', Buffer.from('isom', 'latin1'), u32s(0x200), Buffer.from(`isomiso2${hevc ? 'hvc1' : 'avc1'}mp41`, 'latin1'));
}

/** the mdat header for `payload` bytes: the 64-bit form past 4 GiB */
export function mdatHeader(payload: number): Buffer {
  if (payload + 8 <= 0xffffffff) {
    const b = Buffer.allocUnsafe(8);
    b.writeUInt32BE(payload + 8, 0);
    b.write('mdat', 4, 'latin1');
    return b;
  }
  const b = Buffer.allocUnsafe(16);
  b.writeUInt32BE(1, 0);
  b.write('mdat', 4, 'latin1');
  b.writeBigUInt64BE(BigInt(payload + 16), 8);
  return b;
}

function visualEntry(d: SampleDescription): Buffer {
  const head = Buffer.alloc(78);
  head.writeUInt16BE(1, 6); // data_reference_index
  head.writeUInt16BE(d.width, 24);
  head.writeUInt16BE(d.height, 26);
  head.writeUInt32BE(0x00480000, 28); // 72 dpi
  head.writeUInt32BE(0x00480000, 32);
  head.writeUInt16BE(1, 40); // frame_count
  head.writeUInt16BE(0x0018, 74); // depth
  head.writeInt16BE(-1, 76);
  const hevc = d.codec === 'h265';
  return box(hevc ? 'hvc1' : 'avc1', head, box(hevc ? 'hvcC' : 'avcC', d.config));
}

/** an MPEG-4 descriptor: tag, length (4-byte form, as most muxers write it), body */
function descriptor(tag: number, ...body: Buffer[]): Buffer {
  const len = body.reduce((n, b) => n + b.length, 0);
  const head = Buffer.from([tag, 0x80 | ((len >> 21) & 0x7f), 0x80 | ((len >> 14) & 0x7f), 0x80 | ((len >> 7) & 0x7f), len & 0x7f]);
  return Buffer.concat([head, ...body]);
}

/** AudioSampleEntry (ISO) / sound description version 0 (QuickTime): the same 28 bytes */
function audioHead(d: SampleDescription): Buffer {
  const head = Buffer.alloc(28);
  head.writeUInt16BE(1, 6);
  head.writeUInt16BE(d.channels, 16);
  head.writeUInt16BE(16, 18);
  head.writeUInt32BE((d.sampleRate & 0xffff) * 65536, 24);
  return head;
}

function audioEntry(d: SampleDescription, trackId: number): Buffer {
  // G.711 as QuickTime names it: ffmpeg, VLC and Chromium's demuxer read these from an MP4 too (README: players)
  if (d.codec === 'alaw' || d.codec === 'ulaw') return box(d.codec, audioHead(d));
  const decoderConfig = descriptor(0x04,
    Buffer.from([0x40, 0x15, 0, 0, 0]), u32s(0, 0), // AAC (0x40), audio stream, buffer size and bitrates unknown
    descriptor(0x05, d.config));
  const es = descriptor(0x03, Buffer.from([0, trackId & 0xff, 0]), decoderConfig, descriptor(0x06, Buffer.from([0x02])));
  return box('mp4a', audioHead(d), fullBox('esds', 0, 0, es));
}

export function stsd(descs: readonly SampleDescription[], video: boolean, trackId: number): Buffer {
  return fullBox('stsd', 0, 0, u32s(descs.length), ...descs.map((d) => (video ? visualEntry(d) : audioEntry(d, trackId))));
}
