/**
 * What muxing costs per segment: this plugin's fMP4 and MPEG-TS writers (through the segmenter, parts included)
 * against mediabunny 1.61.0's fMP4 and MPEG-TS outputs, fed the same H.264 test clip (320x240, 25 fps, 2 s GOP at
 * 1 s keyframes). Run: `npx tsc -p tsconfig.json && node dist/plugins/hls-out/tools/mux-cost.js [WxH]` (a few seconds).
 */
import pino from 'pino';
import { performance } from 'node:perf_hooks';
import { EncodedPacket, EncodedVideoPacketSource, MpegTsOutputFormat, Mp4OutputFormat, NullTarget, Output } from 'mediabunny';
import type { AccessUnit } from '../../../plugin-sdk';
import { h264NalType, splitAnnexB } from '../../../plugin-sdk/formats';
import { buildAvcC } from '../../../plugin-sdk/formats';
import { testClip } from '../../../plugin-sdk/testkit';
import { Segmenter } from '../src/segmenter';

const SEGMENTS = 200;

function looped(units: ReadonlyArray<AccessUnit>, passes: number, spanMs: number): AccessUnit[] {
  const out: AccessUnit[] = [];
  for (let p = 0; p < passes; p++) {
    for (const u of units) {
      const dt = Math.round((p * spanMs * u.timescale) / 1000);
      out.push({ ...u, dts: u.dts + p * spanMs, pts: u.pts + p * spanMs, dtsTicks: u.dtsTicks + dt, ptsTicks: u.ptsTicks + dt });
    }
  }
  return out;
}

function ours(container: 'fmp4' | 'mpegts', units: AccessUnit[], track: Parameters<Segmenter['tracks']>[0]): { usPerSegment: number; parts: number } {
  let parts = 0;
  const seg = new Segmenter({
    container,
    targetDurationSec: 2,
    partTargetSec: 0.333,
    windowSegments: 6,
    windowSec: 0,
    maxStreamBytes: 64 * 1024 * 1024,
    audioWaitMs: 0,
    wantsAudioWithVideo: false,
    wallClock: () => undefined,
    sourceHasAudio: () => false,
    log: pino({ level: 'silent' }),
    stats: {
      parts: () => {
        parts++;
      },
      segments: () => undefined,
      memoryDrops: () => undefined,
      unitsLeftOut: () => undefined,
    },
  });
  seg.tracks(track);
  const t0 = performance.now();
  for (const u of units) seg.write(u);
  const ms = performance.now() - t0;
  return { usPerSegment: (ms * 1000) / SEGMENTS, parts };
}

async function bunny(
  kind: 'fmp4' | 'mpegts',
  units: AccessUnit[],
  sps: Buffer,
  pps: Buffer,
  width: number,
  height: number,
): Promise<{ usPerSegment: number; fragmentsPerSegment: number }> {
  let fragments = 0;
  const output = new Output({
    format:
      kind === 'fmp4'
        ? new Mp4OutputFormat({
            fastStart: 'fragmented',
            minimumFragmentDuration: 0.333,
            onMoof: () => {
              fragments++;
            },
          })
        : new MpegTsOutputFormat(),
    target: new NullTarget(),
  });
  const src = new EncodedVideoPacketSource('avc');
  output.addVideoTrack(src);
  await output.start();
  const description = buildAvcC(sps, pps);
  const t0 = performance.now();
  let first = true;
  for (const u of units) {
    // mediabunny takes AVCC (length-prefixed) packets for 'avc' with a description
    const nals = splitNals(u.payload);
    const size = nals.reduce((n, x) => n + 4 + x.length, 0);
    const data = Buffer.allocUnsafe(size);
    let at = 0;
    for (const n of nals) {
      data.writeUInt32BE(n.length, at);
      n.copy(data, at + 4);
      at += 4 + n.length;
    }
    const pkt = new EncodedPacket(data, u.keyframe ? 'key' : 'delta', u.pts / 1000, 0.04);
    await src.add(pkt, first ? { decoderConfig: { codec: 'avc1.42001e', codedWidth: width, codedHeight: height, description } } : undefined);
    first = false;
  }
  await output.finalize();
  const ms = performance.now() - t0;
  return { usPerSegment: (ms * 1000) / SEGMENTS, fragmentsPerSegment: fragments / SEGMENTS };
}

function splitNals(b: Buffer): Buffer[] {
  return splitAnnexB(b).filter((n) => ![7, 8, 9].includes(h264NalType(n)));
}

async function main(): Promise<void> {
  // argument: the picture size (default 320x240); testsrc at 1280x720 comes to ~0.35 Mbit/s
  const clip = testClip({ seconds: 2, size: process.argv[2] ?? '320x240' });
  const units = looped(clip.units, SEGMENTS + 1, clip.durationMs);
  const v = clip.video;
  // warm-up runs, then the measured ones
  for (let i = 0; i < 2; i++) {
    ours('fmp4', units, clip.tracks);
    ours('mpegts', units, clip.tracks);
  }
  const f = ours('fmp4', units, clip.tracks);
  const t = ours('mpegts', units, clip.tracks);
  await bunny('fmp4', units, v.sps!, v.pps!, v.width!, v.height!);
  const bf = await bunny('fmp4', units, v.sps!, v.pps!, v.width!, v.height!);
  await bunny('mpegts', units, v.sps!, v.pps!, v.width!, v.height!);
  const bt = await bunny('mpegts', units, v.sps!, v.pps!, v.width!, v.height!);
  const bytes = clip.units.reduce((n, u) => n + u.payload.length, 0);
  console.log(
    JSON.stringify(
      {
        clip: `${v.width}x${v.height} 25 fps, ${bytes} bytes per 2 s segment`,
        ours: { fmp4UsPerSegment: Math.round(f.usPerSegment), fmp4PartsPerSegment: f.parts / SEGMENTS, mpegtsUsPerSegment: Math.round(t.usPerSegment) },
        mediabunny: {
          fmp4UsPerSegment: Math.round(bf.usPerSegment),
          fmp4FragmentsPerSegment: bf.fragmentsPerSegment,
          mpegtsUsPerSegment: Math.round(bt.usPerSegment),
        },
      },
      null,
      2,
    ),
  );
}

void main();
