/**
 * Late frames grouped into episodes, to tell where an end-to-end tail comes from.
 *
 * Why: at 500 terminals in a slow spell the p99 swung from 5 to 97 ms between runs of one build (2026-11-30). The
 * frames over 20 ms did not spread over the window: they came in bursts of 50-400 ms in which every player was late
 * by about the same amount, while neither process's 10 ms loop timer was late by as much. A stall every stream shares
 * is a process or the machine (loopback, the scheduler), not one stream's path through the gateway; the floor, with
 * no gateway code at all, showed the same bursts (24-38 ms). So the report names the episodes and how many players
 * each reached, and a figure that comes from one such burst is not taken for the gateway's steady state.
 */

/** frames recorded at most (a window's worth in a stall of every stream: 1,000 players x 25 frames/s x 4 s) */
const MAX_LATE = 100_000;
/** late frames further apart than this are separate episodes */
const EPISODE_GAP_MS = 100;
/** an episode that reached this share of the players is a stall they all shared */
const WIDE_SHARE = 0.9;

export interface LateEpisode {
  /** ms into the window */
  startMs: number;
  durationMs: number;
  /** the latest frame's latency, ms */
  worstMs: number;
  frames: number;
  /** distinct players with a late frame in it */
  players: number;
}

export interface LateFigures {
  thresholdMs: number;
  /** late frames seen (recorded or not) */
  frames: number;
  episodes: number;
  /** episodes that reached WIDE_SHARE of the players */
  wide: number;
  /** late frames in wide episodes */
  framesInWide: number;
  /** the episode with the latest frame */
  worst?: LateEpisode;
  /** every episode that reached WIDE_SHARE of the players, in time order */
  wideList: LateEpisode[];
  players: number;
  /** ms from the gateway's spawn to the window's start (gateway.startedAt given to figures), to match its V8 log */
  windowAtMs?: number;
}

export class LateEpisodes {
  private readonly at = new Float64Array(MAX_LATE);
  private readonly ms = new Float64Array(MAX_LATE);
  private readonly who = new Int32Array(MAX_LATE);
  private n = 0;
  private seen = 0;
  private t0 = 0;

  constructor(
    readonly thresholdMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** starts the window */
  reset(): void {
    this.n = 0;
    this.seen = 0;
    this.t0 = this.now();
  }

  add(latencyMs: number, player: number): void {
    if (latencyMs < this.thresholdMs) return;
    this.seen++;
    if (this.n === MAX_LATE) return;
    this.at[this.n] = this.now() - this.t0;
    this.ms[this.n] = latencyMs;
    this.who[this.n++] = player;
  }

  /** a player's latency sink: every figure to `all` (the reservoir of every frame), late ones here too */
  sink(all: { add(ms: number): void }, player: number): (latencyMs: number) => void {
    return (ms) => {
      all.add(ms);
      this.add(ms, player);
    };
  }

  /** `spawnedAt`: performance.now() when the measured process started, for windowAtMs */
  figures(players: number, spawnedAt?: number): LateFigures {
    const windowAtMs = spawnedAt === undefined ? undefined : this.t0 - spawnedAt;
    const out: LateFigures = { thresholdMs: this.thresholdMs, frames: this.seen, episodes: 0, wide: 0, framesInWide: 0, wideList: [], players, windowAtMs };
    let i = 0;
    while (i < this.n) {
      // frames arrive in time order: an episode runs until a gap
      const start = i;
      const who = new Set<number>();
      let worst = 0;
      do {
        who.add(this.who[i]);
        if (this.ms[i] > worst) worst = this.ms[i];
        i++;
      } while (i < this.n && this.at[i] - this.at[i - 1] <= EPISODE_GAP_MS);
      const ep: LateEpisode = {
        startMs: this.at[start],
        durationMs: this.at[i - 1] - this.at[start],
        worstMs: worst,
        frames: i - start,
        players: who.size,
      };
      out.episodes++;
      if (ep.players >= WIDE_SHARE * players) {
        out.wide++;
        out.framesInWide += ep.frames;
        out.wideList.push(ep);
      }
      if (out.worst === undefined || ep.worstMs > out.worst.worstMs) out.worst = ep;
    }
    return out;
  }
}

/** One line for the report, or undefined when no frame was late. */
export function lateEpisodesLine(f: LateFigures): string | undefined {
  if (f.frames === 0) return undefined;
  const w = f.worst;
  const worst = w
    ? `; the worst at ${(w.startMs / 1000).toFixed(1)} s, ${Math.round(w.durationMs)} ms long, up to ${w.worstMs.toFixed(0)} ms, reaching ${w.players} of ${f.players} players`
    : '';
  const share = Math.round((100 * f.framesInWide) / f.frames);
  return (
    `  late frames (${f.thresholdMs} ms or more): ${f.frames} in ${f.episodes} episode(s)${worst}; ` +
    `${share} % of them in ${f.wide} episode(s) reaching ${Math.round(WIDE_SHARE * 100)} % of the players at once ` +
    `(a stall every stream shared: a process or the machine, which the floor shows too; see the bench README)`
  );
}

/**
 * One line per wide episode (--episodes), with its time since the gateway started as well: V8's --log-deopt and
 * --trace-gc count from there, so an episode can be matched with a collection or a wave of deoptimisations.
 */
export function wideEpisodeLines(f: LateFigures): string[] {
  return f.wideList.map((e) => {
    const since = f.windowAtMs === undefined ? '' : ` (gateway +${((f.windowAtMs + e.startMs) / 1000).toFixed(1)} s)`;
    return `    wide episode at ${(e.startMs / 1000).toFixed(1)} s${since}: ${Math.round(e.durationMs)} ms long, up to ${e.worstMs.toFixed(0)} ms, ${e.frames} late frames over ${e.players} players`;
  });
}

/** Short form for a round's line: "2 episodes, widest 500 players, worst 42 ms" */
export function lateEpisodesShort(f: LateFigures): string {
  if (f.frames === 0) return 'no late frames';
  return `${f.episodes} late episode(s), worst ${f.worst!.worstMs.toFixed(0)} ms over ${f.worst!.players} players`;
}
