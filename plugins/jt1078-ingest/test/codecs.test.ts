import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { scratchDir } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import { splitAnnexB } from '../../../plugin-sdk/formats';
import { BitReader, NAL_SCAN, buildAvcC, extractH264ParameterSets, h264IsKeyframe, parseH264Sps, scanH264, unescapeRbsp } from '../../../plugin-sdk/formats';
import { buildHvcC, extractH265ParameterSets, h265IsKeyframe, parseH265Sps, scanH265 } from '../../../plugin-sdk/formats';
import { VideoTrackInfo } from '../../../plugin-sdk';
import { Jt1078Packer } from '../src/packer';
import { Jt1078Parser } from '../src/parser';
import { Collector } from './helpers';
import { Jt1078StreamAssembler } from '../src/stream-assembler';
import { ffprobeRaw } from './helpers';

function ffmpeg(args: string[]): Buffer {
  const bin = requireTool('ffmpeg', 'ffmpeg');
  const r = spawnSync(bin, ['-hide_banner', '-loglevel', 'error', '-y', ...args], { maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** The payload of the first box of this type in an MP4 file (ffmpeg's own avcC / hvcC). */
function mp4Box(file: string, type: string): Buffer {
  const d = fs.readFileSync(file);
  const i = d.indexOf(Buffer.from(type, 'latin1'));
  assert.ok(i > 4, `no ${type} box in ${file}`);
  return d.subarray(i + 4, i - 4 + d.readUInt32BE(i - 4));
}

/** Access units of an Annex-B H.265 stream (a new one at each first slice of a picture). */
function hevcAccessUnits(stream: Buffer): Buffer[][] {
  const aus: Buffer[][] = [];
  let cur: Buffer[] = [];
  let hasVcl = false;
  for (const nal of splitAnnexB(stream)) {
    const t = (nal[0] >> 1) & 0x3f;
    const firstSlice = t < 32 && (nal[2] & 0x80) !== 0;
    const prefix = t === 32 || t === 33 || t === 34 || t === 35 || t === 39;
    if (hasVcl && (firstSlice || prefix)) {
      aus.push(cur);
      cur = [];
      hasVcl = false;
    }
    cur.push(nal);
    if (t < 32) hasVcl = true;
  }
  if (cur.length) aus.push(cur);
  return aus;
}

const annexB = (nals: Buffer[]): Buffer => Buffer.concat(nals.flatMap((n) => [Buffer.from([0, 0, 0, 1]), n]));

describe('H.264 / H.265 helpers', function () {
  this.timeout(60000);
  let dir: string;
  before(() => {
    dir = scratchDir('jt1078-codecs');
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('removes emulation-prevention bytes', () => {
    assert.deepEqual([...unescapeRbsp(Buffer.from([0x67, 0, 0, 3, 1, 0, 0, 3, 0, 0, 0, 3]))], [0x67, 0, 0, 1, 0, 0, 0, 0, 0]);
    const plain = Buffer.from([0x67, 1, 2, 3]);
    assert.equal(unescapeRbsp(plain), plain);
    const r = new BitReader(Buffer.from([0b10100110, 0b01000000]));
    // 1 | 010 | 011 | 00100 -> ue 0, 1, 2, then code 3 read as se = +2
    assert.deepEqual([r.ue(), r.ue(), r.ue(), r.se()], [0, 1, 2, 2]);
  });

  for (const [size, pixFmt, profile] of [
    ['334x250', 'yuv420p', 'High'],
    ['320x180', 'yuv420p', 'High'],
    ['330x246', 'yuv444p', 'High 4:4:4 Predictive'],
  ] as const) {
    it(`parses a libx264 SPS with cropping: ${size} ${pixFmt}, and builds the same avcC as ffmpeg`, () => {
      const file = path.join(dir, `x264-${size}-${pixFmt}.h264`);
      fs.writeFileSync(
        file,
        ffmpeg(['-f', 'lavfi', '-i', `testsrc=size=${size}:rate=25`, '-t', '0.2', '-c:v', 'libx264', '-pix_fmt', pixFmt, '-f', 'h264', '-']),
      );
      const stream = fs.readFileSync(file);
      const { sps, pps } = extractH264ParameterSets(stream);
      assert.ok(sps && pps);
      const info = parseH264Sps(sps);
      const [w, h] = size.split('x').map(Number);
      assert.equal(info.width, w);
      assert.equal(info.height, h);
      assert.equal(info.profile, profile);
      const probe = ffprobeRaw(file, 'h264');
      assert.equal(info.levelIdc, probe.level);
      assert.equal(info.chromaFormatIdc, pixFmt === 'yuv444p' ? 3 : 1);
      assert.equal(info.frameRate, 25);
      const mp4 = path.join(dir, `x264-${size}-${pixFmt}.mp4`);
      ffmpeg(['-i', file, '-c', 'copy', mp4]);
      assert.equal(buildAvcC(sps, pps).toString('hex'), mp4Box(mp4, 'avcC').toString('hex'));
      assert.ok(h264IsKeyframe(stream));
      const flags = scanH264(stream);
      assert.equal(flags & (NAL_SCAN.SPS | NAL_SCAN.PPS | NAL_SCAN.KEY | NAL_SCAN.VCL), NAL_SCAN.SPS | NAL_SCAN.PPS | NAL_SCAN.KEY | NAL_SCAN.VCL);
    });
  }

  it('flags 3-byte start codes and frames without start codes', () => {
    assert.equal(scanH264(Buffer.from([0, 0, 0, 1, 0x41, 9, 0, 0, 0, 1, 0x41, 8])) & NAL_SCAN.NEEDS_NORMALISING, 0);
    assert.ok(scanH264(Buffer.from([0, 0, 0, 1, 0x41, 9, 0, 0, 1, 0x41, 8])) & NAL_SCAN.NEEDS_NORMALISING);
    assert.ok(scanH264(Buffer.from([0, 0, 1, 0x65, 9])) & NAL_SCAN.NEEDS_NORMALISING);
    assert.ok(scanH264(Buffer.from([0x65, 1, 2])) & NAL_SCAN.NO_START_CODE);
    assert.equal(h264IsKeyframe(Buffer.from([0, 0, 0, 1, 0x41, 9])), false);
  });

  describe('H.265 (libx265 testsrc 320x240, 25 frames)', () => {
    let stream: Buffer;
    let file: string;
    before(() => {
      file = path.join(dir, 'x265.hevc');
      stream = ffmpeg([
        '-f',
        'lavfi',
        '-i',
        'testsrc=size=320x240:rate=25',
        '-t',
        '1',
        '-c:v',
        'libx265',
        '-x265-params',
        'log-level=error',
        '-f',
        'hevc',
        '-',
      ]);
      fs.writeFileSync(file, stream);
    });

    it('parses the SPS as ffprobe sees it and builds the same hvcC as ffmpeg', () => {
      const { vps, sps, pps } = extractH265ParameterSets(stream);
      assert.ok(vps && sps && pps);
      const info = parseH265Sps(sps);
      const probe = ffprobeRaw(file, 'hevc');
      assert.equal(info.width, 320);
      assert.equal(info.height, 240);
      assert.equal(info.profile, probe.profile); // testsrc is RGB, so x265 encodes 4:4:4: 'Rext'
      assert.equal(info.generalLevelIdc, probe.level);
      assert.equal(info.chromaFormatIdc, 3);
      assert.equal(info.generalTierFlag, 0);
      const mp4 = path.join(dir, 'x265.mp4');
      ffmpeg(['-i', file, '-c', 'copy', mp4]);
      assert.equal(buildHvcC(vps, sps, pps).toString('hex'), mp4Box(mp4, 'hvcC').toString('hex'));
      assert.ok(h265IsKeyframe(stream));
      assert.ok(scanH265(stream) & NAL_SCAN.VPS);
    });

    it('goes through JT/T 1078 packets (PT 99) and the assembler into access units ffprobe decodes', () => {
      const aus = hevcAccessUnits(stream);
      assert.equal(aus.length, 25);
      const packer = new Jt1078Packer({ layout: '2019', sim: '13800138000', channel: 2 });
      const wire: Buffer[] = [];
      aus.forEach((nals, i) => {
        const payload = annexB(nals);
        const irap = (scanH265(payload) & NAL_SCAN.KEY) !== 0;
        wire.push(...packer.packFrame({ dataType: irap ? 0 : 1, pt: 99, timestamp: 5_000_000 + 40 * i, payload }));
      });
      const out = new Collector();
      const asm = new Jt1078StreamAssembler(out);
      const parser = new Jt1078Parser((p) => asm.push(p), { layout: '2013' });
      for (const b of wire) parser.push(b);
      parser.end();
      assert.equal(parser.layout, '2019');
      assert.equal(out.tracks.length, 1);
      const t = out.tracks[0] as VideoTrackInfo;
      assert.equal(t.codec, 'h265');
      assert.equal(t.width, 320);
      assert.equal(t.height, 240);
      assert.equal(t.profile, 'Rext');
      assert.ok(t.vps && t.sps && t.pps);
      const units = out.video();
      assert.equal(units.length, 25);
      assert.equal(units[0].keyframe, true);
      assert.equal(units[0].dts, 0);
      assert.equal(units[24].dts, 960);
      const outFile = path.join(dir, 'out.hevc');
      fs.writeFileSync(outFile, Buffer.concat(units.map((u) => u.payload)));
      const probe = ffprobeRaw(outFile, 'hevc');
      assert.equal(probe.frames, 25);
      assert.equal(probe.width, 320);
      assert.equal(probe.height, 240);
    });
  });
});
