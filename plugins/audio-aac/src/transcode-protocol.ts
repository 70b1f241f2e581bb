/** What the stage says to its worker (transcode-worker.ts) and what comes back. */
import type { AudioTrackInfo } from '../../../plugin-sdk';
import type { AdpcmOptions } from '../../../plugin-sdk/codecs';

export interface OpenJob {
  op: 'open';
  /** chosen by the stage; unique per worker lifetime */
  job: number;
  input: AudioTrackInfo;
  sampleRate: number;
  channels: 1 | 2;
  bitrate: number;
  maxGapMs: number;
  adpcm?: AdpcmOptions;
}

/**
 * One turn's frames of every stream (frame-lane.ts): frame i is `lengths[i]` bytes of `bytes`, after the frames
 * before it, for `jobs[i]` at `dtsTicks[i]` of `timescales[i]`. Typed arrays, so the message clones a handful of
 * objects whatever the number of frames.
 */
export interface PushBatch {
  op: 'push-batch';
  jobs: Int32Array;
  dtsTicks: Float64Array;
  timescales: Float64Array;
  lengths: Uint32Array;
  bytes: Uint8Array;
}

/**
 * Per pushed frame: `status` 0 ok, 1 unknown job (the worker was restarted since its open), 2 failed (`errors[i]`);
 * `counts[i]` AAC frames it completed. The AAC frames of all of them follow each other in `bytes`, each
 * `frameLengths[k]` long at `frameDts[k]` (output sample rate).
 */
export interface PushBatchReply {
  op: 'push-batch';
  status: Uint8Array;
  counts: Uint16Array;
  errors: Record<number, string>;
  frameLengths: Uint32Array;
  frameDts: Float64Array;
  bytes: Uint8Array;
  /**
   * Per pushed frame: where its job's input must reach (in ticks of that frame's timescale) for the next AAC frame
   * to complete; NaN on an error. The stage holds frames short of it (aac-stage.ts).
   */
  due: Float64Array;
}

export interface CloseJob {
  op: 'close';
  job: number;
}

export type TranscodeRequest = OpenJob | PushBatch | CloseJob;

export interface EncodedFrame {
  data: Uint8Array;
  /** at the output sample rate */
  dtsTicks: number;
}

export type TranscodeReply = { op: 'open'; ok: true } | PushBatchReply | { op: 'close' };

/** A push for a job this worker does not hold (it was restarted since the open): the stage opens it again. */
export const UNKNOWN_JOB = 'unknown transcode job';
