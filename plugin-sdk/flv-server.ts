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

export interface FlvServer {
  /** false → HTTP 401 / WebSocket close 4401 before any media */
  setPlayAuthorizer(fn: (p: PlayAttempt) => boolean): void;
  onPlayer(ev: 'start' | 'stop', cb: (p: PlayAttempt, playerId: string) => void): void;
  publish(app: string, stream: string): FlvPublisher;
  closePlayers(app: string, stream: string): void;
  stats(): { players: number; streams: number; bytesOut: number };
  readonly port: number;
}
