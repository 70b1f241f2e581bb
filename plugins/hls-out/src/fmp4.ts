/**
 * A small fragmented-MP4 (CMAF-style) writer: the init segment (ftyp + moov with avc1 / hvc1 / mp4a sample entries
 * and mvex) and media fragments (moof + mdat, one traf per track). Written here rather than through mediabunny:
 * a fragment is built synchronously in one allocation from the samples' NAL units (see the plugin README for the
 * cost per part against mediabunny's).
 */
import { aacSampleEntry, box, dinf, fullBox, hdlr, mdhd, mediaHeader, mvhd, tkhd, u32s, visualSampleEntry } from '../../../plugin-sdk/formats';
import type { MuxSample, MuxTrack } from './mux-types';
import { joinAdjacent } from './sample-store';

function ftyp(): Buffer {
  return box('ftyp', Buffer.from('iso6', 'latin1'), u32s(0), Buffer.from('iso6cmfcmp41', 'latin1'));
}

function trak(t: MuxTrack): Buffer {
  const video = t.kind === 'video';
  const entry = video
    ? visualSampleEntry(t.codec === 'h265' ? 'h265' : 'h264', t.width ?? 0, t.height ?? 0, t.config)
    : aacSampleEntry(t.channels ?? 1, t.sampleRate ?? 0, t.config, t.id);
  const stbl = box(
    'stbl',
    fullBox('stsd', 0, 0, u32s(1), entry),
    fullBox('stts', 0, 0, u32s(0)),
    fullBox('stsc', 0, 0, u32s(0)),
    fullBox('stsz', 0, 0, u32s(0, 0)),
    fullBox('stco', 0, 0, u32s(0)),
  );
  // an init segment's durations are 0: the fragments carry the samples
  const header = tkhd(t.id, 0, video, t.width ?? 0, t.height ?? 0);
  return box('trak', header, box('mdia', mdhd(t.timescale, 0), hdlr(video), box('minf', mediaHeader(video), dinf(), stbl)));
}

/** ftyp + moov for these tracks (ids as given) */
export function fmp4Init(tracks: ReadonlyArray<MuxTrack>): Buffer {
  const nextId = Math.max(0, ...tracks.map((t) => t.id)) + 1;
  const trex = tracks.map((t) => fullBox('trex', 0, 0, u32s(t.id, 1, 0, 0, 0)));
  return Buffer.concat([ftyp(), box('moov', mvhd(1000, 0, nextId), ...tracks.map(trak), box('mvex', ...trex))]);
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
 * One fragment (moof + mdat) holding each track's samples: the boxes in one small buffer, then the samples' own
 * bytes (length-prefixed NAL units for video, raw frames for audio, in the stream's sample store), referred to and
 * not copied; neighbours in memory are one slice.
 */
export function fmp4Fragment(sequence: number, tracks: ReadonlyArray<FragmentTrack>): Buffer[] {
  const used = tracks.filter((t) => t.samples.length > 0);
  let moofSize = 8 + 16;
  let dataSize = 0;
  for (const t of used) {
    moofSize += 8 + 16 + 20 + 20 + 16 * t.samples.length;
    for (const s of t.samples) dataSize += s.size;
  }
  const out = Buffer.allocUnsafe(moofSize + 8);
  let at = 0;
  const u32 = (v: number) => {
    out.writeUInt32BE(v >>> 0, at);
    at += 4;
  };
  const tag = (s: string) => {
    out.write(s, at, 4, 'latin1');
    at += 4;
  };
  u32(moofSize);
  tag('moof');
  u32(16);
  tag('mfhd');
  u32(0);
  u32(sequence);
  let dataOffset = moofSize + 8;
  for (const t of used) {
    const n = t.samples.length;
    u32(8 + 16 + 20 + 20 + 16 * n);
    tag('traf');
    u32(16);
    tag('tfhd');
    u32(0x020000);
    u32(t.track.id); // default-base-is-moof
    u32(20);
    tag('tfdt');
    u32(0x01000000);
    out.writeBigUInt64BE(BigInt(Math.max(0, Math.round(t.baseTime))), at);
    at += 8;
    u32(20 + 16 * n);
    tag('trun');
    u32(0x01000000 | TRUN_FLAGS);
    u32(n);
    u32(dataOffset);
    for (const s of t.samples) {
      u32(s.duration);
      u32(s.size);
      u32(s.sync ? SYNC_FLAGS : NON_SYNC_FLAGS);
      out.writeInt32BE(s.cto, at);
      at += 4;
      dataOffset += s.size;
    }
  }
  u32(8 + dataSize);
  tag('mdat');
  const slices: Buffer[] = [out];
  for (const t of used) for (const s of t.samples) slices.push(s.bytes);
  return joinAdjacent(slices);
}
