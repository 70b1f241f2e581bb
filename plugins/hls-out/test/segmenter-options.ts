/** A Segmenter's options as the unit tests use them: fMP4, 2 s targets, 0.333 s parts, quiet, stats dropped. */
import pino from 'pino';
import type { SegmenterOptions } from '../src/segmenter';

const log = pino({ level: 'silent' });

export function segmenterOptions(o: Partial<SegmenterOptions> = {}): SegmenterOptions {
  return {
    container: 'fmp4',
    targetDurationSec: 2,
    partTargetSec: 0.333,
    windowSegments: 6,
    windowSec: 0,
    maxStreamBytes: 16 * 1024 * 1024,
    audioWaitMs: 0,
    wantsAudioWithVideo: false,
    wallClock: (d) => 1_700_000_000_000 + d,
    sourceHasAudio: () => false,
    log,
    stats: { parts: () => undefined, segments: () => undefined, memoryDrops: () => undefined, unitsLeftOut: () => undefined },
    ...o,
  };
}
