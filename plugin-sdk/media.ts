/**
 * Media types shared by every plugin that publishes to or reads from the media bus.
 * Timestamps are milliseconds on the stream's own timeline (rebased by the publisher, starting near 0).
 */

export type VideoCodec = 'h264' | 'h265';
/** Audio codecs as a terminal sends them; decoding to AAC is an output plugin's business. */
export type AudioCodec = 'aac' | 'g711a' | 'g711u' | 'g726' | 'adpcm' | 'g721' | 'g722' | 'g723' | 'g729' | 'mp3' | 'pcm' | 'unknown';
export type CodecId = VideoCodec | AudioCodec;

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

export interface AudioTrackInfo {
  kind: 'audio';
  codec: AudioCodec;
  sampleRate: number;
  channels: number;
  /** bits per coded sample where it matters (G.726: 2..5) */
  bitsPerSample?: number;
  /** AAC AudioSpecificConfig, when codec is 'aac' */
  config?: Buffer;
}

export type TrackInfo = VideoTrackInfo | AudioTrackInfo;

/**
 * One access unit: a whole video frame (all its NAL units) or one audio frame/packet.
 * Video payload is Annex-B (NAL units each preceded by 00 00 00 01), parameter sets included on keyframes.
 */
export interface AccessUnit {
  kind: 'video' | 'audio';
  codec: CodecId;
  /** decode timestamp, ms */
  dts: number;
  /** presentation timestamp, ms (equal to dts for streams without B frames) */
  pts: number;
  keyframe: boolean;
  payload: Buffer;
  /** set by the ingest that publishes it: when the unit's last packet was parsed (performance.now(), ms, monotonic); flv-out's added-latency metric starts here */
  receivedAt?: number;
}
