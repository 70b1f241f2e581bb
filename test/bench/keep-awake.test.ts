import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import { keepAwake } from './support/keep-awake';

/** times this process's main thread has blocked (slept in epoll_wait, a futex...) so far */
function sleeps(): number {
  const m = /voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  if (!m) throw new Error('no voluntary_ctxt_switches in /proc/self/status');
  return Number(m[1]);
}

/** a 1 ms timer for `ms`: without anything else to do, the event loop sleeps between its fires */
async function sleepsDuring(ms: number): Promise<number> {
  const before = sleeps();
  await new Promise<void>((resolve) => {
    const t = setInterval(() => undefined, 1);
    setTimeout(() => {
      clearInterval(t);
      resolve();
    }, ms);
  });
  return sleeps() - before;
}

describe('bench keepAwake: the load generator never sleeps, so no write to its players has to wake it', () => {
  it('the event loop stops blocking while it runs, and blocks again once stopped', async () => {
    const idle = await sleepsDuring(300);
    const stop = keepAwake();
    let awake: number;
    try {
      awake = await sleepsDuring(300);
    } finally {
      stop();
    }
    const after = await sleepsDuring(300);
    assert.ok(idle >= 50, `a 1 ms timer alone lets the loop sleep between fires (${idle} sleeps in 300 ms)`);
    assert.ok(awake < idle / 5, `spinning: ${awake} sleeps against ${idle} without`);
    assert.ok(after >= 50, `stopped: the loop sleeps again (${after} sleeps)`);
  });
});
