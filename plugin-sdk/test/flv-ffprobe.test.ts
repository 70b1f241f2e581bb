/**
 * The FLV muxer against ffmpeg: libx264/libx265 test patterns muxed, then read back by ffprobe and decoded by ffmpeg
 * (full tier). flv.test.ts has the muxer's other behaviour, on a capture's frames.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlvMuxer, FlvTag, flvFileHeader, serializeTag } from '../formats/flv';
import { h264NalType, h265NalType, joinAnnexB, splitAnnexB } from '../formats/annexb';
import { audioUnit, shiftUnit, videoUnit, type AccessUnit } from '../media';
import { parseFlv, videoAnnexB, decodeScriptTag, splitLengthPrefixed, parseAvcC, ReadTag } from '../../test/support/flv-reader';
import { requireTool } from '../../test/support/tools';
import { scratchDir } from '../../test/support/paths';
import { g711, muxAll } from './flv-units';

function run(tool: string, args: string[], input?: Buffer): Buffer {
  const bin = requireTool(tool, 'ffmpeg');
  const r = spawnSync(bin, args, { input, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${r.stderr.toString().slice(-2000)}`);
  return r.stdout;
}

function probe(args: string[], input?: Buffer): any {
  return JSON.parse(run('ffprobe', ['-v', 'error', '-of', 'json', ...args], input).toString());
}

/** Encodes a test pattern and splits it into access units on the AUD that starts each one. */
function encodeVideo(codec: 'h264' | 'h265', size = '320x240', frames = 50): AccessUnit[] {
  const enc =
    codec === 'h264'
      ? ['-c:v', 'libx264', '-bf', '0', '-g', '25', '-x264-params', 'aud=1', '-f', 'h264']
      : ['-c:v', 'libx265', '-x265-params', 'bframes=0:keyint=25:aud=1:log-level=error', '-f', 'hevc'];
  const es = run('ffmpeg', [
    '-hide_banner',
    '-loglevel',
    'error',
    '-f',
    'lavfi',
    '-i',
    `testsrc=size=${size}:rate=25`,
    '-frames:v',
    String(frames),
    ...enc,
    '-',
  ]);
  const aud = codec === 'h264' ? 9 : 35;
  const nalType = codec === 'h264' ? h264NalType : h265NalType;
  const units: Buffer[][] = [];
  for (const nal of splitAnnexB(es)) {
    if (nalType(nal) === aud || units.length === 0) units.push([]);
    units[units.length - 1].push(nal);
  }
  return units.map((nals, i) => {
    const key = nals.some((n) => (codec === 'h264' ? nalType(n) === 5 : nalType(n) >= 16 && nalType(n) <= 23));
    return videoUnit({ codec, dts: i * 40, keyframe: key, payload: joinAnnexB(nals) });
  });
}

function encodeAudio(codec: 'pcm_alaw' | 'aac', seconds: number, rate: number): Buffer {
  const fmt = codec === 'pcm_alaw' ? ['-f', 'alaw'] : ['-b:a', '64k', '-f', 'adts'];
  return run('ffmpeg', [
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
    codec,
    ...fmt,
    '-',
  ]);
}

function writeFlv(file: string, muxer: FlvMuxer, tags: FlvTag[]): Buffer {
  const bytes = Buffer.concat([flvFileHeader(muxer.hasVideo, muxer.hasAudio), ...tags.map((t) => Buffer.from(serializeTag(t)))]);
  fs.writeFileSync(file, bytes);
  return bytes;
}

function videoNalTypes(tags: ReadTag[], codec: 'h264' | 'h265'): number[] {
  const types: number[] = [];
  for (const t of tags) {
    if (t.type !== 9 || t.sequenceHeader) continue;
    for (const nal of splitLengthPrefixed(t.data)) types.push(codec === 'h264' ? h264NalType(nal) : h265NalType(nal));
  }
  return types;
}

