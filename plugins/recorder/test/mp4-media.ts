/** What the MP4 tests share: FLV files made by the gateway's own muxer, MP4 box order, ffprobe of a file. */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { audioUnit, videoUnit, type AccessUnit, type TrackInfo } from '../../../plugin-sdk';
import { h264NalType, h265NalType, joinAnnexB, splitAnnexB } from '../../../plugin-sdk/formats';
import { flvFileHeader, FlvMuxer, serializeTag } from '../../../plugin-sdk/formats';
import { requireTool } from '../../../test/support/tools';

/** an FLV file of these units, as the recorder writes one (FlvMuxer, whole tags) */
export function writeFlv(file: string, units: readonly AccessUnit[], tracks: readonly TrackInfo[] = []): Buffer {
  const muxer = new FlvMuxer();
  for (const t of tracks) muxer.setTrack(t);
  const tags = units.flatMap((u) => muxer.push(u));
  const bytes = Buffer.concat([flvFileHeader(muxer.hasVideo, muxer.hasAudio), ...tags.map((t) => Buffer.from(serializeTag(t)))]);
  fs.writeFileSync(file, bytes);
  return bytes;
}

/** a test pattern encoded by ffmpeg and cut into access units on the AUD each starts with */
export function encodeVideo(codec: 'h264' | 'h265', frames: number): AccessUnit[] {
  const enc =
    codec === 'h264'
      ? ['-c:v', 'libx264', '-bf', '0', '-g', '25', '-x264-params', 'aud=1', '-f', 'h264']
      : ['-c:v', 'libx265', '-x265-params', 'bframes=0:keyint=25:aud=1:log-level=error', '-f', 'hevc'];
  const es = execFileSync(
    requireTool('ffmpeg', 'ffmpeg'),
    ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=25', '-frames:v', String(frames), ...enc, '-'],
    { maxBuffer: 64 << 20 },
  );
  const aud = codec === 'h264' ? 9 : 35;
  const nalType = codec === 'h264' ? h264NalType : h265NalType;
  const units: Buffer[][] = [];
  for (const nal of splitAnnexB(es)) {
    if (nalType(nal) === aud || units.length === 0) units.push([]);
    units[units.length - 1]!.push(nal);
  }
  return units.map((nals, i) => {
    const key = nals.some((n) => (codec === 'h264' ? nalType(n) === 5 : nalType(n) >= 16 && nalType(n) <= 23));
    return videoUnit({ codec, dts: i * 40, keyframe: key, payload: joinAnnexB(nals) });
  });
}

/** `seconds` of a 1 kHz tone as ADTS AAC units (one frame each) at `rate` */
export function encodeAac(seconds: number, rate: number): AccessUnit[] {
  const adts = execFileSync(requireTool('ffmpeg', 'ffmpeg'), [
    '-hide_banner',
    '-loglevel',
    'error',
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=1000:sample_rate=${rate}`,
    '-t',
    String(seconds),
    '-ac',
    '1',
    '-c:a',
    'aac',
    '-b:a',
    '64k',
    '-f',
    'adts',
    '-',
  ]);
  const out: AccessUnit[] = [];
  let at = 0;
  for (let n = 0; at + 7 <= adts.length; n++) {
    const len = ((adts[at + 3]! & 0x03) << 11) | (adts[at + 4]! << 3) | (adts[at + 5]! >> 5);
    out.push(audioUnit({ codec: 'aac', dts: (n * 1024 * 1000) / rate, timescale: rate, duration: 1024, payload: adts.subarray(at, at + len) }));
    at += len;
  }
  return out;
}

/** units of several tracks in one timeline (video first at equal times) */
export function interleave(...tracks: AccessUnit[][]): AccessUnit[] {
  return tracks.flat().sort((a, b) => a.dts - b.dts || (a.kind === 'video' ? -1 : 1));
}

/** the types of the top-level boxes, in order */
export function topBoxes(mp4: Buffer): string[] {
  const types: string[] = [];
  let at = 0;
  while (at + 8 <= mp4.length) {
    let size = mp4.readUInt32BE(at);
    if (size === 1) size = Number(mp4.readBigUInt64BE(at + 8));
    types.push(mp4.toString('latin1', at + 4, at + 8));
    if (size < 8) break;
    at += size;
  }
  return types;
}

export interface Probed {
  duration: number;
  streams: Array<{
    codec_type: string;
    codec_name: string;
    codec_tag_string: string;
    nb_read_frames?: string;
    width?: number;
    height?: number;
    sample_rate?: string;
    channels?: number;
    duration?: string;
    start_time?: string;
  }>;
  stderr: string;
}

/** ffprobe of a file; `count` decodes every frame (nb_read_frames) */
export function probe(file: string, count = true): Probed {
  const r = spawnSync(
    requireTool('ffprobe', 'ffmpeg'),
    [
      '-v',
      'error',
      ...(count ? ['-count_frames'] : []),
      '-show_entries',
      'stream=codec_type,codec_name,codec_tag_string,nb_read_frames,width,height,sample_rate,channels,duration,start_time:format=duration',
      '-of',
      'json',
      file,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`ffprobe failed on ${file}: ${r.stderr}`);
  const j = JSON.parse(r.stdout) as { streams: Probed['streams']; format: { duration: string } };
  return { duration: Number(j.format.duration), streams: j.streams, stderr: r.stderr };
}

export function framesOf(p: Probed, type: 'video' | 'audio'): number {
  return Number(p.streams.find((s) => s.codec_type === type)?.nb_read_frames ?? 0);
}

/**
 * What a file's audio presents, s: from the stream's start to the end of its last packet (ffprobe's stream duration
 * of an MP4 is its media's, an AAC encoder's priming included when the track starts after the video; an FLV has none).
 */
export function audioSpan(file: string): { start: number; seconds: number } {
  const r = spawnSync(
    requireTool('ffprobe', 'ffmpeg'),
    ['-v', 'error', '-select_streams', 'a', '-show_entries', 'packet=pts_time,duration_time:stream=start_time', '-of', 'json', file],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`ffprobe failed on ${file}: ${r.stderr}`);
  const j = JSON.parse(r.stdout) as { packets: Array<{ pts_time: string; duration_time: string }>; streams: Array<{ start_time: string }> };
  const start = Number(j.streams[0]!.start_time);
  let end = start;
  for (const p of j.packets) end = Math.max(end, Number(p.pts_time) + Number(p.duration_time));
  return { start, seconds: end - start };
}
