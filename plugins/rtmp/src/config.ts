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
  @IsInt()
  @Min(0)
  @Max(65535)
  port = 7935;

  @IsOptional()
  @IsString()
  host: string | undefined = undefined;

  /** port written into play and publish URLs when NAT or a proxy publishes this server elsewhere (default: port) */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(65535)
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
  @IsInt()
  @Min(64 * 1024)
  @Max(16 * 1024 * 1024 - 1)
  maxMessageBytes = 4 * 1024 * 1024;

  /** a connection that has not started to play or publish this long after it came is closed */
  @IsInt()
  @Min(1)
  @Max(300)
  handshakeTimeoutSec = 10;

  /** a publisher that sends no media this long is dropped */
  @IsInt()
  @Min(1)
  @Max(600)
  publishIdleSec = 15;

  /** each player's queue cap on the bus: past it the player skips to the next keyframe */
  @IsInt()
  @Min(64 * 1024)
  @Max(256 * 1024 * 1024)
  maxPlayerBacklogBytes = 4 * 1024 * 1024;

  /** bytes a player's socket may hold before the bus queues for it instead */
  @IsInt()
  @Min(16 * 1024)
  @Max(64 * 1024 * 1024)
  socketHighWaterBytes = 256 * 1024;

  /** a published channel's own GOP cache (so an open that comes while it publishes starts at once) */
  @IsInt()
  @Min(64 * 1024)
  @Max(256 * 1024 * 1024)
  maxPublishGopBytes = 8 * 1024 * 1024;

  /**
   * Audio codecs players get: audio goes through the site's AAC stage (plugin audio-aac) when there is one, and
   * G.711 listed here passes it as received (ffplay and VLC play it; live platforms and CDNs want AAC).
   */
  @IsArray()
  @IsIn(RTMP_AUDIO_CODECS, { each: true })
  audioCodecs: RtmpAudioCodec[] = ['aac'];

  // --- push out (POST /strm/relay; README "Push out (relay)") ---

  /** relays one application may have at once, in any state; past it POST /strm/relay answers -3 */
  @IsInt()
  @Min(0)
  @Max(100_000)
  maxRelaysPerApp = 16;

  /** wait before a failed relay connects again; doubles with each failure up to relayRetryMaxMs */
  @IsInt()
  @Min(100)
  @Max(600_000)
  relayRetryMinMs = 1000;

  /** the longest wait between a relay's attempts; a publish that held this long starts the back-off over */
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  relayRetryMaxMs = 30_000;

  /** a relay's connect, handshake and publish must be done within this, or the attempt failed */
  @IsInt()
  @Min(1)
  @Max(300)
  relayConnectTimeoutSec = 10;

  /** at most one relay notice per relay this often (a flapping relay's latest state goes when it ends; stopped goes at once) */
  @IsInt()
  @Min(0)
  @Max(3600)
  relayNoticeIntervalSec = 30;

  /** refuse relay hosts that are or resolve to internal addresses (private, link-local, CGNAT…): the URL is an API caller's */
  @IsIn([true, false])
  relayBlockInternal = true;

  /** with relayBlockInternal, still allow loopback (a local test server, an edge on the same machine) */
  @IsIn([true, false])
  relayAllowLoopback = false;

  /** PEM files of extra CAs trusted for rtmps:// relays, beside Node's own store */
  @IsArray()
  @IsString({ each: true })
  relayCaFiles: string[] = [];
}
