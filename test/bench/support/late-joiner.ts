/**
 * A player that joins a stream mid-GOP during the warm-up and leaves soon after, as players come and go in service.
 * It is what makes the bus's late-joiner paths run (the GOP cache's Entries made again, the format's catch-up): paths
 * that ran in service every few seconds but in a bench whose players all connect at the start only by chance, when a
 * player's open lost the race with its terminal's first keyframe. One join changed what V8 did with the bus's hot
 * path for the rest of a run before core/bus/entry.ts's newEntry (test/bench/README.md), so a bench without it
 * measured a gateway no one runs.
 */
import * as http from 'node:http';

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
