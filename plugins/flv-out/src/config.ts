import { ArrayNotEmpty, IsArray, IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

/** the audio codecs FLV can carry */
export const FLV_AUDIO_CODECS = ['aac', 'g711a', 'g711u'] as const;
export type FlvAudioCodec = (typeof FLV_AUDIO_CODECS)[number];

export class FlvOutConfig {
  /** HTTP-FLV and WS-FLV port (decisions.md: 7081) */
  @IsInt()
  @Min(0)
  @Max(65535)
  port = 7081;

  @IsOptional()
  @IsString()
  host: string | undefined = undefined;

  /** port written into play URLs when a TLS front or NAT publishes this server elsewhere (default: port) */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(65535)
  publicPort: number | undefined = undefined;

  /**
   * false: plain HTTP on this port even when the site serves TLS (a TLS front of its own publishes it); default: as
   * the site (gateway tlsCertFile/tlsKeyFile)
   */
  @IsOptional()
  @IsBoolean()
  tls: boolean | undefined = undefined;

  /**
   * schemes play URLs may use; default http, ws on a plain port and https, wss on a TLS one. List https/wss on a plain
   * port only when a TLS front serves them (with publicPort)
   */
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @IsIn(['http', 'ws', 'https', 'wss'], { each: true })
  schemes: string[] | undefined = undefined;

  /**
   * A player's queue on the bus (media its socket could not take yet) past which it skips to the next keyframe;
   * a player that misses 4x this without taking anything is dropped.
   */
  @IsInt()
  @Min(64 * 1024)
  maxPlayerBacklogBytes = 2 * 1024 * 1024;

  /**
   * 'aac': players get the stream's audio as AAC through the site's AAC stage (plugin audio-aac), at the request's
   * audioCfg or the stage's default; 'as-received': the terminal's audio as it came, if FLV can carry it
   * (audioCodecs). Without an AAC stage on the site, 'aac' falls back to as received.
   */
  @IsIn(['aac', 'as-received'])
  audio: 'aac' | 'as-received' = 'aac';

  /**
   * Audio codecs put into the FLV; the rest is left out and counted. G.711 is out by default: browser players
   * (mpegts.js, flv.js) cannot decode it and, told by the FLV that audio is coming, never start the video either.
   * With audio 'aac', G.711 listed here passes the AAC stage as received (for players such as VLC or ffplay).
   */
  @IsArray()
  @IsIn(FLV_AUDIO_CODECS, { each: true })
  audioCodecs: FlvAudioCodec[] = ['aac'];
}
