import { IsArray, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

/** the audio codecs RTMP (FLV tags) can carry */
export const RTMP_AUDIO_CODECS = ['aac', 'g711a', 'g711u'] as const;
export type RtmpAudioCodec = (typeof RTMP_AUDIO_CODECS)[number];

/** One application's publish key: an encoder that knows it may publish virtual channels of that application. */
export interface PublishKey {
  appId: string;
  key: string;
}

export class RtmpConfig {
  /** RTMP (TCP) port (decisions.md: 7935 on the default site; 1935 is the usual production port) */
  @IsInt() @Min(0) @Max(65535)
  port = 7935;

  @IsOptional() @IsString()
  host: string | undefined = undefined;

  /** port written into play and publish URLs when NAT or a proxy publishes this server elsewhere (default: port) */
  @IsOptional() @IsInt() @Min(1) @Max(65535)
  publicPort: number | undefined = undefined;

  /**
   * Publish keys, one or more per application: `[{ "appId": "demo", "key": "…" }]`. An encoder publishing with
   * `?key=` of one publishes that application's virtual channels. Empty: nobody may publish.
   */
  @IsArray()
  publishKeys: PublishKey[] = [];

  /**
   * The largest RTMP message taken from a peer (a video frame, a command): a peer that announces a larger one is
   * dropped. The RTMP header allows 16 MiB; nothing a camera sends comes near.
   */
  @IsInt() @Min(64 * 1024) @Max(16 * 1024 * 1024 - 1)
  maxMessageBytes = 4 * 1024 * 1024;

  /** a connection that has not started to play or publish this long after it came is closed */
  @IsInt() @Min(1) @Max(300)
  handshakeTimeoutSec = 10;

  /** a publisher that sends no media this long is dropped */
  @IsInt() @Min(1) @Max(600)
  publishIdleSec = 15;

  /** each player's queue cap on the bus: past it the player skips to the next keyframe */
  @IsInt() @Min(64 * 1024) @Max(256 * 1024 * 1024)
  maxPlayerBacklogBytes = 4 * 1024 * 1024;

  /** bytes a player's socket may hold before the bus queues for it instead */
  @IsInt() @Min(16 * 1024) @Max(64 * 1024 * 1024)
  socketHighWaterBytes = 256 * 1024;

  /** a published channel's own GOP cache (so an open that comes while it publishes starts at once) */
  @IsInt() @Min(64 * 1024) @Max(256 * 1024 * 1024)
  maxPublishGopBytes = 8 * 1024 * 1024;

  /**
   * Audio codecs players get: audio goes through the site's AAC stage (plugin audio-aac) when there is one, and
   * G.711 listed here passes it as received (ffplay and VLC play it; live platforms and CDNs want AAC).
   */
  @IsArray() @IsIn(RTMP_AUDIO_CODECS, { each: true })
  audioCodecs: RtmpAudioCodec[] = ['aac'];
}
