/**
 * A player that joins a stream mid-GOP during the warm-up and leaves soon after, as players come and go in service.
 * It is what makes the bus's late-joiner paths run (the GOP cache's Entries made again, the format's catch-up): paths
 * that run in service whenever a player joins, but in a bench whose players all connect at the start only by chance,
 * when a player's open lost the race with its terminal's first keyframe. One join changed what V8 did with the bus's hot
 * path for the rest of a run before core/bus/entry.ts's newEntry (test/bench/README.md), so a bench without it
 * measured a gateway no one runs.
 */
import * as http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/** how long the late player stays */
const LATE_JOIN_MS = 1000;

/**
 * The warm-up: `warmupMs` of load, with the late player joining `url` two seconds in (a third in, if shorter); says
 * what it read. No url (readers other than HTTP-FLV players): the warm-up alone.
 */
export async function warmUpWithLateJoin(url: string | undefined, warmupMs: number, signal: AbortSignal): Promise<void> {
  const joinAtMs = url === undefined ? warmupMs : Math.min(2000, warmupMs / 3);
  await sleep(joinAtMs, undefined, { signal });
  if (url === undefined) return;
  const got = await joinMidGop(url, LATE_JOIN_MS);
  const read = got > 0 ? `${(got / 1024).toFixed(1)} KiB` : 'NOTHING read (the late-joiner paths did not run)';
  console.log(`  a late player joined stream 1 mid-GOP in the warm-up and left after ${LATE_JOIN_MS / 1000} s: ${read}`);
  await sleep(Math.max(0, warmupMs - joinAtMs - LATE_JOIN_MS), undefined, { signal });
}

/** Reads `url` for `ms` and goes; resolves with the bytes it got (0: the gateway sent nothing, which the caller says). */
export function joinMidGop(url: string, ms: number): Promise<number> {
  return new Promise((resolve) => {
    let bytes = 0;
    const req = http.get(url, (res) => {
      res.on('data', (c: Buffer) => {
        bytes += c.length;
      });
    });
    const done = (): void => resolve(bytes);
    req.on('error', done);
    req.on('close', done);
    setTimeout(() => req.destroy(), ms).unref();
  });
}

/**
 * --churn: players that come and go all through a run, as they do in service. Every `everyMs` a player joins the next
 * stream mid-GOP and leaves after LATE_JOIN_MS. Why: a player's objects die after it leaves, and what the hot code
 * learnt from them can go with them at a full collection (V8 drops optimised code whose embedded objects died); one late
 * player in the warm-up shows that once, a churn shows whether it comes back.
 */
export class PlayerChurn {
  joins = 0;
  /** joins that read nothing */
  empty = 0;
  private next = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly urls: string[],
    readonly everyMs: number,
  ) {
    this.timer = setInterval(() => this.join(), everyMs);
  }

  private join(): void {
    const url = this.urls[this.next++ % this.urls.length];
    this.joins++;
    void joinMidGop(url, LATE_JOIN_MS).then((got) => {
      if (got === 0) this.empty++;
    });
  }

  /** stops the joins; the line for the report */
  stop(): string {
    clearInterval(this.timer);
    const nothing = this.empty > 0 ? `, ${this.empty} of them read NOTHING` : '';
    return `  churn: ${this.joins} players joined a stream mid-GOP and left after ${LATE_JOIN_MS / 1000} s, one every ${(this.everyMs / 1000).toFixed(1)} s${nothing}`;
  }
}
