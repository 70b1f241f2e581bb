import { IsIn, IsInt, Max, Min } from 'class-validator';
import { AAC_SAMPLE_RATES } from './engine/pool';

export class AudioAacConfig {
  /**
   * Output rate when a request gives no audioCfg. 8000: terminals send 8 kHz speech (nothing above 4 kHz), so
   * 8 kHz AAC carries all of it with no resampling, at ~1.4 ms of CPU per stream-second (700 streams per core;
   * 16 kHz costs ~2.6 ms with resampling, ~380 per core). 16000 halves the encoder's delay (see README).
   */
  @IsIn(AAC_SAMPLE_RATES)
  sampleRate = 8000;

  /** output channels when a request gives no audioCfg (the source is mono) */
  @IsIn([1, 2])
  channels: 1 | 2 = 1;

  /** bits per second per channel; 0: by rate (24 kbit/s at 8 kHz, 32 at 11-16 kHz, 48 at 22-24 kHz, 64 above) */
  @IsInt()
  @Min(0)
  @Max(256_000)
  bitratePerChannel = 0;

  /** 'fast' is ffmpeg's cheaper quantiser search (~3-4x less CPU than 'twoloop', its default; same bitrate) */
  @IsIn(['fast', 'twoloop'])
  coder: 'fast' | 'twoloop' = 'fast';

  /** a gap in a stream's audio up to this long is filled with silence; a longer one restarts its AAC timeline */
  @IsInt()
  @Min(0)
  @Max(60_000)
  maxGapMs = 2000;

  /** audio frames of one stream in the worker at once before its input waits (then the bus's slow-reader rules) */
  @IsInt()
  @Min(1)
  @Max(4096)
  maxInFlight = 64;

  /**
   * Audio frames wait up to this long to cross to the worker together (0: at the end of each event-loop pass). Each
   * crossing costs the main thread a message each way whatever it carries, and a busy loop makes ~700 passes a
   * second; AAC frames are 128 ms at 8 kHz, so a few ms more wait is not heard.
   */
  @IsInt()
  @Min(0)
  @Max(100)
  frameBatchMs = 10;

  /**
   * IMA ADPCM block layout terminals use: 'dvi4' (4-byte state header not output, high nibble first; HiSilicon)
   * or 'ima-wav' (header sample output, low nibble first)
   */
  @IsIn(['dvi4', 'ima-wav'])
  adpcmLayout: 'dvi4' | 'ima-wav' = 'dvi4';

  /** byte order of the ADPCM header's predictor: 'le' (HiSilicon, glaciall's server) or 'be' (RFC 3551 as written) */
  @IsIn(['le', 'be'])
  adpcmHeaderByteOrder: 'le' | 'be' = 'le';
}

/** The bitrate of an output: the configured per-channel rate, or one that fits speech at that sample rate. */
export function bitrateFor(c: AudioAacConfig, sampleRate: number, channels: number): number {
  const perChannel = c.bitratePerChannel || (sampleRate <= 8000 ? 24_000 : sampleRate <= 16_000 ? 32_000 : sampleRate <= 24_000 ? 48_000 : 64_000);
  return perChannel * channels;
}
