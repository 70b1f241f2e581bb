/** What the stage says to its worker (transcode-worker.ts) and what comes back. */
import type { AudioTrackInfo } from '../../../plugin-sdk/media';
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

export interface PushFrame {
  op: 'push';
  job: number;
  frame: Uint8Array;
  dtsTicks: number;
  timescale: number;
}

export interface CloseJob {
  op: 'close';
  job: number;
}

export type TranscodeRequest = OpenJob | PushFrame | CloseJob;

export interface EncodedFrame {
  data: Uint8Array;
  /** at the output sample rate */
  dtsTicks: number;
}

export type TranscodeReply =
  | { op: 'open'; ok: true }
  | { op: 'push'; frames: EncodedFrame[] }
  | { op: 'close' };

/** A push for a job this worker does not hold (it was restarted since the open): the stage opens it again. */
export const UNKNOWN_JOB = 'unknown transcode job';
