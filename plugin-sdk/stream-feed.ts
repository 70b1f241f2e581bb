/**
 * A source that feeds bus streams it did not make (a camera pull, an RTMP encoder) starts each one at a start point
 * and on a timeline of its own: the stream's 0 is the source's first unit it gets, so a stream joining a running
 * source starts at once, from that source's latest key frame, without a jump in time.
 */
import type { MediaStream, Off, Publisher } from './bus';
import { shiftUnit, type AccessUnit, type TrackInfo } from './media';

export class StreamFeed {
  publisher: Publisher | undefined;
  /** the source-timeline ms that is this stream's 0 (undefined until its first start point; reset it for a new session) */
  baseMs: number | undefined;
  /** the stream's 'closed' listener, for the source to remove when it lets the stream go */
  offClosed: Off | undefined;
  constructor(readonly stream: MediaStream) {}

  /** starts at a start point (a key frame; audio when the source has no video), then goes on */
  push(u: AccessUnit, tracks: ReadonlyMap<string, TrackInfo>, hasVideo: boolean): void {
    if (this.baseMs === undefined) {
      if (hasVideo ? !(u.kind === 'video' && u.keyframe) : u.kind !== 'audio') return;
      this.publisher = this.stream.attachPublisher();
      for (const t of tracks.values()) this.publisher.setTrack(t);
      this.baseMs = u.dts;
    }
    if (u.dts < this.baseMs) return;
    this.publisher!.push(this.baseMs === 0 ? u : shiftUnit(u, -this.baseMs));
  }
}
