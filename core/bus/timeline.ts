import { shiftUnit, type AccessUnit } from '../../plugin-sdk/media';
import type { PublisherHandle } from './publisher-handle';

/** a new publisher's first unit lands this far after the previous one's last, so the timeline never goes back */
const RECONNECT_STEP_MS = 20;

/**
 * A stream's timeline: the latest time on it, where each publisher's units land on it, and the wall-clock time it
 * is anchored to. Publishers come and go (a terminal reconnects); readers see one timeline that never goes back.
 */
export class StreamTimeline {
  /** the latest dts of a unit on the stream (-Infinity: none yet) */
  private lastDts = -Infinity;
  private anchor: { wall: number; dts: number } | undefined;

  constructor(
    /** the gateway clock, ms since the epoch */
    private readonly now: () => number,
  ) {}

  /**
   * `unit` on this timeline. A publisher's first unit fixes its offset: a new publisher continues the old timeline,
   * and its first unit anchors the wall clock (to what it set with setWallClock, or to now). The shifted unit is a
   * copy, since units are shared. `own` false: the stream is on its input's timeline (a stage's stream, fed the
   * input's units as they are), and its one publisher is never shifted.
   */
  place(pub: PublisherHandle, unit: AccessUnit, own: boolean): AccessUnit {
    if (pub.offset === undefined) {
      pub.offset = this.lastDts === -Infinity || !own ? 0 : Math.round(this.lastDts + RECONNECT_STEP_MS - unit.dts);
      const w = pub.wallPending;
      if (w) this.anchorWallClock(w.epochMs, w.dtsMs + pub.offset);
      else this.anchorWallClock(this.now(), unit.dts + pub.offset);
      pub.wallPending = undefined;
    }
    return pub.offset !== 0 ? shiftUnit(unit, pub.offset) : unit;
  }

  /** a unit at `dts` is on the stream */
  reached(dts: number): void {
    if (dts > this.lastDts) this.lastDts = dts;
  }

  wallClock(dtsMs: number): number | undefined {
    return this.anchor ? this.anchor.wall + (dtsMs - this.anchor.dts) : undefined;
  }

  anchorWallClock(epochMs: number, dtsMs: number): void {
    this.anchor = { wall: epochMs, dts: dtsMs };
  }
}
