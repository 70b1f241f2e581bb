/**
 * The progressive MP4's own boxes: ftyp, the mdat header, and the sample descriptions (the sample entries, and
 * QuickTime's alaw / ulaw for G.711, come from plugin-sdk/formats/mp4-box.ts with hls-out's). The tables are in
 * mp4-moov.ts.
 */
import { aacSampleEntry, audioSampleHead, box, fullBox, u32s, visualSampleEntry } from '../../../plugin-sdk/formats';
import type { SampleDescription } from './mp4-samples';

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

function audioEntry(d: SampleDescription, trackId: number): Buffer {
  // G.711 as QuickTime names it: ffmpeg, VLC and Chromium's demuxer read these from an MP4 too (README: players)
  if (d.codec === 'alaw' || d.codec === 'ulaw') return box(d.codec, audioSampleHead(d.channels, d.sampleRate));
  return aacSampleEntry(d.channels, d.sampleRate, d.config, trackId);
}

export function stsd(descs: readonly SampleDescription[], video: boolean, trackId: number): Buffer {
  return fullBox(
    'stsd',
    0,
    0,
    u32s(descs.length),
    ...descs.map((d) => (video ? visualSampleEntry(d.codec as 'h264' | 'h265', d.width, d.height, d.config) : audioEntry(d, trackId))),
  );
}
