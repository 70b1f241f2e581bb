import { IsIn, IsInt, IsNumber, IsOptional, IsString, Matches, Max, Min, MinLength } from 'class-validator';

/** The recorder's keys (site file "plugins[].config"); each can be overridden by GW_RECORDER_<KEY>. */
export class RecorderConfig {
  /** where record files go; relative paths are taken from the data directory (default <dataDir>/records) */
  @IsOptional()
  @IsString()
  @MinLength(1)
  storeRoot: string | undefined = undefined;

  /** catalog in PostgreSQL (postgres://user:pwd@host/db) instead of the embedded SQLite file */
  @IsOptional()
  @IsString()
  @Matches(/^postgres(ql)?:\/\//, { message: 'postgresUrl must be a postgres:// or postgresql:// URL' })
  postgresUrl: string | undefined = undefined;

  /** table of the PostgreSQL catalog */
  @IsString()
  @Matches(/^[a-z_][a-z0-9_]{0,40}$/, { message: 'postgresTable must be a lower-case SQL identifier' })
  postgresTable = 'stored_av';

  /** IANA zone for the {yyyy}/{MM} of paths, query times without an offset, and reqTm in answers (default: the process's) */
  @IsOptional()
  @IsString()
  timeZone: string | undefined = undefined;

  /**
   * The audio a record file keeps. 'auto' (default): what the terminal sent when FLV can hold it (AAC, G.711: the
   * original bytes are the better evidence, and VLC and ffplay play them), AAC for what FLV cannot hold (G.726,
   * ADPCM), so no recording loses its audio. 'aac': always AAC (files every browser player can play, at an encoder
   * per recording). 'as-received': never transcode (G.726/ADPCM audio is then left out). AAC needs the audio-aac
   * plugin on the site; without it every mode records as received.
   */
  @IsIn(['auto', 'aac', 'as-received'])
  audio: 'auto' | 'aac' | 'as-received' = 'auto';

  /** records older than this many days are removed (0: no age limit) */
  @IsNumber()
  @Min(0)
  maxAgeDays = 0;

  /** oldest records are removed while all records together exceed this many bytes (0: no size limit) */
  @IsInt()
  @Min(0)
  maxTotalBytes = 0;

  /** how often retention (and recovery of orphaned rows) runs, besides at start */
  @IsInt()
  @Min(1)
  @Max(86400)
  retentionIntervalSec = 600;

  /** how often the catalog's sz follows the files being recorded */
  @IsInt()
  @Min(1)
  @Max(3600)
  sizeUpdateSec = 5;

  /** bytes a recording may hold for a slow disk before it fails */
  @IsInt()
  @Min(256 * 1024)
  maxPendingBytes = 16 * 1024 * 1024;

  /**
   * While the recorder is degraded (its disk or catalog full or failing), how often it runs retention and checks
   * whether it can record again; also how often it retries final rows the catalog could not take
   */
  @IsInt()
  @Min(1)
  @Max(3600)
  degradedRetrySec = 10;

  /**
   * Free bytes the record store's file system (and the SQLite catalog's) must have before a degraded recorder
   * records again: room for new files, so it does not fail again at the first keyframe
   */
  @IsInt()
  @Min(0)
  resumeFreeBytes = 64 * 1024 * 1024;

  /**
   * With PostgreSQL or several workers: a 'recording' row whose file has not changed for this long is taken as left
   * behind by a gateway or worker that died (another one sharing the catalog may still be writing fresher ones)
   */
  @IsInt()
  @Min(0)
  orphanQuietSec = 300;
}
