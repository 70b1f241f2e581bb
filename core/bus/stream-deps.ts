import type { Logger } from 'pino';
import type { Via } from '../../plugin-sdk/bus';
import type { ChunkPool } from './chunk-pool';
import type { BusStream } from './stream';

/** What the bus gives each of its streams: its limits, log, clock, stages, payload memory and readers' names. */
export interface BusLimits {
  maxGopBytes: number;
  maxQueueBytes: number;
  maxStreamBytes: number;
  /** a reader that takes nothing this long while media waits is ended */
  readerDropAfterMs: number;
  /** Publisher.alloc reuses payload memory (payload-arena.ts); false: per-stream slabs the collector frees (default true) */
  reusePayloads?: boolean;
}

export interface StreamDeps {
  limits: BusLimits;
  log: Logger;
  /** the gateway clock (ms since the epoch; a manual clock in tests) */
  now: () => number;
  /** the derived stream a `via` names (the last of a chain), started for this reader if need be */
  derive: (from: BusStream, via: Via) => BusStream;
  /** the bus's payload chunks: every stream's arena takes from it and gives back to it */
  chunks: ChunkPool;
  /**
   * a name for a reader subscribing now that gave none and cannot say when it is done (reader-name.ts): the stage
   * being started, or the plugin whose code called subscribe
   */
  nameReader: () => string;
}
