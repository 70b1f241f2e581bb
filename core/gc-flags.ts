/**
 * How the gateway's processes collect garbage.
 *
 * V8 by default marks and scavenges with helper threads. Our processes keep every core busy (one worker per core,
 * `workers`), so those threads do not find idle cores: they take the core from an event loop for whole scheduler
 * slices, in the middle of its reads and writes, and a frame waits for them. With `--single-threaded-gc` the same
 * work is done on the process's own thread, in the small incremental steps V8 interleaves with JavaScript.
 * Measured (test/bench/README.md, 500 terminals x 1 Mbit/s, one pinned core, alternated, 2 rounds): end-to-end p99
 * 47.6 / 47.8 -> 14.5 / 17.8 ms, event-loop delay p99 33-35 -> 18-19 ms, CPU 56.6 / 56.7 -> 57.2 / 55.4 %.
 * A machine with more cores than workers may do better with the helpers: `gateway.gcHelperThreads: true`.
 *
 * The flag can only be given when a process starts (V8 aborts if it is set at run time, and NODE_OPTIONS refuses
 * it): workers get it from the primary; a single process from its command line (`npm start` passes it).
 */
import * as v8 from 'node:v8';

export const SINGLE_THREADED_GC = '--single-threaded-gc';
/** the young generation's semi-space, MB (gateway.gcSemiSpaceMB): also read only when a process starts */
export const SEMI_SPACE = '--max-semi-space-size';

/** node options for a gateway process (worker or single); semiSpaceMB 0 leaves V8's own */
export function gcNodeFlags(helperThreads: boolean, semiSpaceMB: number): string[] {
  const flags = helperThreads ? [] : [SINGLE_THREADED_GC];
  if (semiSpaceMB > 0) flags.push(`${SEMI_SPACE}=${semiSpaceMB}`);
  return flags;
}

/** the semi-space size (MB) this process was started with, 0 when it was not given */
export function startedSemiSpaceMB(execArgv: readonly string[] = process.execArgv): number {
  let mb = 0;
  for (const a of execArgv) {
    // (node passes V8 flags only as --flag=value; V8 also takes the underscore spelling; the last one given wins)
    const eq = a.indexOf('=');
    if (eq < 0 || a.slice(0, eq).replace(/_/g, '-') !== SEMI_SPACE) continue;
    const v = Number(a.slice(eq + 1));
    mb = Number.isFinite(v) ? v : 0;
  }
  return mb;
}

/** whether this process was started with the collector on its own thread */
export function singleThreadedGc(execArgv: readonly string[] = process.execArgv): boolean {
  return execArgv.includes(SINGLE_THREADED_GC);
}

/**
 * Turns V8's allocation-site pretenuring off (gateway.gcPretenuring), at run time: V8 reads the flag at each
 * scavenge's feedback and each compilation, so literals compiled after this never get allocated in the old
 * generation on a survival guess (test/core/gc-flags.test.ts checks that it takes effect so).
 */
export function turnOffPretenuring(): void {
  v8.setFlagsFromString('--no-allocation-site-pretenuring');
}

/**
 * The old generation's growth factor (gateway.gcHeapGrowthPercent), set at run time: unlike --single-threaded-gc,
 * V8 reads this one at every limit it computes, and a process may set it after it started (test/core/gc-flags.test.ts
 * checks that it still takes effect). 0 leaves V8's own.
 */
export function setHeapGrowth(percent: number): void {
  if (!Number.isInteger(percent) || percent < 0) throw new RangeError(`heap growth percent ${percent}: a whole number >= 0 needed`);
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
