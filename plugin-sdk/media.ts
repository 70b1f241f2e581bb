/**
 * Media types shared by every plugin that publishes to or reads from the media bus.
 *
 * Time: every unit carries exact timestamps in ticks of its own time base (`timescale` ticks per second: 90 kHz
 * for video, the sample rate for audio, or whatever the source counts in) and a millisecond view of the same
 * instants (`dts`/`pts`, possibly fractional) for formats that count in ms (FLV). Both are on the stream's own
 * timeline, which starts near 0 and continues across a publisher's reconnect. `MediaStream.wallClock` maps that
 * timeline to wall-clock time (RTCP sender reports, EXT-X-PROGRAM-DATE-TIME).
 *
 * Units are immutable once pushed: the bus, the GOP cache and every reader share the same objects. Build them
 * with `videoUnit`/`audioUnit` (or `unitAt` for exact ticks) and never change one afterwards.
 */

import { isNalIndexOf, NAL_ARENA } from './formats/nal-index';
import { Buffer } from 'node:buffer';

export type VideoCodec = 'h264' | 'h265';
/**
 * Audio codecs as sources send them. Stages (e.g. an AAC encoder) derive other forms; an output that needs one
 * asks for it when it subscribes. G.721 is G.726 at 32 kbit/s: the JT/T 1078 ingest publishes it as 'g726' with
 * bitsPerSample 4.
 */
export type AudioCodec = 'aac' | 'g711a' | 'g711u' | 'g726' | 'adpcm' | 'g721' | 'g722' | 'g723' | 'g729' | 'mp3' | 'pcm' | 'unknown';
export type CodecId = VideoCodec | AudioCodec;

/** the time base of video units: RTP's and MPEG-TS's 90 kHz */
export const VIDEO_TIMESCALE = 90_000;

export interface VideoTrackInfo {
  kind: 'video';
  codec: VideoCodec;
  width?: number;
  height?: number;
  /** e.g. 'Main', 'High'; from the SPS. */
  profile?: string;
  /** profile_idc / general_profile_idc */
  profileIdc?: number;
  /** level_idc as in the SPS (e.g. 31 for 3.1; for H.265 general_level_idc, 30 x level) */
  level?: number;
  /** Parameter sets without start codes: H.264 [sps, pps]; H.265 vps, sps, pps. */
  sps?: Buffer;
  pps?: Buffer;
  vps?: Buffer;
  frameRate?: number;
}

/**
 * G.726 codeword packing: 'left' puts the first codeword in the most significant bits of a byte (ITU-T G.726
 * Annex / AAL2, ffmpeg's `g726`), 'right' in the least significant bits (RFC 3551, ffmpeg's `g726le`).
 */
export type G726Packing = 'left' | 'right';

export interface AudioTrackInfo {
  kind: 'audio';
  codec: AudioCodec;
  sampleRate: number;
  channels: number;
  /** bits per coded sample where it matters (G.726: 2..5, i.e. 16..40 kbit/s; IMA ADPCM: 4) */
  bitsPerSample?: number;
  /** G.726 codeword packing, when the source says or the site configures it */
  packing?: G726Packing;
  /** AAC AudioSpecificConfig, when codec is 'aac' (units are raw AAC frames, never ADTS) */
  config?: Buffer;
  /** samples per unit when every unit has the same count (AAC-LC: 1024) */
  frameSamples?: number;
}

export type TrackInfo = VideoTrackInfo | AudioTrackInfo;

/**
 * One access unit: a whole video frame (all its NAL units) or one audio frame.
 * Video payload is Annex-B (NAL units each preceded by 00 00 00 01), with the parameter sets the source sent in it
 * (the track's `sps`/`pps`/`vps` are the current ones, whether or not a key frame carries them). Where its NAL units
 * are was found when the unit was made (`nals`): read it with `NalUnits` (formats/nal-index.ts), never search the
 * payload again.
 * Audio payload is one frame of the track's codec with nothing around it: raw AAC (no ADTS header), G.711/G.726/
 * ADPCM codewords without a vendor frame header (the ingest removes HiSilicon's).
 */
