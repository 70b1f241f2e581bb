/**
 * Input frames kept on the main thread until one of them completes an AAC frame, then sent to the worker together.
 *
 * Why: the encoder makes a frame per 1,024 output samples, so of a terminal's 20 ms G.711 frames only one in 6.4
 * completes anything (128 ms at 8 kHz); sending each on its own costs a promise, a lane entry's answer and a stage
 * reaction per frame for nothing. Held back until the one that completes a frame, the group costs one of each and
 * the AAC comes out exactly when it would with each frame sent on its own: the frames held could not make anything
 * sooner.
 *
 * Where the next AAC frame completes ("due", in the input's ticks) the worker says with each answer (its encoder's
 * buffered samples); until an answer comes it is stepped here one AAC frame at a time. Not known (the start, after
 * an error), or a frame that does not follow the last one held (a gap or a new publisher: the worker fills or
 * restarts its timeline, so "due" moves), or one of unknown length: the frames go at once and the next answer
 * tells again.
 *
 * The frames kept are copies (into one small buffer, reused once they are sent: the lane copies a group as it takes
 * it), so the stage never holds a view of its input's payload memory, which the bus can then reuse.
 */
import type { AccessUnit } from '../../../plugin-sdk';
import type { LaneFrame } from './frame-lane';

const FIRST_BYTES = 2048;

export class HeldFrames {
  private frames: LaneFrame[] = [];
  private bytes = new Uint8Array(FIRST_BYTES);
  private used = 0;
  /** where the last frame seen (held or sent) ends, in ticks of its timescale */
  private end = NaN;
  private dueTicks = NaN;
  private dueScale = 0;
  /** counts the breaks in the input's timeline: an answer about frames before the latest break says nothing now */
  epoch = 0;

  /** `outRate`: the AAC output's sample rate (one AAC frame is 1,024 samples of it) */
  constructor(private readonly outRate: number) {}

  /** Keeps `u` when it completes nothing and follows what is held; false when it should go now (call take). */
  add(u: AccessUnit): boolean {
    if (Number.isNaN(this.dueTicks) || u.timescale !== this.dueScale || u.duration <= 0) return false;
    const end = u.dtsTicks + u.duration;
    if (end >= this.dueTicks) return false;
    if (!this.follows(u)) return false;
    this.frames.push({ payload: this.copyOf(u.payload), dtsTicks: u.dtsTicks, timescale: u.timescale });
    this.end = end;
    return true;
  }

  private copyOf(p: Uint8Array): Uint8Array {
    // frames held before a new buffer keep their views of the old one
    if (this.used + p.length > this.bytes.length) {
      this.bytes = new Uint8Array(Math.max(this.bytes.length * 2, p.length));
      this.used = 0;
    }
    const view = this.bytes.subarray(this.used, this.used + p.length);
    view.set(p);
    this.used += p.length;
    return view;
  }

  /**
   * The held frames and `u`, to send now (before the next `add`: the held ones are views of a buffer it reuses); the
   * due point stepped past `u` until the worker's answer says.
   */
  take(u: AccessUnit): LaneFrame[] {
    const group = this.frames;
    const follows = this.follows(u);
    group.push(u);
    this.frames = [];
    this.used = 0;
    const end = u.dtsTicks + u.duration;
    this.end = u.duration > 0 ? end : NaN;
    if (!follows || u.duration <= 0 || u.timescale !== this.dueScale) {
      if (!follows) this.epoch++;
      this.dueTicks = NaN;
    } else {
      this.stepPast(end);
    }
    return group;
  }

  /**
   * The worker's answer about a group sent in `epoch`: after it, the next AAC frame completes when the input reaches
   * `ticks` of `timescale` (NaN: unknown). Groups sent since then are stepped over.
   */
  due(ticks: number, timescale: number, epoch: number): void {
    if (epoch !== this.epoch) return;
    this.dueTicks = ticks;
    this.dueScale = timescale;
    if (!Number.isNaN(this.end)) this.stepPast(this.end);
  }

  /** nothing known any more (an error): frames go one by one until the next answer */
  forget(): void {
    this.dueTicks = NaN;
  }

  clear(): void {
    this.frames = [];
    this.used = 0;
    this.end = NaN;
    this.dueTicks = NaN;
    this.epoch++;
  }

  /** `u` starts where the last frame seen ended (ticks are whole samples: anything else is a gap, an overlap or time going back; nothing seen yet is a start) */
  private follows(u: AccessUnit): boolean {
    return Math.abs(u.dtsTicks - this.end) <= 1;
  }

  private stepPast(end: number): void {
    if (Number.isNaN(this.dueTicks)) return;
    const step = (1024 * this.dueScale) / this.outRate;
    while (this.dueTicks <= end) this.dueTicks += step;
  }
}
