/**
 * The moov of a record's MP4, from the FLV index: one trak per track, its times straight from the FLV tags'
 * timestamps (ms, so the MP4 lasts what the FLV lasts), one sample per chunk (samples lie in the mdat in FLV order,
 * audio and video interleaved as recorded), and an edit list where a track starts after the other or its first
 * picture is shown after it is decoded (B-frames).
 */
import type { FlvIndex } from './flv-index';
import { box, dinf, fullBox, hdlr, mdhd, mediaHeader, mvhd, tkhd, u32s } from '../../../plugin-sdk/formats';
import { stsd } from './mp4-boxes';
import type { SampleDescription } from './mp4-samples';

/** every time in the file is in ms: the FLV's own unit */
const TIMESCALE = 1000;
const DEFAULT_FRAME_MS = 40;

interface TrackPlan {
  id: number;
  video: boolean;
  descs: SampleDescription[];
  /** sample numbers (in the index) of this track, in order */
  members: Uint32Array;
  /** decode times from the track's first sample, never decreasing */
  times: Float64Array;
  durations: Uint32Array;
  /** the decode time of the track's first sample in the FLV */
  firstDts: number;
  /**
   * the media time the track's presentation starts at: its first picture's composition offset, or an encoder's
   * priming (mp4-aac.ts); the edit list starts there
   */
  firstCts: number;
  /** media time at which the last picture or sound ends (composition offsets included) */
  presentEnd: number;
  mediaDuration: number;
  /** where the track's first presented sample is in the movie (an empty edit before it) */
  start: number;
}

/** the track's last sample lasts what its codec says, or as long as the one before it */
function lastDuration(index: FlvIndex, descs: SampleDescription[], members: Uint32Array, times: Float64Array): number {
  const s = index.samples;
  const n = members.length;
  const i = members[n - 1]!;
  const d = descs[s.desc[i]!]!;
  if (d.codec === 'aac') return Math.max(1, Math.round((1024 * 1000) / d.sampleRate));
  if (d.codec === 'alaw' || d.codec === 'ulaw') return Math.max(1, Math.round(s.size[i]! / d.channels / 8));
  return n >= 2 ? Math.max(1, times[n - 1]! - times[n - 2]!) : DEFAULT_FRAME_MS;
}

function planTracks(index: FlvIndex): TrackPlan[] {
  const s = index.samples;
  const counts = [0, 0];
  for (let i = 0; i < s.count; i++) counts[s.track[i]!]!++;
  const plans: TrackPlan[] = [];
  for (const track of [0, 1]) {
    const n = counts[track]!;
    if (n === 0) continue;
    const members = new Uint32Array(n);
    const times = new Float64Array(n);
    let k = 0;
    let firstDts = 0;
    for (let i = 0; i < s.count; i++) {
      if (s.track[i] !== track) continue;
      if (k === 0) firstDts = s.dts[i]!;
      members[k] = i;
      // a timestamp that steps back (a corrupt tag, a clock reset) holds the time: stts cannot go backwards
      times[k] = Math.max(s.dts[i]! - firstDts, k > 0 ? times[k - 1]! : 0);
      k++;
    }
    const descs = index.descriptions[track]!;
    const durations = new Uint32Array(n);
    for (let j = 0; j < n - 1; j++) durations[j] = times[j + 1]! - times[j]!;
    durations[n - 1] = lastDuration(index, descs, members, times);
    let presentEnd = 0;
    for (let j = 0; j < n; j++) presentEnd = Math.max(presentEnd, times[j]! + s.cts[members[j]!]! + durations[j]!);
    let firstCts = Math.max(0, s.cts[members[0]!]!);
    const edit = track === 1 ? index.audioEdit : undefined;
    if (edit) {
      // an encoded track: its priming is skipped and its padding (the last frame's silence) not presented; the
      // last frame lasts only what is left of the input, so the media ends where the sound does
      firstCts += edit.skipMs;
      presentEnd = Math.min(presentEnd, firstCts + edit.presentMs);
      durations[n - 1] = Math.max(1, Math.min(durations[n - 1]!, presentEnd - times[n - 1]!));
    }
    plans.push({
      id: plans.length + 1,
      video: track === 0,
      descs,
      members,
      times,
      durations,
      firstDts,
      firstCts,
      presentEnd,
      mediaDuration: times[n - 1]! + durations[n - 1]!,
      start: 0,
    });
  }
  // The movie starts with the first sample presented, of whichever track: the FLV's timeline, shifted.
  const t0 = Math.min(...plans.map((p) => p.firstDts + p.firstCts));
  for (const p of plans) p.start = p.firstDts + p.firstCts - t0;
  return plans;
}

/** the track's length in the movie */
function movieDuration(p: TrackPlan): number {
  return p.start + Math.max(0, p.presentEnd - p.firstCts);
}