export interface AccessUnit {
  readonly kind: 'video' | 'audio';
  readonly codec: CodecId;
  /** decode timestamp, ms on the stream's timeline (exactly dtsTicks * 1000 / timescale; may be fractional) */
  readonly dts: number;
  /** presentation timestamp, ms (equal to dts for streams without B frames) */
  readonly pts: number;
  /** ticks per second of dtsTicks/ptsTicks/duration */
  readonly timescale: number;
  /** decode timestamp in ticks of timescale (an integer) */
  readonly dtsTicks: number;
  /** presentation timestamp in ticks of timescale */
  readonly ptsTicks: number;
  /** how long the unit lasts in ticks when known (audio: its sample count at the sample rate), else 0 */
  readonly duration: number;
  readonly keyframe: boolean;
  readonly payload: Buffer;
  /** set by the ingest that publishes it: when the unit's last packet was parsed (performance.now(), ms, monotonic); flv-out's added-latency metric starts here */
  readonly receivedAt?: number;
  /**
   * Video: the chunk holding the payload's NAL index (formats/nal-index.ts), made with the unit; undefined for
   * audio. Read it with `NalUnits`; a unit made by hand without one gets it on its first read.
   */
  readonly nals?: Int32Array;
  /** where this unit's index starts in `nals` */
  readonly nalsAt?: number;
}

/** Fields for a unit at exact ticks. */
export interface UnitTicks {
  kind: 'video' | 'audio';
  codec: CodecId;
  timescale: number;
  dtsTicks: number;
  /** default dtsTicks */
  ptsTicks?: number;
  duration?: number;
  keyframe: boolean;
  payload: Buffer;
  receivedAt?: number;
  /** video: the payload's NAL index when the publisher made it (NalArena), else it is found here */
  nals?: Int32Array;
  nalsAt?: number;
}

/** A unit at exact ticks of its time base; the ms view is derived. */
export function unitAt(u: UnitTicks): AccessUnit {
  const ts = u.timescale;
  if (!(ts > 0) || !Number.isInteger(u.dtsTicks)) throw new RangeError(`unit time: timescale ${ts} and integer dtsTicks ${u.dtsTicks} needed`);
  const pt = u.ptsTicks ?? u.dtsTicks;
  return made(
    u.kind,
    u.codec,
    (u.dtsTicks * 1000) / ts,
    (pt * 1000) / ts,
    ts,
    u.dtsTicks,
    pt,
    u.duration ?? 0,
    u.keyframe,
    u.payload,
    u.receivedAt,
    u.nals,
    u.nalsAt,
  );
}

/** Fields for a unit timed in ms (what JT/T 1078 terminals send); ticks are derived at the given time base. */
export interface UnitMs {
  codec: CodecId;
  /** ms */
  dts: number;
  /** ms, default dts */
  pts?: number;
  keyframe?: boolean;
  payload: Buffer;
  /** ticks per second (default: 90 kHz for video; required for audio: the sample rate) */
  timescale?: number;
  /** ticks (audio: samples in the frame) */
  duration?: number;
  receivedAt?: number;
  /** video: the payload's NAL index when the publisher made it (NalArena), else it is found here */
  nals?: Int32Array;
  nalsAt?: number;
}

const VIDEO_CODECS: ReadonlySet<string> = new Set<VideoCodec>(['h264', 'h265']);

/** A video frame at ms timestamps (90 kHz ticks). */
export function videoUnit(u: UnitMs): AccessUnit {
  if (!VIDEO_CODECS.has(u.codec)) throw new TypeError(`videoUnit: ${u.codec} is not a video codec`);
  return msUnit('video', u, u.timescale ?? VIDEO_TIMESCALE);
}

/** An audio frame at ms timestamps; `timescale` is the sample rate. */
export function audioUnit(u: UnitMs & { timescale: number }): AccessUnit {
  if (VIDEO_CODECS.has(u.codec)) throw new TypeError(`audioUnit: ${u.codec} is a video codec`);
  return msUnit('audio', u, u.timescale);
}

function msUnit(kind: 'video' | 'audio', u: UnitMs, ts: number): AccessUnit {
  if (!(ts > 0)) throw new RangeError(`unit time: timescale ${ts} must be > 0`);
  const pts = u.pts ?? u.dts;
  return made(
    kind,
    u.codec,
    u.dts,
    pts,
    ts,
    Math.round((u.dts * ts) / 1000),
    Math.round((pts * ts) / 1000),
    u.duration ?? 0,
    kind === 'audio' ? true : u.keyframe === true,
    u.payload,
    u.receivedAt,
    u.nals,
    u.nalsAt,
  );
}

/**
 * The same unit moved on the timeline by `offsetMs` (a new object: units are shared, never changed). The ticks
 * move by the offset rounded to the unit's time base.
 */
export function shiftUnit(u: AccessUnit, offsetMs: number): AccessUnit {
  if (offsetMs === 0) return u;
  const dt = Math.round((offsetMs * u.timescale) / 1000);
  const dtsTicks = u.dtsTicks + dt;
  const ptsTicks = u.ptsTicks + dt;
  return made(
    u.kind,
    u.codec,
    (dtsTicks * 1000) / u.timescale,
    (ptsTicks * 1000) / u.timescale,
    u.timescale,
    dtsTicks,
    ptsTicks,
    u.duration,
    u.keyframe,
    u.payload,
    u.receivedAt,
    u.nals,
    u.nalsAt,
  );
}

