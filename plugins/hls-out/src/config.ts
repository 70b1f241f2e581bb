import { ArrayNotEmpty, IsArray, IsBoolean, IsIn, IsInt, IsNumber, IsOptional, Max, Min } from 'class-validator';

export class HlsOutConfig {
  /**
   * schemes play URLs may use; default the API port's own (https when the site has tlsCertFile, else http). List
   * https on a plain API port only when a TLS front serves it (with publicPort)
   */
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @IsIn(['http', 'https'], { each: true })
  schemes: string[] | undefined = undefined;

  /** port written into play URLs when a TLS front or NAT publishes the API port elsewhere (default: the API's own) */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(65535)
  publicPort: number | undefined = undefined;

  /**
   * Segment target, s. Segments start at keyframes: a segment is cut at the first keyframe at or past this, or
   * earlier when the next GOP would take it over by more than half a second. EXT-X-TARGETDURATION is this, rounded
   * up, and never changes: a GOP longer than it is cut inside, without a keyframe.
   */
  @IsNumber()
  @Min(1)
  @Max(30)
  targetDurationSec = 2;

  /** LL-HLS partial segments (EXT-X-PART, blocking reload, preload hints), fMP4 only */
  @IsBoolean()
  lowLatency = true;

  /** partial segment target, s (parts end at frame boundaries and never exceed it unless one frame is longer) */
  @IsNumber()
  @Min(0.1)
  @Max(2)
  partTargetSec = 0.333;

  /** complete segments listed in the playlist at most (fewer when windowSec is reached with fewer) */
  @IsInt()
  @Min(2)
  @Max(60)
  windowSegments = 6;

  /**
   * Seconds of complete segments the playlist lists at least: the oldest leaves once the rest last this long.
   * 0 (the default): three target durations, RFC 8216's least (6.2.2), which is what LL-HLS players at the live
   * edge need; more gives players that start further back room, at the memory of the segments kept.
   */
  @IsNumber()
  @Min(0)
  @Max(600)
  windowSec = 0;

  /**
   * Bytes of media one stream's HLS form may hold (its segments, parts and the segment being made). Past it the
   * oldest segments go; a single segment past half of it is dropped and the stream waits for the next keyframe.
   */
  @IsInt()
  @Min(256 * 1024)
  maxStreamBytes = 16 * 1024 * 1024;

  /** a player that fetches nothing this long is no longer counted (sessions.attachPlayer's handle is closed) */
  @IsInt()
  @Min(2)
  @Max(600)
  playerIdleSec = 15;

  /** how long a playlist request waits for the first part or segment of a stream that has none yet */
  @IsInt()
  @Min(1)
  @Max(60)
  earlyWaitSec = 15;

  /** how long the first segment waits for the AAC audio track when the stream has audio (or may have it) */
  @IsInt()
  @Min(0)
  @Max(5000)
  audioWaitMs = 1500;
}
