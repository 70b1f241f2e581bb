/**
 * Where a segmenter cuts, as numbers: a part ends before the unit that would take it past the part target, a
 * segment before the start point at or past the target duration (or earlier when the next GOP would take it more
 * than half a second past it), or, in a GOP longer than the target, before the frame that would take it past the
 * target. All times are ms on the stream's timeline; `dts` is the driver unit that just arrived.
 */

/** at a start point: the segment being made (started at `startDts`) ends before it */
export function segmentDue(dts: number, startDts: number, lastStartPointDts: number, targetDurationSec: number): boolean {
  const target = targetDurationSec * 1000;
  const dur = dts - startDts;
  const gop = dts - lastStartPointDts;
  return dur >= target - 1 || (dur > 0 && dur + gop > target + 500);
}

/**
 * EXT-X-TARGETDURATION must not change (RFC 8216 4.3.3.1), and players join at parts long before a GOP of unknown
 * length ends: a GOP longer than the target is cut at the target without a keyframe. Such a segment starts with a
 * part that is not INDEPENDENT; players start at one that is.
 */
export function pastTarget(dts: number, startDts: number, lastDriverDts: number, targetDurationSec: number): boolean {
  const dur = dts - startDts;
  // EXTINF rounded to the nearest second must not pass the target
  return dur > 0 && dur + (dts - lastDriverDts) > targetDurationSec * 1000 + 499;
}

export function partLongEnough(dts: number, partStartDts: number, partTargetSec: number): boolean {
  return dts - partStartDts >= 0.85 * partTargetSec * 1000;
}

export function partDue(dts: number, partStartDts: number, lastDriverDts: number, partTargetSec: number): boolean {
  const partDur = dts - partStartDts;
  const next = dts - lastDriverDts;
  return partDur + next > partTargetSec * 1000 + 0.5;
}

export function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
