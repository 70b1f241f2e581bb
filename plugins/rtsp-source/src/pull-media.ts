/**
 * A pull's media side for the session playing now: a receiver per track the gateway can carry, the pull's own GOP
 * cache for streams that join it, the wall clock from the sender reports of one track, and every unit pushed to each
 * stream the pull feeds. The pull (pull.ts) owns the sessions and the streams; this owns what flows between them.
 */
import type { Logger } from 'pino';
import type { AccessUnit, Clock, StreamFeed, TrackInfo } from '../../../plugin-sdk';
import { parseRtcpSr } from './rtp';
import type { PlayInfo } from './session';
import { statsOf, TrackReceiver, trackProblem, type ReceiverStats } from './tracks';

export interface PullMediaDeps {
  /** the streams fed, by name (the pull's own map: streams come and go between units) */
  targets: ReadonlyMap<string, StreamFeed>;
  clock: Clock;
  log: Logger;
  /** the source's URL without credentials, for the log */
  shown: string;
  maxFrameBytes: number;
  /** the GOP cache's bound, bytes */
  maxGopBytes: number;
  malformed(what: string): void;
  unit(kind: 'video' | 'audio'): void;
}

export class PullMedia {
  private receivers: Array<TrackReceiver | undefined> = [];
  private readonly tracks = new Map<'video' | 'audio', TrackInfo>();
  private hasVideo = false;
  private gop: AccessUnit[] = [];
  private gopBytes = 0;
  private sessionStart = 0;
  /** the track whose sender reports anchor the wall clock (video when there is one) */
  private clockTrack = -1;

  constructor(private readonly d: PullMediaDeps) {}

  get receiverStats(): ReceiverStats[] {
    return this.receivers.filter((r): r is TrackReceiver => r !== undefined).map(statsOf);
  }

  /** A session starts: packets that come before `playing` (in the chunk that brings PLAY's answer) go nowhere. */
  sessionStarting(): void {
    this.receivers = [];
  }

  /** A stream joins: it starts at the pull's latest keyframe, not a GOP later. */
  joined(t: StreamFeed): void {
    for (const u of this.gop) t.push(u, this.tracks, this.hasVideo);
  }

  /** the pull stopped */
  clear(): void {
    this.gop = [];
  }

  /** The session plays: a receiver for each track that can be carried, and every stream starts again. */
  playing(info: PlayInfo): void {
    const { targets, log, clock } = this.d;
    this.sessionStart = clock.now();
    this.gop = [];
    this.gopBytes = 0;
    this.tracks.clear();
    // every stream starts again at the new session's first start point, with a new publisher (the bus moves the
    // new timeline on from where the old one stopped)
    for (const t of targets.values()) {
      t.baseMs = undefined;
      t.publisher = undefined;
    }
    this.receivers = [];
    this.clockTrack = -1;
    const taken: string[] = [];
    for (const pt of info.tracks) {
      const problem = trackProblem(pt.media);
      if (problem) {
        log.warn({ source: this.d.shown, media: `${pt.media.type} ${pt.media.encoding}`, problem }, 'RTSP track left out');
        this.receivers[pt.index] = undefined;
        continue;
      }
      const r = new TrackReceiver(
        pt.media,
        pt.rtptime,
        () => clock.now() - this.sessionStart,
        {
          track: (ti) => this.onTrack(ti),
          unit: (u) => this.onUnit(u),
        },
        this.d.maxFrameBytes,
      );
      this.receivers[pt.index] = r;
      taken.push(`${pt.media.type} ${pt.media.codec}`);
      if (r.kind === 'video' && this.clockTrack < 0) this.clockTrack = pt.index;
    }
    if (this.clockTrack < 0) this.clockTrack = info.tracks.findIndex((t) => !trackProblem(t.media));
    this.hasVideo = info.tracks.some((t) => t.media.type === 'video' && !trackProblem(t.media));
    log.info(
      {
        source: this.d.shown,
        transport: info.transport,
        tracks: taken,
        skipped: info.skipped,
        sdpBadLines: info.sdp.badLines || undefined,
        streams: [...targets.keys()],
      },
      'RTSP source playing',
    );
  }

  rtp(track: number, data: Buffer): void {
    const r = this.receivers[track];
    if (!r) return;
    try {
      r.rtp(data);
    } catch (err) {
      // odd input must never take the gateway down: count it, log it, go on with the next packet
      this.d.malformed('rtp');
      this.d.log.warn({ source: this.d.shown, err: (err as Error).message }, 'RTP packet could not be handled');
    }
  }

  rtcp(track: number, data: Buffer): void {
    const { sr, bad } = parseRtcpSr(data);
    if (bad) {
      this.d.malformed('rtcp');
      return;
    }
    if (!sr || track !== this.clockTrack) return;
    const ms = this.receivers[track]?.msOf(sr.rtpTimestamp);
    if (ms === undefined) return;
    for (const t of this.d.targets.values()) {
      if (t.publisher && t.baseMs !== undefined) t.publisher.setWallClock(sr.epochMs, ms - t.baseMs);
    }
  }

  private onTrack(info: TrackInfo): void {
    this.tracks.set(info.kind, info);
    for (const t of this.d.targets.values()) t.publisher?.setTrack(info);
  }

  private onUnit(u: AccessUnit): void {
    this.d.unit(u.kind);
    if (this.hasVideo) {
      if (u.kind === 'video' && u.keyframe) {
        this.gop = [];
        this.gopBytes = 0;
      }
      if (this.gop.length > 0 || (u.kind === 'video' && u.keyframe)) {
        this.gop.push(u);
        this.gopBytes += u.payload.length;
        if (this.gopBytes > this.d.maxGopBytes) {
          this.gop = [];
          this.gopBytes = 0;
        }
      }
    }
    for (const t of this.d.targets.values()) {
      try {
        t.push(u, this.tracks, this.hasVideo);
      } catch (err) {
        this.d.log.error({ source: this.d.shown, stream: t.stream.name, err: (err as Error).message }, 'publishing to a stream failed');
      }
    }
  }
}
