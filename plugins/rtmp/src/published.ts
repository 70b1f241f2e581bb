/**
 * A virtual channel an RTMP encoder publishes: its units, its own GOP cache, and the bus stream it feeds.
 *
 * The channel lives as long as the publisher's connection, whether or not any request wants it. Its stream exists
 * only while requests do (the sessions make it at the first open and close it with the last): the channel feeds
 * it from the moment both exist, starting at the channel's latest key frame, so an open of a channel already
 * publishing plays at once. Each stream it feeds starts its timeline at 0 (the first unit it gets).
 */
import type { Logger } from 'pino';
import type { AccessUnit, MediaStream, TrackInfo } from '../../../plugin-sdk';
import { BYTE_TOTAL_START, StreamFeed } from '../../../plugin-sdk';
import type { UnitSink } from './flv-units';

export class PublishedChannel implements UnitSink {
  private readonly tracks = new Map<string, TrackInfo>();
  private gop: AccessUnit[] = [];
  private gopBytes = 0;
  private feed: StreamFeed | undefined;
  units = 0;
  bytes = BYTE_TOTAL_START;
  lastUnitAt = 0;

  constructor(
    /** the bus stream name it feeds: `{normSim}_{chanId}_1` */
    readonly name: string,
    readonly appId: string,
    readonly remote: string,
    private readonly maxGopBytes: number,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  get feeding(): string | undefined {
    return this.feed?.stream.name;
  }

  private get hasVideo(): boolean {
    return this.tracks.has('video');
  }

  track(info: TrackInfo): void {
    this.tracks.set(info.kind, info);
    if (this.feed?.publisher?.active) this.feed.publisher.setTrack(info);
  }

  unit(u: AccessUnit): void {
    this.units++;
    this.bytes += u.payload.length;
    this.lastUnitAt = this.now();
    if (u.kind === 'video' && u.keyframe) {
      this.gop = [];
      this.gopBytes = 0;
    }
    // a GOP past its cap is given up until the next key frame (a joiner then waits for that one)
    if (this.gopBytes + u.payload.length <= this.maxGopBytes && (this.gop.length > 0 || (u.kind === 'video' ? u.keyframe : !this.hasVideo))) {
      this.gop.push(u);
      this.gopBytes += u.payload.length;
    }
    this.feed?.push(u, this.tracks, this.hasVideo);
  }

  unsupported(what: string): void {
    this.log.warn({ stream: this.name, remote: this.remote, what }, 'RTMP publisher sends media the gateway cannot carry: left out');
  }

  /** feeds this stream from now on (its GOP first) */
  attach(stream: MediaStream): void {
    if (this.feed?.stream === stream || stream.closed) return;
    this.detach();
    const f = new StreamFeed(stream);
    this.feed = f;
    f.offClosed = stream.on('closed', () => {
      if (this.feed === f) this.feed = undefined;
    });
    for (const u of this.gop) f.push(u, this.tracks, this.hasVideo);
    this.log.info({ stream: stream.name, remote: this.remote }, 'stream fed by an RTMP publisher');
  }

  detach(): void {
    const f = this.feed;
    if (!f) return;
    this.feed = undefined;
    f.offClosed?.();
    // the stream's readers stay: another publish (the encoder reconnecting) goes on from there
    if (f.publisher?.active) f.publisher.pause();
  }

  close(): void {
    this.detach();
    this.gop = [];
    this.gopBytes = 0;
  }
}
