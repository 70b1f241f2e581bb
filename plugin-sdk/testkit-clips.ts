/**
 * Test clips for plugin tests without a vehicle: ffmpeg's test pattern encoded as H.264, an Annex-B stream cut into
 * frames, a G.711 A-law tone, and frames (with the tone) as bus units with their tracks. testkit-media.ts publishes
 * them into a bus stream.
 *
 * Nothing here imports the kernel or the bus.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { h264NalType, joinAnnexB, splitAnnexB } from './formats/annexb';
import { h264IsKeyframe, parseH264Sps } from './formats/h264';
import { audioUnit, videoUnit, type AccessUnit, type AudioTrackInfo, type TrackInfo, type VideoTrackInfo } from './media';
import { Buffer } from 'node:buffer';

// --- ffmpeg ------------------------------------------------------------------------------------------------------

let ffmpegPath: string | undefined;

/** ffmpeg on the PATH; throws saying how to get it (the test kit never skips a test for a missing tool). */
export function findFfmpeg(): string {
  if (ffmpegPath) return ffmpegPath;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, 'ffmpeg');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return (ffmpegPath = p);
    } catch {
      /* not in this directory */
    }
  }
  throw new Error("the test kit's media helpers need ffmpeg with libx264 on the PATH: install Debian's 'ffmpeg' package (apt-get install -y ffmpeg)");
}

export interface TestPatternOptions {
  /** default 2 */
  seconds?: number;
  /** default 25 */
  fps?: number;
  /** WxH, default 320x240 */
  size?: string;
  /** frames from one keyframe to the next, default fps (one a second) */
  gopFrames?: number;
  /** default: found on the PATH */
  ffmpeg?: string;
}

/**
 * ffmpeg's test pattern as raw Annex-B H.264 (libx264, no B frames) with an access unit delimiter before every
 * frame, so frames can be cut apart without parsing slices.
 */
export function encodeH264TestPattern(opts: TestPatternOptions = {}): Buffer {
  const fps = opts.fps ?? 25;
  return encodeTestPattern(opts, 'libx264', ['-bf', '0', '-g', String(opts.gopFrames ?? fps), '-x264-params', 'aud=1', '-f', 'h264']);
}

export interface H265PatternOptions extends TestPatternOptions {
  /** every GOP exactly gopFrames long (x265's min-keyint too), default false: x265 may start one early at a scene cut */
  fixedGop?: boolean;
  /** B frames, default x265's own */
  bframes?: number;
}

/** ffmpeg's test pattern as raw Annex-B H.265 (libx265), an IRAP every gopFrames. */
export function encodeH265TestPattern(opts: H265PatternOptions = {}): Buffer {
  const gop = opts.gopFrames ?? opts.fps ?? 25;
  const params = [`keyint=${gop}`];
  if (opts.fixedGop) params.push(`min-keyint=${gop}`);
  if (opts.bframes !== undefined) params.push(`bframes=${opts.bframes}`);
  params.push('log-level=error');
  // (libx265 is slow: a bound, so a stuck encoder fails the caller instead of hanging it)
  return encodeTestPattern(opts, 'libx265', ['-x265-params', params.join(':'), '-f', 'hevc'], 60_000);
}

