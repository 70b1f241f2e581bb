/**
 * Turns device timestamps into the stream's own timeline (ms from 0).
 *
 * Terminal clocks are not wall clocks (ms since 2000, since 1970, since boot, near 2^40 ...), so the first
 * packet of the connection is the origin, and audio and video share that one origin to stay in sync.
 * Devices also jump: a clock set by GPS or NTP mid-stream, a counter restart. A jump forward of more than
 * maxForwardJumpMs (measured against the latest output of any track, so a track resuming after a silence
 * is not mistaken for a jump) or backward beyond maxBackwardJitterMs moves the origin so the track
 * continues from the latest output plus one nominal frame interval; players would otherwise stall
 * waiting for the future or drop everything as late. Smaller backward steps are clamped so each
 * track's output stays strictly increasing, which muxers require.
 */

export type TrackKind = 'video' | 'audio';

export interface TimelineOptions {
  /** Default 10000. */
  maxForwardJumpMs?: number;
  /** Default 500. */
  maxBackwardJitterMs?: number;
  /** Frame interval used after a jump until a real one is measured. Defaults: video 40, audio 20. */
  nominalVideoIntervalMs?: number;
  nominalAudioIntervalMs?: number;
}

export interface TimelineStats {
  /** origin moves after a device clock jump */
  rebases: number;
  /** outputs pushed forward to stay strictly increasing */
  clamped: number;
}

class TrackClock {
  last = -Infinity;
  lastDevice = 0;
  constructor(public interval: number) {}
}

export class Jt1078Timeline {
  readonly stats: TimelineStats = { rebases: 0, clamped: 0 };
  private base = 0;
  private hasBase = false;
  private readonly fwd: number;
  private readonly back: number;
  private readonly video: TrackClock;
  private readonly audio: TrackClock;

  constructor(opts: TimelineOptions = {}) {
    this.fwd = opts.maxForwardJumpMs ?? 10000;
    this.back = opts.maxBackwardJitterMs ?? 500;
    this.video = new TrackClock(opts.nominalVideoIntervalMs ?? 40);
    this.audio = new TrackClock(opts.nominalAudioIntervalMs ?? 20);
  }

  get started(): boolean {
    return this.hasBase;
  }

  /** Sets the origin from the connection's first packet (later calls do nothing). */
  start(deviceTs: number): void {
    if (this.hasBase) return;
    this.base = deviceTs;
    this.hasBase = true;
  }

  /** The stream time (ms) for a frame of this track with this device timestamp. */
  map(track: TrackKind, deviceTs: number): number {
    if (!this.hasBase) this.start(deviceTs);
    const t = track === 'video' ? this.video : this.audio;
    const latest = Math.max(this.video.last, this.audio.last);
    let out = deviceTs - this.base;
    if (latest === -Infinity) {
      if (out < 0) out = 0;
    } else if (out > latest + this.fwd || (t.last !== -Infinity ? out < t.last - this.back : out < latest - this.fwd)) {
      out = latest + t.interval;
      this.base = deviceTs - out;
      this.stats.rebases++;
    } else {
      const step = deviceTs - t.lastDevice;
      if (t.last !== -Infinity && step > 0 && step <= 1000) t.interval = step;
      if (out < 0) out = 0;
    }
    if (out <= t.last) {
      out = t.last + 1;
      this.stats.clamped++;
    }
    t.last = out;
    t.lastDevice = deviceTs;
    return out;
  }

  /** The latest output of either track (-Infinity before any). */
  get latest(): number {
    return Math.max(this.video.last, this.audio.last);
  }
}
