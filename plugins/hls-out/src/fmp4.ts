/**
 * A small fragmented-MP4 (CMAF-style) writer: the init segment (ftyp + moov with avc1 / hvc1 / mp4a sample entries
 * and mvex) and media fragments (moof + mdat, one traf per track). Written here rather than through mediabunny:
 * a fragment is built synchronously in one allocation from the samples' NAL units (see the plugin README for the
 * cost per part against mediabunny's).
 */
import type { MuxSample, MuxTrack } from './mux-types';

const MATRIX = [0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000];

function box(type: string, ...payload: Buffer[]): Buffer {
  let size = 8;
  for (const p of payload) size += p.length;
  const head = Buffer.allocUnsafe(8);
  head.writeUInt32BE(size, 0);
  head.write(type, 4, 4, 'latin1');
  return Buffer.concat([head, ...payload], size);
}

function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  const vf = Buffer.allocUnsafe(4);
  vf.writeUInt32BE(((version & 0xff) << 24) | (flags & 0xffffff), 0);
  return box(type, vf, ...payload);
}

function u32s(...values: number[]): Buffer {
  const b = Buffer.allocUnsafe(values.length * 4);
  values.forEach((v, i) => b.writeUInt32BE(v >>> 0, i * 4));
  return b;
}

function u16s(...values: number[]): Buffer {
  const b = Buffer.allocUnsafe(values.length * 2);
  values.forEach((v, i) => b.writeUInt16BE(v & 0xffff, i * 2));
  return b;
}

function matrix(): Buffer {
  return u32s(...MATRIX);
}

function ftyp(): Buffer {
  return box('ftyp', Buffer.from('iso6', 'latin1'), u32s(0), Buffer.from('iso6cmfcmp41', 'latin1'));
}

function mvhd(nextTrackId: number): Buffer {
  return fullBox('mvhd', 0, 0,
    u32s(0, 0, 1000, 0, 0x00010000), u16s(0x0100, 0), u32s(0, 0), matrix(), Buffer.alloc(24), u32s(nextTrackId));
}

function tkhd(t: MuxTrack): Buffer {
  const video = t.kind === 'video';
  return fullBox('tkhd', 0, 3,
    u32s(0, 0, t.id, 0, 0, 0, 0), u16s(0, 0, video ? 0 : 0x0100, 0), matrix(),
    u32s(video ? (t.width ?? 0) * 65536 : 0, video ? (t.height ?? 0) * 65536 : 0));
}

function mdhd(timescale: number): Buffer {
  // language 'und' packed as three 5-bit letters
  return fullBox('mdhd', 0, 0, u32s(0, 0, timescale, 0), u16s(0x55c4, 0));
}

function hdlr(video: boolean): Buffer {
  const name = Buffer.from(video ? 'VideoHandler\0' : 'SoundHandler\0', 'latin1');
  return fullBox('hdlr', 0, 0, u32s(0), Buffer.from(video ? 'vide' : 'soun', 'latin1'), Buffer.alloc(12), name);
}

function visualEntry(t: MuxTrack): Buffer {
  const head = Buffer.alloc(78);
  head.writeUInt16BE(1, 6); // data_reference_index
  head.writeUInt16BE(t.width ?? 0, 24);
  head.writeUInt16BE(t.height ?? 0, 26);
  head.writeUInt32BE(0x00480000, 28); // 72 dpi
  head.writeUInt32BE(0x00480000, 32);
  head.writeUInt16BE(1, 40); // frame_count
  head.writeUInt16BE(0x0018, 74); // depth
  head.writeInt16BE(-1, 76);
  const type = t.codec === 'h265' ? 'hvc1' : 'avc1';
  return box(type, head, box(t.codec === 'h265' ? 'hvcC' : 'avcC', t.config));
}

/** an MPEG-4 descriptor: tag, length (4-byte form, as most muxers write it), body */
function descriptor(tag: number, ...body: Buffer[]): Buffer {
  const len = body.reduce((n, b) => n + b.length, 0);
  const head = Buffer.from([tag, 0x80 | ((len >> 21) & 0x7f), 0x80 | ((len >> 14) & 0x7f), 0x80 | ((len >> 7) & 0x7f), len & 0x7f]);
  return Buffer.concat([head, ...body]);
}

