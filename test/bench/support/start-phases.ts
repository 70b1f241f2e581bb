/**
 * When each bench terminal starts: spread over one GOP, so the fleet's key frames come evenly as a real fleet's do.
 *
 * Why: every terminal's camera keeps its own GOP clock, so across a fleet key frames land evenly over a GOP. The
 * bench's terminals replay one capture (a 2 s GOP), each from an I frame. Started as soon as each is opened, their
 * GOP phases would be wherever the open phase put them: opening 1,000 takes 1.7 to 2.8 s, so some 200 to 800 ms of
 * the GOP would hold twice as many terminals as the rest, or none. Those terminals' key frames would come together,
 * and their GOP caches grow together and let go together, so what the caches and the payload pool hold at the
 * instant RSS is read would swing with each run's open phase (measured so: 155-181 MB of caches, 5-36 MB free in the
 * pool, 283-332 KB a stream between runs of one build). Here terminal i of n starts at the phase i/n of a GOP, whenever it
 * was opened, so every run has the same phases.
 *
 * Frames are spread too: a GOP slot alone puts every terminal's frames at one instant of the frame interval when n
 * divides the GOP's frame count (50 terminals, 50 frames a GOP), so each also takes its own slot of the frame interval.
 */
import type { SynthStream } from './synth-terminals';

export class StartPhases {
  /** the capture's usual GOP, ms: the median gap between its I frames */
  readonly gopMs: number;
  /** the capture's usual video frame interval, ms */
  readonly frameMs: number;

  constructor(
    stream: Pick<SynthStream, 'frames' | 'keyframes'>,
    private readonly n: number,
    /** performance.now() time phases count from */
    private readonly origin: number,
  ) {
    const t = (i: number) => stream.frames[i].t;
    this.gopMs = median(stream.keyframes.slice(1).map((k, j) => t(k) - t(stream.keyframes[j]))) || 1;
    const video = stream.frames.filter((f) => f.video);
    this.frameMs = median(video.slice(1).map((f, j) => f.t - video[j].t)) || 40;
  }

  /** terminal i's phase in the GOP, ms from origin modulo the GOP */
  phase(i: number): number {
    const gopSlot = (i * this.gopMs) / this.n;
    const frameSlot = ((i * this.frameMs) / this.n) % this.frameMs;
    return (gopSlot + frameSlot) % this.gopMs;
  }

  /** When terminal i starts on an I frame (performance.now() time): the first time at or after `now` at its phase. */
  at(i: number, now: number): number {
    const since = (((now - this.origin) % this.gopMs) + this.gopMs) % this.gopMs;
    let wait = this.phase(i) - since;
    if (wait < 0) wait += this.gopMs;
    return now + wait;
  }
}

function median(xs: number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}
