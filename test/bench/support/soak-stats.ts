/**
 * The soak's figures of growth and its verdict. Pure functions, unit-tested in soak-support.test.ts.
 *
 * Memory of a garbage-collected process under a steady load is a saw-tooth on a plateau reached after a warm-up,
 * so growth is judged on samples after the warm-up only, two ways that must both agree before a leak is called:
 * the least-squares slope (extrapolated per hour) and the rise from the first to the last quarter of those samples
 * (medians, so one GC peak or trough does not decide). A short run can only bound a leak: its slope is noisy, which
 * is why the verdict also needs the rise to exceed an absolute floor.
 */

export interface Point {
  /** seconds since the soak started */
  t: number;
  v: number;
}

export function slope(points: Point[]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((a, p) => a + p.t, 0) / n;
  const my = points.reduce((a, p) => a + p.v, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const p of points) {
    sxy += (p.t - mx) * (p.v - my);
    sxx += (p.t - mx) ** 2;
  }
  return sxx > 0 ? sxy / sxx : NaN;
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export interface Growth {
  /** samples used (after the warm-up) */
  samples: number;
  /** least-squares slope, per hour */
  perHour: number;
  /** median of the last quarter minus median of the first quarter */
  rise: number;
  first: number;
  last: number;
}

/** Growth of `points` from `fromT` on (seconds). */
export function growth(points: Point[], fromT: number): Growth {
  const use = points.filter((p) => p.t >= fromT);
  const q = Math.max(1, Math.floor(use.length / 4));
  const first = median(use.slice(0, q).map((p) => p.v));
  const last = median(use.slice(-q).map((p) => p.v));
  return { samples: use.length, perHour: slope(use) * 3600, rise: last - first, first, last };
}

export interface VerdictLimits {
  /** RSS slope past which (with the rise below) memory is said to leak, MB per hour */
  rssMBPerHour: number;
  /** and the rise (last quarter over first quarter) it must also show, MB */
  rssMinRiseMB: number;
  /** descriptors the idle gateway may hold at the end over its idle count before the load */
  fdSlack: number;
}

export interface VerdictInput {
  rss: Growth;
  /** descriptors idle before the load and idle after it (everything closed) */
  fdIdleStart: number;
  fdIdleEnd: number;
  /** the gateway's unexplained descriptors (its count minus the soak's connections to it) over the run */
  fdOther: Growth;
  /** requests the gateway listed that their client had closed or never opened */
  leakedRequests: number;
  /** requests and streams the gateway still held after every client closed all of its own */
  requestsLeft: number;
  streamsLeft: number;
  /** the ingest's links and flv-out's players left after every terminal and player went */
  linksLeft: number;
  playersLeft: number;
  lostFinals: number;
  lostReady: number;
  duplicates: number;
  orderViolations: number;
  /** notices the notifier gave up or dropped (its own counters) */
  notifierFailed: number;
  notifierDropped: number;
  unexpectedCauses: number;
}

export interface Verdict {
  ok: boolean;
  /** what failed: each a leak or a lost/garbled notice */
  failures: string[];
  /** suspicious but not a failure by the rules */
  warnings: string[];
}

export function verdict(v: VerdictInput, l: VerdictLimits): Verdict {
  const failures: string[] = [];
  const warnings: string[] = [];
  const rssLeak = v.rss.samples >= 4 && v.rss.perHour > l.rssMBPerHour && v.rss.rise > l.rssMinRiseMB;
  if (rssLeak)
    failures.push(
      `RSS grows ${v.rss.perHour.toFixed(1)} MB/h (rose ${v.rss.rise.toFixed(1)} MB after the warm-up; limits ${l.rssMBPerHour} MB/h and ${l.rssMinRiseMB} MB)`,
    );
  else if (v.rss.samples >= 4 && v.rss.perHour > l.rssMBPerHour)
    warnings.push(`RSS slope ${v.rss.perHour.toFixed(1)} MB/h but it rose only ${v.rss.rise.toFixed(1)} MB (a saw-tooth, not judged a leak)`);
  const fdGrowth = v.fdIdleEnd - v.fdIdleStart;
  if (fdGrowth > l.fdSlack) failures.push(`descriptors: ${v.fdIdleEnd} idle at the end vs ${v.fdIdleStart} before the load (+${fdGrowth}, slack ${l.fdSlack})`);
  if (v.leakedRequests > 0) failures.push(`${v.leakedRequests} request(s) listed by the gateway after their client closed them (or never opened them)`);
  if (v.requestsLeft > 0 || v.streamsLeft > 0) failures.push(`${v.requestsLeft} request(s) and ${v.streamsLeft} stream(s) left after everything was closed`);
  if (v.linksLeft > 0 || v.playersLeft > 0)
    failures.push(`${v.linksLeft} terminal link(s) and ${v.playersLeft} player(s) still counted after all disconnected`);
  if (v.lostFinals > 0) failures.push(`${v.lostFinals} closed/failed notice(s) never received`);
  if (v.lostReady > 0) failures.push(`${v.lostReady} ready notice(s) never received`);
  if (v.duplicates > 0) failures.push(`${v.duplicates} duplicate notice(s)`);
  if (v.orderViolations > 0) failures.push(`${v.orderViolations} notice(s) out of order or not due`);
  if (v.notifierFailed > 0 || v.notifierDropped > 0) warnings.push(`the notifier counted ${v.notifierFailed} given up and ${v.notifierDropped} dropped`);
  if (v.unexpectedCauses > 0) warnings.push(`${v.unexpectedCauses} request(s) closed with a cause the soak did not provoke (see above)`);
  if (v.fdOther.samples >= 4 && v.fdOther.rise > l.fdSlack)
    warnings.push(`the gateway's descriptors beyond the soak's connections rose by ${v.fdOther.rise.toFixed(0)} during the load`);
  return { ok: failures.length === 0, failures, warnings };
}