describe('FLV muxer, read back by ffprobe and ffmpeg', function () {
  let dir: string;
  before(() => {
    dir = scratchDir('flv-mux');
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('muxes H.264 into classic AVC tags that ffprobe reads as 320x240, 50 frames, monotonic timestamps', () => {
    const units = encodeVideo('h264');
    assert.equal(units.length, 50);
    const muxer = new FlvMuxer();
    muxer.setTrack({ kind: 'video', codec: 'h264', width: 320, height: 240, frameRate: 25 });
    const tags = muxAll(muxer, units);
    const file = path.join(dir, 'h264.flv');
    const bytes = writeFlv(file, muxer, tags);

    const flv = parseFlv(bytes);
    assert.equal(flv.header.hasVideo, true);
    assert.equal(flv.header.hasAudio, false);
    const [meta, seq, ...frames] = flv.tags;
    assert.equal(meta.type, 18);
    const md = decodeScriptTag(meta.body);
    assert.equal(md.name, 'onMetaData');
    assert.deepEqual([md.props.width, md.props.height, md.props.videocodecid, md.props.framerate], [320, 240, 7, 25]);
    assert.equal(seq.sequenceHeader, true);
    assert.equal(seq.codec, 'h264');
    assert.deepEqual(
      parseAvcC(seq.data).parameterSets.map((p) => h264NalType(p)),
      [7, 8],
    );
    assert.equal(frames.length, 50);
    assert.ok(frames.every((t) => t.codec === 'h264' && !t.sequenceHeader));
    assert.deepEqual(
      frames.filter((t) => t.keyframe).map((t) => t.timestamp),
      [0, 1000],
    );
    // SPS, PPS and AUD live in the sequence header only
    const nalTypes = videoNalTypes(flv.tags, 'h264');
    assert.ok(nalTypes.includes(5) && nalTypes.includes(1));
    assert.ok(!nalTypes.some((t) => t === 7 || t === 8 || t === 9), `parameter sets or AUD left in frames: ${nalTypes}`);

    const p = probe(['-count_frames', '-show_streams', '-show_packets', file]);
    assert.equal(p.streams.length, 1);
    const s = p.streams[0];
    assert.deepEqual([s.codec_name, s.width, s.height, Number(s.nb_read_frames)], ['h264', 320, 240, 50]);
    const pts = p.packets.map((pk: any) => Number(pk.pts_time));
    assert.equal(pts.length, 50);
    for (let i = 1; i < pts.length; i++) assert.ok(pts[i] > pts[i - 1], `pts not increasing at packet ${i}: ${pts[i - 1]} -> ${pts[i]}`);
    assert.equal(pts[49], 1.96);
  });

  it('re-sends the AVC sequence header when SPS/PPS change, and the new one decodes', () => {
    const first = encodeVideo('h264', '320x240', 25);
    const second = encodeVideo('h264', '160x120', 25).map((u) => shiftUnit(u, 1000));
    const muxer = new FlvMuxer();
    const flv = parseFlv(Buffer.concat([flvFileHeader(true, false), ...muxAll(muxer, [...first, ...second]).map(serializeTag)]));
    const seqs = flv.tags.filter((t) => t.sequenceHeader);
    assert.deepEqual(
      seqs.map((t) => t.timestamp),
      [0, 1000],
    );
    // no track info was given: onMetaData takes the size from each SPS
    const metaSizes = flv.tags
      .filter((t) => t.type === 18)
      .map((t) => decodeScriptTag(t.body).props)
      .map((p) => `${p.width}x${p.height} codec ${p.videocodecid}`);
    assert.deepEqual(metaSizes, ['320x240 codec 7', '160x120 codec 7']);
    const { annexB, frames } = videoAnnexB(flv.tags, 'h264');
    assert.equal(frames, 50);
    const p = probe(['-f', 'h264', '-show_frames', '-show_entries', 'frame=width,height', '-'], annexB);
    const sizes = p.frames.map((f: any) => `${f.width}x${f.height}`);
    assert.equal(sizes.length, 50);
    assert.deepEqual([...new Set(sizes)], ['320x240', '160x120']);
  });

  it('carries composition time (pts - dts) for streams with B frames', () => {
    // ffmpeg's own FLV with B frames is the reference: its frames, re-muxed by us, must keep every pts.
    const ref = run('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=320x240:rate=25',
      '-frames:v',
      '50',
      '-c:v',
      'libx264',
      '-bf',
      '2',
      '-g',
      '25',
      '-f',
      'flv',
      '-',
    ]);
    const refTags = parseFlv(ref).tags;
    const seq = refTags.find((t) => t.sequenceHeader)!;
    const ps = parseAvcC(seq.data).parameterSets;
    const units: AccessUnit[] = refTags
      .filter((t) => t.codec === 'h264' && t.packetType === 1)
      .map((t) =>
        videoUnit({
          codec: 'h264',
          dts: t.timestamp,
          pts: t.timestamp + t.cts,
          keyframe: t.keyframe,
          payload: joinAnnexB([...(t.keyframe ? ps : []), ...splitLengthPrefixed(t.data)]),
        }),
      );
    assert.ok(
      units.some((u, i) => i > 0 && u.pts < units[i - 1].pts),
      'the reference stream should have B frames',
    );
    const muxer = new FlvMuxer();
    const file = path.join(dir, 'bframes.flv');
    writeFlv(file, muxer, muxAll(muxer, units));
    const mine = probe(['-show_packets', '-show_entries', 'packet=pts,dts', file]).packets;
    const theirs = probe(['-show_packets', '-show_entries', 'packet=pts,dts', '-'], ref).packets.filter((_: any, i: number) => i < mine.length);
    assert.equal(mine.length, 50);
    assert.deepEqual(mine, theirs);
    const decoded = probe(['-count_frames', '-show_streams', file]).streams[0];
    assert.equal(Number(decoded.nb_read_frames), 50);
  });

  it('muxes H.265 as Enhanced FLV (hvc1) whose Annex-B ffprobe decodes as hevc 320x240, 50 frames', () => {
    const units = encodeVideo('h265');
    assert.equal(units.length, 50);
    const muxer = new FlvMuxer();
    const tags = muxAll(muxer, units);
    const bytes = writeFlv(path.join(dir, 'h265.flv'), muxer, tags);
    const flv = parseFlv(bytes);
    const video = flv.tags.filter((t) => t.type === 9);
    assert.ok(video.every((t) => t.enhanced && t.codec === 'h265'));
    assert.equal(video[0].sequenceHeader, true);
    assert.equal(video[0].body[0], 0x90, 'SequenceStart: IsExHeader | key frame | packet type 0');
    const frames = video.slice(1);
    assert.equal(frames.length, 50);
    assert.ok(
      frames.every((t) => t.packetType === 3 && t.cts === 0),
      'no B frames: CodedFramesX',
    );
    assert.equal(frames[0].body[0] >> 4, 0x9, 'key frame type in the upper bits');
    assert.equal(frames[1].body[0] >> 4, 0xa, 'inter frame type in the upper bits');
    const md = decodeScriptTag(flv.tags[0].body).props;
    assert.deepEqual([md.width, md.height, md.videocodecid], [320, 240, 0x68766331]);
    const nalTypes = videoNalTypes(flv.tags, 'h265');
    assert.ok(!nalTypes.some((t) => t >= 32 && t <= 35), `VPS/SPS/PPS/AUD left in frames: ${nalTypes}`);

    // ffmpeg's own hvcC (from an MP4 of the same encode) is the reference for the record's header fields
    const mp4 = path.join(dir, 'ref.mp4');
    run('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=320x240:rate=25',
      '-frames:v',
      '50',
      '-c:v',
      'libx265',
      '-x265-params',
      'bframes=0:keyint=25:aud=1:log-level=error',
      '-tag:v',
      'hvc1',
      '-y',
      mp4,
    ]);
    const mp4Bytes = fs.readFileSync(mp4);
    const boxAt = mp4Bytes.indexOf('hvcC');
    assert.ok(boxAt > 0);
    const theirs = mp4Bytes.subarray(boxAt + 4, boxAt - 4 + mp4Bytes.readUInt32BE(boxAt - 4));
    const ours = video[0].data;
    assert.ok(ours.subarray(0, 13).equals(theirs.subarray(0, 13)), 'version, profile/tier/level');
    assert.ok(ours.subarray(16, 19).equals(theirs.subarray(16, 19)), 'chroma format, bit depths');
    assert.equal(ours[21] & 0x3f, theirs[21] & 0x3f, 'temporal layers, nesting, NAL length size');

    const { annexB, frames: n } = videoAnnexB(flv.tags, 'h265');
    assert.equal(n, 50);
    const p = probe(['-f', 'hevc', '-count_frames', '-show_streams', '-'], annexB);
    const s = p.streams[0];
    assert.deepEqual([s.codec_name, s.width, s.height, Number(s.nb_read_frames)], ['hevc', 320, 240, 50]);
  });

  it('writes G.711A as SoundFormat 7 that ffmpeg decodes to the same PCM as the raw A-law', () => {
    const alaw = encodeAudio('pcm_alaw', 1, 8000);
    assert.equal(alaw.length, 8000);
    const muxer = new FlvMuxer();
    muxer.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    const units: AccessUnit[] = [];
    for (let i = 0; i < alaw.length / 160; i++) {
      units.push(g711('g711a', i * 20, alaw.subarray(i * 160, (i + 1) * 160)));
    }
    const file = path.join(dir, 'alaw.flv');
    const bytes = writeFlv(file, muxer, muxAll(muxer, units));
    const flv = parseFlv(bytes);
    const audio = flv.tags.filter((t) => t.type === 8);
    assert.equal(audio.length, 50);
    assert.ok(audio.every((t) => t.soundFlags === 0x72));

    const s = probe(['-show_streams', file]).streams[0];
    assert.deepEqual([s.codec_name, Number(s.sample_rate), s.channels], ['pcm_alaw', 8000, 1]);
    const fromFlv = run('ffmpeg', ['-v', 'error', '-i', file, '-f', 's16le', '-']);
    const fromRaw = run('ffmpeg', ['-v', 'error', '-f', 'alaw', '-ar', '8000', '-ac', '1', '-i', '-', '-f', 's16le', '-'], alaw);
    assert.equal(fromFlv.length, 16000);
    assert.ok(fromFlv.equals(fromRaw));
  });

  it('writes G.711U as SoundFormat 8', () => {
    const muxer = new FlvMuxer();
    muxer.setTrack({ kind: 'audio', codec: 'g711u', sampleRate: 8000, channels: 1 });
    const tags = muxer.push(g711('g711u', 0, Buffer.alloc(160, 0xff)));
    const file = path.join(dir, 'ulaw.flv');
    writeFlv(file, muxer, tags);
    const s = probe(['-show_streams', file]).streams[0];
    assert.deepEqual([s.codec_name, Number(s.sample_rate)], ['pcm_mulaw', 8000]);
  });

  it('writes AAC from ADTS with an AudioSpecificConfig sequence header, interleaved with H.264', () => {
    const adts = encodeAudio('aac', 2, 8000);
    const frames: Buffer[] = [];
    for (let at = 0; at < adts.length;) {
      const len = ((adts[at + 3] & 3) << 11) | (adts[at + 4] << 3) | (adts[at + 5] >> 5);
      frames.push(adts.subarray(at, at + len));
      at += len;
    }
    const audio: AccessUnit[] = frames.map((f, i) => audioUnit({ codec: 'aac', dts: i * 128, payload: f, timescale: 8000, duration: 1024 }));
    const units = [...encodeVideo('h264'), ...audio].sort((a, b) => a.dts - b.dts);
    const muxer = new FlvMuxer();
    const file = path.join(dir, 'av.flv');
    const bytes = writeFlv(file, muxer, muxAll(muxer, units));
    const flv = parseFlv(bytes);
    assert.equal(flv.header.hasAudio && flv.header.hasVideo, true);
    const aac = flv.tags.filter((t) => t.codec === 'aac');
    assert.equal(aac[0].sequenceHeader, true);
    assert.equal(aac.filter((t) => !t.sequenceHeader).length, frames.length);
    assert.ok(aac.every((t) => t.soundFlags === 0xaf));

    const p = probe(['-count_frames', '-show_streams', file]);
    const a = p.streams.find((s: any) => s.codec_type === 'audio');
    const v = p.streams.find((s: any) => s.codec_type === 'video');
    assert.deepEqual([a.codec_name, Number(a.sample_rate), a.channels, Number(a.nb_read_frames)], ['aac', 8000, 1, frames.length]);
    assert.deepEqual([v.codec_name, Number(v.nb_read_frames)], ['h264', 50]);
  });

  it('gives config tags for a file that starts mid-stream', () => {
    const units = encodeVideo('h264');
    const muxer = new FlvMuxer();
    muxAll(muxer, units.slice(0, 25));
    const tail = muxAll(muxer, units.slice(25));
    const file = path.join(dir, 'mid.flv');
    const tags = [...muxer.configTags(1000), ...tail];
    assert.deepEqual(
      tags.slice(0, 2).map((t) => [t.type, t.timestamp]),
      [
        [18, 0],
        [9, 1000],
      ],
    );
    writeFlv(file, muxer, tags);
    const streams = probe(['-count_frames', '-show_streams', file]).streams;
    assert.equal(streams.length, 1, 'onMetaData read as metadata, not as a subtitle stream');
    const s = streams[0];
    assert.deepEqual([s.codec_name, s.width, s.height, Number(s.nb_read_frames)], ['h264', 320, 240, 25]);
  });
});