function encodeTestPattern(opts: TestPatternOptions, encoder: string, output: string[], timeoutMs?: number): Buffer {
  const { seconds = 2, fps = 25, size = '320x240' } = opts;
  const ffmpeg = opts.ffmpeg ?? findFfmpeg();
  const r = spawnSync(
    ffmpeg,
    ['-v', 'error', '-f', 'lavfi', '-i', `testsrc=size=${size}:rate=${fps}`, '-t', String(seconds), '-c:v', encoder, ...output, '-'],
    { maxBuffer: 256 * 1024 * 1024, timeout: timeoutMs },
  );
  if (r.status !== 0 || r.stdout.length === 0) {
    const why = r.error?.message ?? (r.stderr.toString().trim() || `exit ${r.status}`);
    throw new Error(`ffmpeg could not encode the test pattern (${ffmpeg}): ${why}${why.includes(encoder) ? ` (Debian's ffmpeg package has ${encoder})` : ''}`);
  }
  return r.stdout;
}

/** An H.264 stream cut into frames, with its track description from its own SPS. */
export interface H264Frames {
  track: VideoTrackInfo;
  /** one Annex-B buffer per frame, delimiter and (on keyframes) parameter sets included */
  frames: Buffer[];
  keyframes: boolean[];
}

/** Cuts an Annex-B stream into frames at each access unit delimiter (NAL type 9). */
export function splitH264Frames(annexB: Buffer, frameRate = 25): H264Frames {
  const frames: Buffer[] = [];
  let current: Buffer[] = [];
  let sps: Buffer | undefined;
  let pps: Buffer | undefined;
  for (const nal of splitAnnexB(annexB)) {
    const t = h264NalType(nal);
    if (t === 9 && current.length) {
      frames.push(joinAnnexB(current));
      current = [];
    }
    // copies: the NAL units are views into the whole stream, which the track should not keep alive
    if (t === 7) sps ??= Buffer.from(nal);
    if (t === 8) pps ??= Buffer.from(nal);
    current.push(nal);
  }
  if (current.length) frames.push(joinAnnexB(current));
  if (!sps || !pps) throw new Error('the H.264 stream has no SPS/PPS');
  const info = parseH264Sps(sps);
  const track: VideoTrackInfo = {
    kind: 'video',
    codec: 'h264',
    width: info.width,
    height: info.height,
    profile: info.profile,
    profileIdc: info.profileIdc,
    level: info.levelIdc,
    sps,
    pps,
    frameRate,
  };
  return { track, frames, keyframes: frames.map((f) => h264IsKeyframe(f)) };
}

// --- G.711 A-law -------------------------------------------------------------------------------------------------

const ALAW_SEG_END = [0x1f, 0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff];

/** One 16-bit linear sample as G.711 A-law (ITU-T G.711, as in the reference g711.c). */
export function linearToAlaw(sample: number): number {
  let v = sample >> 3;
  let mask: number;
  if (v >= 0) {
    mask = 0xd5;
  } else {
    mask = 0x55;
    v = -v - 1;
  }
  let seg = 0;
  while (seg < 8 && v > ALAW_SEG_END[seg]!) seg++;
  if (seg >= 8) return 0x7f ^ mask;
  const a = (seg << 4) | ((seg < 2 ? v >> 1 : v >> seg) & 0x0f);
  return a ^ mask;
}

/** `samples` of a sine tone at 8 kHz as A-law bytes, starting at sample `from` (so frames join without clicks). */
function alawTone(hz: number, from: number, samples: number): Buffer {
  const out = Buffer.alloc(samples);
  for (let i = 0; i < samples; i++) out[i] = linearToAlaw(Math.round(8000 * Math.sin((2 * Math.PI * hz * (from + i)) / 8000)));
  return out;
}

// --- the clip ----------------------------------------------------------------------------------------------------

export interface TestClipOptions extends Omit<TestPatternOptions, 'ffmpeg'> {
  /**
   * G.711 A-law audio alongside (8 kHz mono, a 1 kHz tone): true, or the samples per unit (default 320, 40 ms, as
   * JT/T 1078 terminals send)
   */
  audio?: boolean | { frameSamples?: number; toneHz?: number };
}

export interface TestClip {
  readonly video: VideoTrackInfo;
  readonly audio?: AudioTrackInfo;
  /** what a publisher sets: the video track, then the audio one */
  readonly tracks: ReadonlyArray<TrackInfo>;
  /** every unit in push order (by dts; video first at equal times), frozen; the first is a keyframe at dts 0 */
  readonly units: ReadonlyArray<AccessUnit>;
  readonly fps: number;
  readonly frameCount: number;
  /** one pass, ms (frames / fps) */
  readonly durationMs: number;
}

const clips = new Map<string, TestClip>();

/**
 * A real H.264 clip (ffmpeg's test pattern through libx264) as bus units, with its track; optionally G.711 A-law
 * audio. Encoded once per process for each set of options; the units are frozen, since the bus shares them.
 */
export function testClip(opts: TestClipOptions = {}): TestClip {
  const seconds = opts.seconds ?? 2;
  const fps = opts.fps ?? 25;
  const size = opts.size ?? '320x240';
  const gopFrames = opts.gopFrames ?? fps;
  const audio = opts.audio === true ? {} : opts.audio || undefined;
  const key = JSON.stringify([seconds, fps, size, gopFrames, audio]);
  const cached = clips.get(key);
  if (cached) return cached;
  const clip = clipOfFrames(splitH264Frames(encodeH264TestPattern({ seconds, fps, size, gopFrames }), fps), { fps, audio: opts.audio });
  clips.set(key, clip);
  return clip;
}

/**
 * H.264 frames (from any source: ffmpeg, a capture) as a clip: one frame every 1/fps s from dts 0, and with `audio`
 * the G.711 A-law tone testClip gives. The units are frozen, since the bus shares them.
 */
export function clipOfFrames(h: H264Frames, opts: { fps: number; audio?: TestClipOptions['audio'] }): TestClip {
  const { fps } = opts;
  const audio = opts.audio === true ? {} : opts.audio || undefined;
  // i * 1000 / fps, not i times a rounded frame time: whole seconds stay whole at 30 fps, where audio units start
  const units: AccessUnit[] = h.frames.map((payload, i) =>
    Object.freeze(videoUnit({ codec: 'h264', dts: (i * 1000) / fps, keyframe: h.keyframes[i]!, payload })),
  );
  const durationMs = (h.frames.length * 1000) / fps;
  let track: AudioTrackInfo | undefined;
  if (audio) {
    const frameSamples = audio.frameSamples ?? 320;
    const toneHz = audio.toneHz ?? 1000;
    track = { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1, bitsPerSample: 8, frameSamples };
    const total = Math.round((durationMs * 8000) / 1000);
    const aus: AccessUnit[] = [];
    for (let s = 0; s + frameSamples <= total; s += frameSamples) {
      aus.push(
        Object.freeze(
          audioUnit({ codec: 'g711a', dts: (s * 1000) / 8000, timescale: 8000, duration: frameSamples, payload: alawTone(toneHz, s, frameSamples) }),
        ),
      );
    }
    units.push(...aus);
    // stable: video stays before audio at the same instant, so a reader sees the keyframe first
    units.sort((a, b) => a.dts - b.dts || (a.kind === b.kind ? 0 : a.kind === 'video' ? -1 : 1));
  }
  return Object.freeze({
    video: Object.freeze(h.track),
    audio: track && Object.freeze(track),
    tracks: Object.freeze(track ? [h.track, track] : [h.track]),
    units: Object.freeze(units),
    fps,
    frameCount: h.frames.length,
    durationMs,
  });
}