/** The same unit with another payload (and optionally codec and duration): what a stage makes of an audio frame. */
export function withPayload(u: AccessUnit, payload: Buffer, change: { codec?: CodecId; duration?: number } = {}): AccessUnit {
  // another payload: its own index (found anew for video)
  return made(
    u.kind,
    change.codec ?? u.codec,
    u.dts,
    u.pts,
    u.timescale,
    u.dtsTicks,
    u.ptsTicks,
    change.duration ?? u.duration,
    u.keyframe,
    payload,
    u.receivedAt,
    undefined,
    undefined,
  );
}

/**
 * A unit with exactly these fields, nothing derived (the bus makes its cached units again with it, index included).
 * Units made anywhere else start with `videoUnit`, `audioUnit` or `unitAt`.
 */
export const unitOf: typeof makeUnit = makeUnit;

/**
 * A unit with its NAL index: the one handed over when it fits the payload, else (video) found now, once, in the
 * process's NalArena. A handed index that does not fit (another payload's) is not trusted.
 */
function made(
  kind: 'video' | 'audio',
  codec: CodecId,
  dts: number,
  pts: number,
  timescale: number,
  dtsTicks: number,
  ptsTicks: number,
  duration: number,
  keyframe: boolean,
  payload: Buffer,
  receivedAt: number | undefined,
  nals: Int32Array | undefined,
  nalsAt: number | undefined,
): AccessUnit {
  if (kind !== 'video') return makeUnit(kind, codec, dts, pts, timescale, dtsTicks, ptsTicks, duration, keyframe, payload, receivedAt, undefined, 0);
  if (!isNalIndexOf(nals, nalsAt, payload.length)) {
    nalsAt = NAL_ARENA.index(payload, codec);
    nals = NAL_ARENA.mem;
  }
  return makeUnit(kind, codec, dts, pts, timescale, dtsTicks, ptsTicks, duration, keyframe, payload, receivedAt, nals, nalsAt!);
}

/**
 * Every unit is made here: one object literal, so one hidden class for all of them.
 *
 * Why it is first made with fields that are not numbers: V8 stores a number field of a hidden class inline while every
 * value it has seen there is a small integer, and once one is not (a fractional ms dts from a 90 kHz RTP source, ticks
 * past 2^31) it boxes that field in every object of the class from then on, integers included: a heap object per
 * field per unit. A heap snapshot at 300 terminals found five a unit (dts, pts, timescale and both ticks) on the
 * units of the GOP caches, objects the collector copies and marks for as long as their GOP lives. A field made to hold
 * both a heap object and a small integer first (UNIT_SHAPE_SEED) keeps any value: small integers inline, only a value
 * that is not one boxed.
 */
function makeUnit(
  kind: 'video' | 'audio',
  codec: CodecId,
  dts: number,
  pts: number,
  timescale: number,
  dtsTicks: number,
  ptsTicks: number,
  duration: number,
  keyframe: boolean,
  payload: Buffer,
  receivedAt: number | undefined,
  nals: Int32Array | undefined,
  nalsAt: number,
): AccessUnit {
  return {
    kind,
    codec,
    dts: small(dts),
    pts: small(pts),
    timescale: small(timescale),
    dtsTicks: small(dtsTicks),
    ptsTicks: small(ptsTicks),
    duration: small(duration),
    keyframe,
    payload,
    receivedAt,
    nals,
    nalsAt,
  };
}

/**
 * A whole number in the int32 range as one the optimizing compiler knows is an integer: the result of arithmetic it
 * typed as a double (ticks * 1000 / timescale) would be stored boxed even when whole.
 */
export function small(x: number): number {
  return x === (x | 0) ? x | 0 : x;
}

/** a unit whose every number field holds `n` */
function seedUnit(n: number): AccessUnit {
  return makeUnit('video', 'h264', n, n, n, n, n, n, false, Buffer.alloc(0), n, undefined, n);
}

/**
 * Kept so the hidden class it made stays the one every unit takes. Made with null, then with 0: null alone leaves each
 * number field one for heap objects (a boxed double is one), and a field that units fill with boxed doubles only stays
 * so until a whole number comes. That is `receivedAt` (performance.now(), whole about once in a million units: ~80 s
 * at 500 terminals): the widening then threw away the optimised code of whatever made or read units, the ingest's
 * and flv-out's write path, at a moment no one chose (2026-11-30: a stall of 137 ms over 492 of 500 players). 0 widens
 * every number field to any value here, before any code is optimised.
 */
export const UNIT_SHAPE_SEED: AccessUnit = seedUnit(null as unknown as number);
seedUnit(0);
