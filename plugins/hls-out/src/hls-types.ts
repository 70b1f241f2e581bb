/** What a segmenter makes (segments, their parts, init segments) and what it is given (options, counters). */
import type { Logger } from 'pino';

export type Container = 'fmp4' | 'mpegts';

export interface HlsPart {
  /** index within its segment */
  readonly index: number;
  /** s */
  readonly duration: number;
  /** starts with a keyframe (or is audio) */
  readonly independent: boolean;
  /** its bytes, in order: for fMP4 the boxes, then slices of the sample store */
  readonly data: readonly Buffer[];
  /** their length */
  readonly bytes: number;
}

export interface HlsInit {
  /** counts the stream's track configurations: init-{version}.mp4 */
  readonly version: number;
  /** the fMP4 init segment (none for MPEG-TS) */
  readonly data: Buffer | undefined;
}

export interface HlsSegment {
  readonly msn: number;
  readonly parts: HlsPart[];
  /** s, known once complete */
  duration: number;
  bytes: number;
  complete: boolean;
  /** a timeline or configuration break precedes it (publisher change, new tracks, dropped media) */
  readonly discontinuity: boolean;
  readonly init: HlsInit;
  /** wall-clock time of its first unit, epoch ms */
  readonly programDateTime: number | undefined;
  /** ms on the stream's timeline */
  readonly startDts: number;
}

export interface SegmenterOptions {
  container: Container;
  targetDurationSec: number;
  partTargetSec: number;
  /** complete segments listed in the playlist at most (one more stays in memory for players still fetching it) */
  windowSegments: number;
  /** seconds of complete segments listed at least (0: three target durations) */
  windowSec: number;
  maxStreamBytes: number;
  /** 'av' readers: how long the first segment waits for the AAC track (ms of stream time) */
  audioWaitMs: number;
  /** the reader takes audio and video (the first segment may wait for audio) */
  wantsAudioWithVideo: boolean;
  /** the request stream's wall clock (EXT-X-PROGRAM-DATE-TIME) */
  wallClock(dtsMs: number): number | undefined;
  /** the request stream itself has an audio track (the AAC form will follow) */
  sourceHasAudio(): boolean;
  log: Logger;
  stats: SegmenterStats;
}

/** counters the plugin's metrics read */
export interface SegmenterStats {
  parts(): void;
  segments(): void;
  /** a segment left the window early, or one being made was dropped, to stay within maxStreamBytes */
  memoryDrops(): void;
  /** a unit left out: audio that is not AAC, or video the track gives no parameter sets for */
  unitsLeftOut(): void;
}
