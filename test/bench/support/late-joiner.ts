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
