/**
 * Clips for tests that run without ffmpeg (the unit tier): real H.264 frames taken out of a JT/T 1078 capture in
 * ../shared/fixtures by our own ingest (parser and stream assembler), in the same TestClip shape testClip gives, so
 * a test can publish them, mux them or loop them alike. The audio, when asked for, is testClip's G.711 A-law tone.
 */
import * as fs from 'node:fs';
import { clipOfFrames, type H264Frames, type TestClip, type TestClipOptions } from '../../plugin-sdk/testkit';
import type { AccessUnit, TrackInfo, VideoTrackInfo } from '../../plugin-sdk';
import { Jt1078Parser } from '../../plugins/jt1078-ingest/src/parser';
import { Jt1078StreamAssembler } from '../../plugins/jt1078-ingest/src/stream-assembler';
import { fixturePath } from './paths';

/** The captures with a steady H.264 stream, by what sets them apart (facts from the fixtures README, and measured). */
export const FIXTURE_VIDEO = {
  /** xunilcyl: 704x576 High profile, 30 fps, a keyframe every 30 frames (1 s) throughout; 631 frames */
  d1: { file: 'jt1078/xunilcyl-d1-h264-2013.bin', fps: 30 },
  /** glaciall: 352x288 Main profile, about 25 fps, GOPs of 1 to 50 frames; 4,111 frames */
  cif: { file: 'jt1078/glaciall-cif-h264-2013.bin', fps: 25 },
  /** smallchi: 352x288 Main profile, about 9 fps, GOPs of 11 to 39 frames; 931 frames */
  cifSlow: { file: 'jt1078/smallchi-cif-h264-2013.bin', fps: 9 },
} as const;

export type FixtureVideo = keyof typeof FIXTURE_VIDEO;

export interface FixtureClipOptions {
  /** default 'd1' (a keyframe a second, like testClip's default) */
  capture?: FixtureVideo;
  /** default 2 */
  seconds?: number;
  /** the clip's frame rate: frames are re-timed to it (default the capture's own) */
  fps?: number;
  /** start at the first keyframe whose GOP is this many frames long (default: the capture's first keyframe) */
  gopFrames?: number;
  /** G.711 A-law tone alongside, as testClip's `audio` */
  audio?: TestClipOptions['audio'];
}

interface CaptureVideo {
  frames: Buffer[];
  keyframes: boolean[];
  /** the track each frame belongs to (a capture may change its parameters mid-stream) */
  tracks: VideoTrackInfo[];
}

const captures = new Map<string, CaptureVideo>();

/** Every video frame of a capture, through the ingest's parser and assembler (payloads copied, since it may reuse memory). */
export function captureVideo(file: string): CaptureVideo {
  const cached = captures.get(file);
  if (cached) return cached;
  let track: VideoTrackInfo | undefined;
  const video: CaptureVideo = { frames: [], keyframes: [], tracks: [] };
  const asm = new Jt1078StreamAssembler({
    onTrack: (info: TrackInfo) => {
      if (info.kind === 'video') track = info;
    },
    onAccessUnit: (au: AccessUnit) => {
      if (au.kind !== 'video') return;
      if (track?.codec !== 'h264' || !track.sps || !track.pps) throw new Error(`fixture ${file}: an H.264 frame without an H.264 track with parameter sets`);
      video.frames.push(Buffer.from(au.payload));
      video.keyframes.push(au.keyframe);
      video.tracks.push(track);
    },
  });
  const parser = new Jt1078Parser((p) => asm.push(p));
  parser.push(fs.readFileSync(fixturePath(file)));
  parser.end();
  asm.flush();
  if (video.frames.length === 0) throw new Error(`fixture ${file}: no H.264 frames`);
  captures.set(file, video);
  return video;
}

/**
 * `seconds` of a capture's H.264 frames at `fps`, from a keyframe: the frames and their track (frameRate `fps`), the
 * form splitH264Frames gives for tests that time frames themselves.
 */
export function fixtureFrames(opts: Omit<FixtureClipOptions, 'audio'> = {}): H264Frames {
  const source = FIXTURE_VIDEO[opts.capture ?? 'd1'];
  const fps = opts.fps ?? source.fps;
  const seconds = opts.seconds ?? 2;
  const all = captureVideo(source.file);
  let start = all.keyframes.indexOf(true);
  if (opts.gopFrames !== undefined) {
    const gop = opts.gopFrames;
    start = all.keyframes.findIndex((k, i) => k && all.keyframes[i + gop] === true && !all.keyframes.slice(i + 1, i + gop).includes(true));
    if (start < 0) throw new Error(`fixture ${source.file} has no GOP of exactly ${gop} frames`);
  }
  const count = Math.round(seconds * fps);
  if (start < 0 || start + count > all.frames.length) {
    throw new Error(
      `fixture ${source.file} has ${all.frames.length - Math.max(start, 0)} frames from its keyframe at ${start}, fewer than ${count} (${seconds} s at ${fps} fps)`,
    );
  }
  return {
    track: { ...all.tracks[start]!, frameRate: fps },
    frames: all.frames.slice(start, start + count),
    keyframes: all.keyframes.slice(start, start + count),
  };
}

const clips = new Map<string, TestClip>();

/**
 * A clip of `seconds` of a capture's H.264, from a keyframe, re-timed to `fps`: the first unit a keyframe at dts 0,
 * frozen units, made once per process for each set of options.
 */
export function fixtureClip(opts: FixtureClipOptions = {}): TestClip {
  const key = JSON.stringify([opts.capture ?? 'd1', opts.fps, opts.seconds ?? 2, opts.gopFrames, opts.audio]);
  const cached = clips.get(key);
  if (cached) return cached;
  const frames = fixtureFrames(opts);
  const clip = clipOfFrames(frames, { fps: frames.track.frameRate!, audio: opts.audio });
  clips.set(key, clip);
  return clip;
}
