/** The FLV/WS-FLV player server the kernel provides (backed by node-media-server). */
export interface PlayAttempt {
  app: string;
  stream: string;
  query: Record<string, string>;
  remote: string;
  protocol: 'http-flv' | 'ws-flv';
}

export interface FlvTag {
  type: 8 | 9 | 18;
  timestamp: number;
  body: Buffer;
  keyframe: boolean;
}

export interface FlvPublisher {
  sendTag(tag: FlvTag): void;
  end(): void;
}

export interface FlvPublishOptions {
  /**
   * The media tags a player joining mid-stream gets, from the latest video keyframe on, with the timestamps
   * they had when sent; called at each join. Given, the server keeps no GOP of tags of its own (the caller
   * holds the frames already); onMetaData and sequence headers it still keeps and sends first, and config
   * tags in what this returns are left out.
   */
  joinTags?: () => FlvTag[];
}

/**
 * The most tags a GOP kept for late joiners may hold (NMS's own bound on its cache, in messages); past it, as past
 * maxGopCacheBytes, joiners wait for the next keyframe. The FLV server applies it to its cache, and a publisher
 * that makes join tags itself (joinTags) to what it keeps.
 */
export const FLV_MAX_GOP_TAGS = 4096;

export interface FlvServerOptions {
  /** a player whose unsent backlog passes this skips to the next keyframe; past 4x it is dropped (default 2 MiB) */
  maxPlayerBacklogBytes?: number;
  /** GOP cache per stream for late joiners (default 8 MiB) */
  maxGopCacheBytes?: number;
}

export interface FlvServer {
  /** false → HTTP 401 / WebSocket close 4401 before any media */
  setPlayAuthorizer(fn: (p: PlayAttempt) => boolean): void;
  onPlayer(ev: 'start' | 'stop', cb: (p: PlayAttempt, playerId: string) => void): void;
  publish(app: string, stream: string, opts?: FlvPublishOptions): FlvPublisher;
  /** ends a stream's players, or only those the filter picks (e.g. one request's) */
  closePlayers(app: string, stream: string, filter?: (p: PlayAttempt) => boolean): void;
  stats(): { players: number; streams: number; bytesOut: number };
  /** per player: stream, bytes sent, backlog, skips */
  playerStats(): Array<{
    id: string; app: string; stream: string; protocol: PlayAttempt['protocol']; remote: string;
    bytesOut: number; backlogBytes: number; peakBacklogBytes: number; skips: number;
  }>;
  readonly port: number;
}
