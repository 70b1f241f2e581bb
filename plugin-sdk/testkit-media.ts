/**
 * Media for plugin tests without a vehicle: a real H.264 clip (and optionally G.711 A-law audio), published into a
 * bus stream at real speed or all at once, and the open/ready steps a player's client would take.
 *
 * Nothing here imports the kernel: the functions take a `TestGateway` (see testkit.ts, whose gateways also carry
 * them as methods).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { MediaStream, Publisher } from './bus';
import { h264NalType, joinAnnexB, splitAnnexB } from './formats/annexb';
import { h264IsKeyframe, parseH264Sps } from './formats/h264';
import { audioUnit, shiftUnit, videoUnit, type AccessUnit, type AudioTrackInfo, type TrackInfo, type VideoTrackInfo } from './media';
import type { TestGateway } from './testkit';

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
  const { seconds = 2, fps = 25, size = '320x240' } = opts;
  const gop = opts.gopFrames ?? fps;
  const ffmpeg = opts.ffmpeg ?? findFfmpeg();
  const r = spawnSync(
    ffmpeg,
    [
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      `testsrc=size=${size}:rate=${fps}`,
      '-t',
      String(seconds),
      '-c:v',
      'libx264',
      '-bf',
      '0',
      '-g',
      String(gop),
      '-x264-params',
      'aud=1',
      '-f',
      'h264',
      '-',
    ],
    { maxBuffer: 256 * 1024 * 1024 },
  );
  if (r.status !== 0 || r.stdout.length === 0) {
    const why = r.error?.message ?? (r.stderr.toString().trim() || `exit ${r.status}`);
    throw new Error(`ffmpeg could not encode the test pattern (${ffmpeg}): ${why}${/libx264/.test(why) ? " (Debian's ffmpeg package has libx264)" : ''}`);
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

// --- publishing --------------------------------------------------------------------------------------------------

export interface PublishOptions {
  /** re-times the video to this rate (default the clip's); a clip with audio plays at its own rate only */
  fps?: number;
  /** passes of the clip: true until stopped (realtime only), or a count; default 1. Each pass continues the timeline */
  loop?: boolean | number;
  /** pace units by their timestamps on real timers (default true); false pushes every pass before returning */
  realtime?: boolean;
}

export interface ClipPublisher {
  readonly publisher: Publisher;
  readonly stream: MediaStream;
  /** units pushed so far */
  readonly pushed: number;
  /** settles when the last pass is pushed, `stop()` is called, the stream closes or another publisher replaces this one */
  readonly done: Promise<void>;
  /** stops pushing (the publisher pauses; the stream and its readers stay) */
  stop: () => void;
}

/**
 * Attaches a publisher to an existing bus stream (one an open made: `gw.openStream(...).streamName`, or one a test
 * created), sets the clip's tracks and pushes its units.
 */
export function publishClip(gw: Pick<TestGateway, 'bus'>, streamName: string, clip: TestClip, opts: PublishOptions = {}): ClipPublisher {
  const stream: MediaStream | undefined = gw.bus.get(streamName);
  if (!stream) {
    const open = gw.bus.list().map((s) => s.name);
    throw new Error(`publish: no stream '${streamName}' on the bus (open: ${open.join(', ') || 'none'}); open a request first (gw.openStream)`);
  }
  if (stream.closed) throw new Error(`publish: stream '${streamName}' is closed`);
  const realtime = opts.realtime ?? true;
  const passes = opts.loop === true ? Infinity : opts.loop === false || opts.loop === undefined ? 1 : opts.loop;
  if (!(passes >= 1)) throw new RangeError(`publish: loop ${opts.loop} must be true or a count >= 1`);
  if (passes === Infinity && !realtime) throw new RangeError('publish: an endless loop needs realtime pacing');

  const fps = opts.fps ?? clip.fps;
  if (!(fps > 0)) throw new RangeError(`publish: fps ${opts.fps} must be > 0`);
  let base = clip.units;
  if (fps !== clip.fps) {
    if (clip.audio) throw new TypeError(`publish: fps re-times video only, and this clip has audio; make the clip at ${fps} fps (testClip({ fps: ${fps} }))`);
    let i = 0;
    base = clip.units.map((u) => Object.freeze(videoUnit({ codec: u.codec, dts: (i++ * 1000) / fps, keyframe: u.keyframe, payload: u.payload })));
  }
  const periodMs = (clip.frameCount * 1000) / fps;
  const n = base.length;
  const t0 = base[0]!.dts;

  const publisher = stream.attachPublisher();
  for (const t of clip.tracks) publisher.setTrack(t);
  let index = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let settle!: () => void;
  const done = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const finish = () => {
    if (stopped) return;
    stopped = true;
    if (timer) clearTimeout(timer);
    timer = undefined;
    publisher.pause();
    settle();
  };
  publisher.onClose(finish);
  const unitAtIndex = (i: number): AccessUnit => {
    const pass = Math.floor(i / n);
    const u = base[i % n]!;
    return pass === 0 ? u : shiftUnit(u, pass * periodMs);
  };
  const dueAt = (i: number): number => base[i % n]!.dts - t0 + Math.floor(i / n) * periodMs;
  const pushOne = (): boolean => {
    if (stopped || !publisher.active || stream.closed) {
      finish();
      return false;
    }
    publisher.push(unitAtIndex(index++));
    if (index >= n * passes) {
      finish();
      return false;
    }
    return true;
  };

  if (!realtime) {
    while (pushOne()) {
      /* every pass, now */
    }
  } else {
    const start = performance.now();
    const tick = () => {
      timer = undefined;
      const now = performance.now() - start;
      // a late timer catches up: every unit already due goes now, in order
      while (!stopped && dueAt(index) <= now) if (!pushOne()) return;
      if (!stopped) timer = setTimeout(tick, Math.max(0, dueAt(index) - (performance.now() - start)));
    };
    // from the next turn, so a reader subscribed right after publish() sees the first keyframe arrive
    timer = setTimeout(tick, 0);
  }
  return {
    publisher,
    stream,
    get pushed() {
      return index;
    },
    done,
    stop: finish,
  };
}

