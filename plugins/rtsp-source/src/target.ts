/** One bus stream a pull feeds: its publisher for the current session and its time origin. */
import { shiftUnit, type AccessUnit, type MediaStream, type Off, type Publisher, type TrackInfo } from '../../../plugin-sdk';

/** one stream the pull feeds */
export class Target {
  publisher: Publisher | undefined;
  /** the session-timeline ms that is this stream's 0 in the current session */
  baseMs: number | undefined;
  offClosed: Off | undefined;
  constructor(readonly stream: MediaStream) {}

  /** starts at a start point (a keyframe; audio when the pull has no video), then goes on */
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