/** run-length (count, value) pairs of `values` */
function runs(n: number, value: (j: number) => number): Buffer {
  const out: number[] = [];
  for (let j = 0; j < n; j++) {
    const v = value(j);
    if (out.length && out[out.length - 1] === v) out[out.length - 2]!++;
    else out.push(1, v);
  }
  const b = Buffer.allocUnsafe(4 + out.length * 4);
  b.writeUInt32BE(out.length / 2, 0);
  for (let j = 0; j < out.length; j++) b.writeUInt32BE(out[j]! >>> 0, 4 + j * 4);
  return b;
}

function column(n: number, width: 4 | 8, value: (j: number) => number): Buffer {
  const b = Buffer.allocUnsafe(n * width);
  for (let j = 0; j < n; j++) {
    if (width === 4) b.writeUInt32BE(value(j) >>> 0, j * 4);
    else b.writeBigUInt64BE(BigInt(value(j)), j * 8);
  }
  return b;
}

function stbl(index: FlvIndex, p: TrackPlan, offsetOf: (sample: number) => number, co64: boolean): Buffer {
  const s = index.samples;
  const n = p.members.length;
  const m = (j: number): number => p.members[j]!;
  const parts = [
    stsd(p.descs, p.video, p.id),
    fullBox(
      'stts',
      0,
      0,
      runs(n, (j) => p.durations[j]!),
    ),
  ];
  let signed = false;
  let anyCts = false;
  for (let j = 0; j < n; j++) {
    const c = s.cts[m(j)]!;
    if (c !== 0) anyCts = true;
    if (c < 0) signed = true;
  }
  if (anyCts)
    parts.push(
      fullBox(
        'ctts',
        signed ? 1 : 0,
        0,
        runs(n, (j) => s.cts[m(j)]!),
      ),
    );
  if (p.video) {
    const keys: number[] = [];
    for (let j = 0; j < n; j++) if (s.key[m(j)]) keys.push(j + 1);
    if (keys.length < n)
      parts.push(
        fullBox(
          'stss',
          0,
          0,
          u32s(keys.length),
          column(keys.length, 4, (j) => keys[j]!),
        ),
      );
  }
  // one sample per chunk; a new stsc entry wherever the sample description changes
  const stsc: number[] = [];
  for (let j = 0; j < n; j++) {
    const d = s.desc[m(j)]! + 1;
    if (j === 0 || d !== stsc[stsc.length - 1]) stsc.push(j + 1, 1, d);
  }
  parts.push(
    fullBox(
      'stsc',
      0,
      0,
      u32s(stsc.length / 3),
      column(stsc.length, 4, (j) => stsc[j]!),
    ),
  );
  parts.push(
    fullBox(
      'stsz',
      0,
      0,
      u32s(0, n),
      column(n, 4, (j) => s.size[m(j)]!),
    ),
  );
  parts.push(
    co64
      ? fullBox(
          'co64',
          0,
          0,
          u32s(n),
          column(n, 8, (j) => offsetOf(m(j))),
        )
      : fullBox(
          'stco',
          0,
          0,
          u32s(n),
          column(n, 4, (j) => offsetOf(m(j))),
        ),
  );
  return box('stbl', ...parts);
}

function edts(p: TrackPlan): Buffer[] {
  if (p.start === 0 && p.firstCts === 0 && p.presentEnd === p.mediaDuration) return [];
  const entries: number[] = [];
  if (p.start > 0) entries.push(p.start, 0xffffffff, 0x00010000); // an empty edit: the track starts later
  entries.push(Math.max(0, p.presentEnd - p.firstCts), p.firstCts, 0x00010000);
  return [box('edts', fullBox('elst', 0, 0, u32s(entries.length / 3, ...entries)))];
}

function trak(index: FlvIndex, p: TrackPlan, offsetOf: (sample: number) => number, co64: boolean): Buffer {
  const d0 = p.descs[0]!;
  const header = tkhd(p.id, movieDuration(p), p.video, d0.width, d0.height);
  const media = box('mdia', mdhd(TIMESCALE, p.mediaDuration), hdlr(p.video), box('minf', mediaHeader(p.video), dinf(), stbl(index, p, offsetOf, co64)));
  return box('trak', header, ...edts(p), media);
}

export interface Moov {
  box: Buffer;
  /** the movie's length, ms */
  durationMs: number;
  hevc: boolean;
}

/** `offsetOf(sample)`: where the sample will be in the output file (its chunk offset) */
export function buildMoov(index: FlvIndex, offsetOf: (sample: number) => number, co64: boolean): Moov {
  const plans = planTracks(index);
  const durationMs = Math.max(0, ...plans.map(movieDuration));
  const movie = mvhd(TIMESCALE, durationMs, plans.length + 1);
  const hevc = index.descriptions[0].some((d) => d.codec === 'h265');
  return { box: box('moov', movie, ...plans.map((p) => trak(index, p, offsetOf, co64))), durationMs, hevc };
}
