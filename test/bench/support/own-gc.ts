/**
 * This process's own garbage collection while a window runs. The load generator's collector stops its loop like any
 * other work, and what it allocates per read and per frame decides how often: a generator that made a Buffer a read
 * and a frame did a mark-compact every 200-500 ms at 450 terminals, and its late loop showed up as end-to-end latency.
 */
import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

export interface OwnGc {
  /** mark-compacts (full collections) */
  majors: number;
  /** every collection's pause, ms */
  pauseMs: number;
  /** the longest pause, ms */
  maxPauseMs: number;
}

type GcEntry = PerformanceEntry & { detail?: { kind?: number } };

/** Starts counting; the function returned stops and gives the figures. */
export function watchOwnGc(): () => OwnGc {
  const gc: OwnGc = { majors: 0, pauseMs: 0, maxPauseMs: 0 };
  const count = (entries: GcEntry[]): void => {
    for (const e of entries) {
      if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.majors++;
      gc.pauseMs += e.duration;
      if (e.duration > gc.maxPauseMs) gc.maxPauseMs = e.duration;
    }
  };
  const obs = new PerformanceObserver((list) => count(list.getEntries()));
  obs.observe({ entryTypes: ['gc'] });
  return () => {
    // entries not yet handed to the callback
    count(obs.takeRecords());
    obs.disconnect();
    return gc;
  };
}