// --- the client's side: open, status -----------------------------------------------------------------------------

export interface OpenStreamOptions {
  simNo: string;
  chanId: number;
  /** default 'live' */
  typ?: 'live' | 'replay';
  /** default 0 (the site's fmt 0 output) */
  fmt?: number;
  /** 0 audio and video (default), 1 video, 2 talk, 3 listen, ... as in the open API */
  dataTyp?: number;
  scheme?: string;
  keepIntv?: number;
  /** user.token, default 'test-token' */
  token?: string;
  /** "user:password", default the demo application's */
  auth?: string;
  /** more open fields (record, exclusive, reqId, cb, ...) */
  extra?: Record<string, unknown>;
}

export interface OpenedStream {
  reqId: string;
  playUrl: string;
  /** the bus stream the request reads: publish into it, or subscribe to it */
  streamName: string;
  ready: boolean;
  /** URLs of outputs without a fmt, by output name */
  urls?: Record<string, string>;
  /** the open result as the API returned it */
  result: Record<string, unknown>;
}

/** POST /strm/open as the demo application (or `auth`); throws with the API's errCode and message on refusal. */
export async function openStream(gw: Pick<TestGateway, 'api'>, opts: OpenStreamOptions): Promise<OpenedStream> {
  const auth = opts.auth ?? 'demo:demo';
  const body: Record<string, unknown> = {
    user: { token: opts.token ?? 'test-token' },
    typ: opts.typ ?? 'live',
    simNo: opts.simNo,
    chanId: opts.chanId,
    ...(opts.fmt !== undefined ? { fmt: opts.fmt } : {}),
    ...(opts.dataTyp !== undefined ? { dataTyp: opts.dataTyp } : {}),
    ...(opts.scheme !== undefined ? { scheme: opts.scheme } : {}),
    ...(opts.keepIntv !== undefined ? { keepIntv: opts.keepIntv } : {}),
    ...opts.extra,
  };
  const r = await gw.api('POST', '/strm/open', body, auth);
  const json = r.json as Envelope | undefined;
  const result = json?.data?.[0] as Record<string, unknown> | undefined;
  if (r.status !== 200 || json?.errCode !== 0 || !result) {
    throw new Error(`open ${opts.simNo}/${opts.chanId} refused: HTTP ${r.status}, errCode ${json?.errCode}: ${json?.message ?? JSON.stringify(json)}`);
  }
  const reqId = String(result.reqId);
  // the stream's name comes from status rather than being rebuilt here: names are the gateway's to choose
  const [st] = await status(gw, reqId, auth);
  if (!st) throw new Error(`open ${opts.simNo}/${opts.chanId}: request ${reqId} is not in /strm/status right after its open`);
  return {
    reqId,
    playUrl: String(result.playUrl),
    streamName: String(st.stream),
    ready: result.ready === true,
    ...(result.urls ? { urls: result.urls as Record<string, string> } : {}),
    result,
  };
}

/** The API's answer envelope, as far as these helpers read it. */
type Envelope = { errCode?: number; message?: string; data?: unknown[] };

/** A request in GET /strm/status. */
export type RequestStatus = Record<string, unknown> & { reqId: string; stream: string; ready: boolean };

async function status(gw: Pick<TestGateway, 'api'>, reqId: string, auth: string): Promise<RequestStatus[]> {
  const r = await gw.api('GET', `/strm/status?reqId=${encodeURIComponent(reqId)}`, undefined, auth);
  const json = r.json as Envelope | undefined;
  if (r.status !== 200 || json?.errCode !== 0) throw new Error(`/strm/status for ${reqId}: HTTP ${r.status}: ${JSON.stringify(json)}`);
  return json.data as RequestStatus[];
}

/** Polls GET /strm/status until the request is ready; its status entry then. Fails if it closes or time runs out. */
export async function waitReady(gw: Pick<TestGateway, 'api'>, reqId: string, timeoutMs = 10_000, auth = 'demo:demo'): Promise<RequestStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [st] = await status(gw, reqId, auth);
    if (!st) throw new Error(`waitReady: request ${reqId} is not open (closed, or another application's)`);
    if (st.ready === true) return st;
    if (Date.now() >= deadline) {
      throw new Error(
        `waitReady: request ${reqId} was not ready within ${timeoutMs} ms (stream ${st.stream}, codecs ${JSON.stringify(st.codecs)}, bytesIn ${String(st.bytesIn)}): is anything publishing into it?`,
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