function audioEntry(t: MuxTrack): Buffer {
  const head = Buffer.alloc(28);
  head.writeUInt16BE(1, 6);
  head.writeUInt16BE(t.channels ?? 1, 16);
  head.writeUInt16BE(16, 18);
  head.writeUInt32BE(((t.sampleRate ?? 0) & 0xffff) * 65536, 24);
  const decoderConfig = descriptor(0x04,
    Buffer.from([0x40, 0x15, 0, 0, 0]), u32s(0, 0), // AAC (0x40), audio stream, buffer size and bitrates unknown
    descriptor(0x05, t.config));
  const es = descriptor(0x03, Buffer.from([0, t.id & 0xff, 0]), decoderConfig, descriptor(0x06, Buffer.from([0x02])));
  return box('mp4a', head, fullBox('esds', 0, 0, es));
}

function trak(t: MuxTrack): Buffer {
  const video = t.kind === 'video';
  const entry = video ? visualEntry(t) : audioEntry(t);
  const stbl = box('stbl',
    fullBox('stsd', 0, 0, u32s(1), entry),
    fullBox('stts', 0, 0, u32s(0)), fullBox('stsc', 0, 0, u32s(0)), fullBox('stsz', 0, 0, u32s(0, 0)), fullBox('stco', 0, 0, u32s(0)));
  const mediaHeader = video ? fullBox('vmhd', 0, 1, Buffer.alloc(8)) : fullBox('smhd', 0, 0, Buffer.alloc(4));
  const dinf = box('dinf', fullBox('dref', 0, 0, u32s(1), fullBox('url ', 0, 1)));
  return box('trak', tkhd(t), box('mdia', mdhd(t.timescale), hdlr(video), box('minf', mediaHeader, dinf, stbl)));
}

/** ftyp + moov for these tracks (ids as given) */
export function fmp4Init(tracks: ReadonlyArray<MuxTrack>): Buffer {
  const nextId = Math.max(0, ...tracks.map((t) => t.id)) + 1;
  const trex = tracks.map((t) => fullBox('trex', 0, 0, u32s(t.id, 1, 0, 0, 0)));
  return Buffer.concat([ftyp(), box('moov', mvhd(nextId), ...tracks.map(trak), box('mvex', ...trex))]);
}

/** sample_flags: a sync sample depends on nothing; others depend on earlier samples and are not sync samples */
const SYNC_FLAGS = 0x02000000;
const NON_SYNC_FLAGS = 0x01010000;

export interface FragmentTrack {
  track: MuxTrack;
  /** decode time of the first sample, in the track's timescale */
  baseTime: number;
  samples: ReadonlyArray<MuxSample>;
}

const TRUN_FLAGS = 0x000001 | 0x000100 | 0x000200 | 0x000400 | 0x000800; // data offset; duration, size, flags, cto

/**
 * One fragment (moof + mdat) holding each track's samples, in one buffer: the sample bytes (length-prefixed NAL
 * units for video, raw frames for audio) are copied once, straight into place.
 */
export function fmp4Fragment(sequence: number, tracks: ReadonlyArray<FragmentTrack>): Buffer {
  const used = tracks.filter((t) => t.samples.length > 0);
  let moofSize = 8 + 16;
  let dataSize = 0;
  for (const t of used) {
    moofSize += 8 + 16 + 20 + 20 + 16 * t.samples.length;
    for (const s of t.samples) dataSize += s.size;
  }
  const out = Buffer.allocUnsafe(moofSize + 8 + dataSize);
  let at = 0;
  const u32 = (v: number) => { out.writeUInt32BE(v >>> 0, at); at += 4; };
  const tag = (s: string) => { out.write(s, at, 4, 'latin1'); at += 4; };
  u32(moofSize); tag('moof');
  u32(16); tag('mfhd'); u32(0); u32(sequence);
  let dataOffset = moofSize + 8;
  for (const t of used) {
    const n = t.samples.length;
    u32(8 + 16 + 20 + 20 + 16 * n); tag('traf');
    u32(16); tag('tfhd'); u32(0x020000); u32(t.track.id); // default-base-is-moof
    u32(20); tag('tfdt'); u32(0x01000000); out.writeBigUInt64BE(BigInt(Math.max(0, Math.round(t.baseTime))), at); at += 8;
    u32(20 + 16 * n); tag('trun'); u32(0x01000000 | TRUN_FLAGS); u32(n); u32(dataOffset);
    for (const s of t.samples) {
      u32(s.duration);
      u32(s.size);
      u32(s.sync ? SYNC_FLAGS : NON_SYNC_FLAGS);
      out.writeInt32BE(s.cto, at); at += 4;
      dataOffset += s.size;
    }
  }
  u32(8 + dataSize); tag('mdat');
  for (const t of used) for (const s of t.samples) at = s.writeTo(out, at);
  return out;
}
