/**
 * Preloaded into the gateway by benchmarks (`node --require .../name-threads.js`): names each worker thread
 * `jsworker-<threadId>` in /proc, so the bench can read that thread's CPU time from outside. Node 20 calls every
 * thread of a process 'node', and --require runs in worker threads too, before their own script. It changes
 * nothing else: no hooks, no timers, no output.
 */
import * as fs from 'node:fs';
import { isMainThread, threadId } from 'node:worker_threads';

export const WORKER_THREAD_PREFIX = 'jsworker-';

if (!isMainThread) {
  try {
    // comm holds at most 15 bytes: the prefix and up to 6 digits
    fs.writeFileSync('/proc/thread-self/comm', `${WORKER_THREAD_PREFIX}${threadId}`.slice(0, 15));
  } catch {
    // not Linux, or /proc not writable: the bench then says it cannot tell the worker apart
  }
}
