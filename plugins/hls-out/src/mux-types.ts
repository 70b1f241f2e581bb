/** What the segmenter hands the container writers (fMP4, MPEG-TS). */
import type { AccessUnit } from '../../../plugin-sdk';

export interface MuxTrack {
  /** track id (fMP4) */
  id: number;
  kind: 'video' | 'audio';
  codec: 'h264' | 'h265' | 'aac';
  /** ticks per second of the samples' times: 90 kHz for video, the sample rate for audio */
  timescale: number;
  width?: number;
  height?: number;
  /** avcC / hvcC record (video), AudioSpecificConfig (audio) */
  config: Buffer;
  /** parameter sets without start codes (video): what TS repeats before a keyframe that lacks them */
  paramSets?: Buffer[];
  sampleRate?: number;
  channels?: number;
  /** AAC object type, sampling index and channel configuration (from the AudioSpecificConfig), for ADTS headers */
  aac?: { objectType: number; freqIndex: number; channelConfig: number };
}

/** One sample: its unit, its timing in the track's timescale, and its bytes as the fMP4 writer lays them out. */
export interface MuxSample {
  readonly unit: AccessUnit;
  /** decode time, track timescale */
  readonly dts: number;
  /** presentation minus decode time, track timescale */
  readonly cto: number;
  /** decode duration, track timescale */
  duration: number;
  readonly sync: boolean;
  /** bytes in an fMP4 mdat */
  readonly size: number;
  /** those bytes, in the stream's sample store: fragments refer to them */
  readonly bytes: Buffer;
}
