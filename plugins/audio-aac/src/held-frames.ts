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
 * The frames kept are copies, back to back in one buffer with their times and lengths in typed arrays (no object or
 * view per frame: five in six frames stop here), so the stage never holds a view of its input's payload memory,
 * which the bus can then reuse. The lane copies a group out as it takes it, and the next frame held reuses the room.
 */
import type { AccessUnit } from '../../../plugin-sdk';
import { grownTo, type HeldGroup } from './frame-lane';

const FIRST_BYTES = 2048;
const FIRST_FRAMES = 16;

export class HeldFrames implements HeldGroup {
  /** frames held now: the first `count` of dts/scales/lengths, their bytes back to back from the start of `bytes` */
  private count = 0;
  private used = 0;
  /** of the group last taken (what the lane reads): its held frames, and their bytes */
  taken = 0;
  takenBytes = 0;
  bytes = new Uint8Array(FIRST_BYTES);
  dts = new Float64Array(FIRST_FRAMES);
  scales = new Float64Array(FIRST_FRAMES);
  lengths = new Uint32Array(FIRST_FRAMES);
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
    this.keep(u);
    this.end = end;
    return true;
  }

  private keep(u: AccessUnit): void {
    const p = u.payload;
    const i = this.count;
    if (i === this.dts.length) this.growFrames();
    if (this.used + p.length > this.bytes.length) {
      // nothing outside refers to the old buffer (the lane copied the last group when it took it): move what is held
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.used + p.length));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    this.bytes.set(p, this.used);
    this.used += p.length;
    this.dts[i] = u.dtsTicks;
    this.scales[i] = u.timescale;
    this.lengths[i] = p.length;
    this.count = i + 1;
  }

  private growFrames(): void {
    const n = this.dts.length * 2;
    this.dts = grownTo(this.dts, new Float64Array(n));
    this.scales = grownTo(this.scales, new Float64Array(n));
    this.lengths = grownTo(this.lengths, new Uint32Array(n));
  }

  /**
   * The held frames, to send now with `u` (the lane copies them before the next `add`, which reuses their room): the
   * group is `taken` frames of this, then `u`. The due point is stepped past `u` until the worker's answer says.
   */
  take(u: AccessUnit): HeldGroup {
    this.taken = this.count;
    this.takenBytes = this.used;
    const follows = this.follows(u);
    this.count = 0;
    this.used = 0;
    const end = u.dtsTicks + u.duration;
    this.end = u.duration > 0 ? end : NaN;
    if (!follows || u.duration <= 0 || u.timescale !== this.dueScale) {
      if (!follows) this.epoch++;
      this.dueTicks = NaN;
    } else {
      this.stepPast(end);
    }
    return this;
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
    this.count = 0;
    this.used = 0;
    this.taken = 0;
    this.takenBytes = 0;
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
