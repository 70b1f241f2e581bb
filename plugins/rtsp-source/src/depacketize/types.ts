import type { RtpPacket } from '../rtp';

/** one access unit of a track, in the track's RTP time (32-bit timestamp) */
export interface Frame {
  payload: Buffer;
  timestamp: number;
  keyframe: boolean;
  /** samples (audio) when known, else 0 */
  duration: number;
}

export interface DepacketizerStats {
  /** packets whose payload broke the payload format's rules */
  malformed: number;
  /** access units left out: a hole (lost or malformed packet) or over the size cap, and video until the next keyframe */
  droppedFrames: number;
}

/**
 * Turns a track's RTP packets into access units. `gap` says packets were lost just before this one: a unit being
 * assembled is dropped rather than published with a hole (and video waits for its next keyframe).
 */
export interface Depacketizer {
  push(p: RtpPacket, gap: boolean): Frame[];
  readonly stats: DepacketizerStats;
}

export const START_CODE = Buffer.from([0, 0, 0, 1]);
