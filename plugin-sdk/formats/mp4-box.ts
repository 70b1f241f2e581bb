/**
 * ISO BMFF (MP4) box writers shared by the MP4 forms plugins write: hls-out's fragmented MP4 (CMAF) and the
 * recorder's progressive MP4. The generic box, the movie and track headers both forms lay out alike (timescale and
 * duration as given: 0 in a fragmented init segment), and the sample entries: avc1 / hvc1 with their avcC / hvcC,
 * mp4a with its esds.
 */
import { Buffer } from 'node:buffer';

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

/** the identity transformation matrix of mvhd and tkhd */
export const MATRIX = u32s(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

/** movie header, version 0: `duration` in `timescale` ticks */
export function mvhd(timescale: number, duration: number, nextTrackId: number): Buffer {
  return fullBox('mvhd', 0, 0, u32s(0, 0, timescale, duration, 0x00010000), u16s(0x0100, 0), u32s(0, 0), MATRIX, Buffer.alloc(24), u32s(nextTrackId));
}

/** track header, version 0, enabled and in the movie; width and height are the video's (0 for audio) */
export function tkhd(id: number, duration: number, video: boolean, width: number, height: number): Buffer {
  return fullBox(
    'tkhd',
    0,
    3,
    u32s(0, 0, id, 0, duration),
    u32s(0, 0),
    u16s(0, 0, video ? 0 : 0x0100, 0),
    MATRIX,
    u32s(video ? width * 65536 : 0, video ? height * 65536 : 0),
  );
}

/** media header, version 0, language 'und' (three 5-bit letters) */
export function mdhd(timescale: number, duration: number): Buffer {
  return fullBox('mdhd', 0, 0, u32s(0, 0, timescale, duration), u16s(0x55c4, 0));
}

/** the handler, the media header (vmhd / smhd) and the data reference of a video or sound track */
export function hdlr(video: boolean): Buffer {
  const name = Buffer.from(video ? 'VideoHandler\0' : 'SoundHandler\0', 'latin1');
  return fullBox('hdlr', 0, 0, u32s(0), Buffer.from(video ? 'vide' : 'soun', 'latin1'), Buffer.alloc(12), name);
}

export function mediaHeader(video: boolean): Buffer {
  return video ? fullBox('vmhd', 0, 1, Buffer.alloc(8)) : fullBox('smhd', 0, 0, Buffer.alloc(4));
}

/** data in this file: one self-contained `url ` reference */
export function dinf(): Buffer {
  return box('dinf', fullBox('dref', 0, 0, u32s(1), fullBox('url ', 0, 1)));
}

/** avc1 / hvc1 VisualSampleEntry with its avcC / hvcC record */
export function visualSampleEntry(codec: 'h264' | 'h265', width: number, height: number, config: Buffer): Buffer {
  const head = Buffer.alloc(78);
  head.writeUInt16BE(1, 6); // data_reference_index
  head.writeUInt16BE(width, 24);
  head.writeUInt16BE(height, 26);
  head.writeUInt32BE(0x00480000, 28); // 72 dpi
  head.writeUInt32BE(0x00480000, 32);
  head.writeUInt16BE(1, 40); // frame_count
  head.writeUInt16BE(0x0018, 74); // depth
  head.writeInt16BE(-1, 76);
  const hevc = codec === 'h265';
  return box(hevc ? 'hvc1' : 'avc1', head, box(hevc ? 'hvcC' : 'avcC', config));
}

/** an AudioSampleEntry's 28 bytes (ISO), which QuickTime's sound description version 0 shares */
export function audioSampleHead(channels: number, sampleRate: number): Buffer {
  const head = Buffer.alloc(28);
  head.writeUInt16BE(1, 6);
  head.writeUInt16BE(channels, 16);
  head.writeUInt16BE(16, 18);
  head.writeUInt32BE((sampleRate & 0xffff) * 65536, 24);
  return head;
}

/** an MPEG-4 descriptor: tag, length (4-byte form, as most muxers write it), body */
function descriptor(tag: number, ...body: Buffer[]): Buffer {
  const len = body.reduce((n, b) => n + b.length, 0);
  const head = Buffer.from([tag, 0x80 | ((len >> 21) & 0x7f), 0x80 | ((len >> 14) & 0x7f), 0x80 | ((len >> 7) & 0x7f), len & 0x7f]);
  return Buffer.concat([head, ...body]);
}

/** mp4a with its esds: AAC of this AudioSpecificConfig */
export function aacSampleEntry(channels: number, sampleRate: number, config: Buffer, trackId: number): Buffer {
  const decoderConfig = descriptor(
    0x04,
    Buffer.from([0x40, 0x15, 0, 0, 0]),
    u32s(0, 0), // AAC (0x40), audio stream, buffer size and bitrates unknown
    descriptor(0x05, config),
  );
  const es = descriptor(0x03, Buffer.from([0, trackId & 0xff, 0]), decoderConfig, descriptor(0x06, Buffer.from([0x02])));
  return box('mp4a', audioSampleHead(channels, sampleRate), fullBox('esds', 0, 0, es));
}
