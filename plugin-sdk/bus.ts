import type { AccessUnit, TrackInfo } from './media';

/**
 * What a subscriber hands the bus. The bus calls `write` while `writable()` is true and queues otherwise;
 * the sink calls `Subscription.resume()` when it can take more (e.g. on a socket's 'drain').
 */
export interface MediaSink {
  write(unit: AccessUnit): void;
  /** tracks known so far, and again whenever one changes (new SPS, codec) */
  tracks?(tracks: ReadonlyArray<TrackInfo>): void;
  writable?(): boolean;
  /** the stream ended (publisher gone for good or stream closed) */
  end?(reason: string): void;
}

export interface SubscribeOptions {
  /** queued bytes past which this subscriber skips ahead to the next keyframe (default: the bus's) */
  maxQueueBytes?: number;
  /** start from the GOP cache (latest keyframe) instead of the next unit; default true */
  fromKeyframe?: boolean;
}

export interface Subscription {
  resume(): void;
  close(): void;
  readonly stats: { units: number; bytes: number; skips: number; queuedBytes: number };
}

export interface Publisher {
  setTrack(info: TrackInfo): void;
  push(unit: AccessUnit): void;
  /** the source stopped for now (e.g. terminal disconnected); subscribers stay */
  pause(): void;
  readonly closed: boolean;
  /** called once when the stream closes (last request gone): the source should stop */
  onClose(cb: () => void): void;
}

export interface MediaStreamStats {
  unitsIn: number;
  bytesIn: number;
  videoFrames: number;
  audioFrames: number;
  subscribers: number;
  gopBytes: number;
  queuedBytes: number;
  skips: number;
}

export interface MediaStream {
  readonly name: string;
  readonly tracks: ReadonlyArray<TrackInfo>;
  /** true from the first keyframe (or first audio unit of an audio-only stream) */
  readonly ready: boolean;
  readonly closed: boolean;
  /** at most one publisher at a time; a second attach replaces the first (terminal reconnect) */
  attachPublisher(): Publisher;
  subscribe(sink: MediaSink, opts?: SubscribeOptions): Subscription;
  onReady(cb: () => void): void;
  stats(): MediaStreamStats;
}

export interface MediaBus {
  get(name: string): MediaStream | undefined;
  onStream(cb: (s: MediaStream) => void): void;
}
