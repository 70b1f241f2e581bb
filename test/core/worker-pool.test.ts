/**
 * The primary's worker pool with real worker processes. A message written to a worker that died a moment ago, before
 * the primary has seen its exit, fails with EPIPE; that must reach the pool as a failed send and leave the primary
 * (this process here) standing, and the dead worker must be started again.
 */
import assert from 'node:assert/strict';
import cluster from 'node:cluster';
import * as fs from 'node:fs';
import * as path from 'node:path';
import pino from 'pino';
import { WorkerPool } from '../../core/cluster/worker-pool';
import { waitFor } from '../e2e/helpers';

/** until the process is a zombie (it has exited and its end of the channel is closed), without yielding */
function spinUntilDead(pid: number): void {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    try {
      // the leader shows Z as soon as it has exited, while the process's other threads (V8's, libuv's) may still be
      // on their way out with the shared descriptor table, so the IPC socket would still take writes: wait for them
      if (/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'latin1')) && fs.readdirSync(`/proc/${pid}/task`).length <= 1) return;
    } catch {
      return;
    }
  }
  throw new Error(`worker ${pid} still running 5 s after SIGKILL`);
}

describe('worker pool (real worker processes)', function () {
  this.timeout(30_000);

  it('a write to a worker that has just died is a failed send, not a crash; the worker starts again', async () => {
    const lines: Array<{ msg: string; worker?: number; err?: string }> = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l) as (typeof lines)[0]) });
    const before = { ...cluster.settings };
    cluster.setupPrimary({ exec: path.join(__dirname, '../support/pool-worker.js'), silent: true });
    const pool: WorkerPool = new WorkerPool({
      workers: 1,
      log,
      env: {},
      message: (slot, _w, m) => {
        if (m.t === 'ready') {
          slot.ready = true;
          pool.readied(slot);
        }
      },
      gone: () => undefined,
      orphan: () => undefined,
    });
    try {
      await pool.start();
      const first = pool.slots[0].worker!;
      const pid = first.process.pid!;
      first.process.kill('SIGKILL');
      spinUntilDead(pid);
      // the exit is not seen yet (this tick has not ended): the channel still looks connected
      assert.equal(first.isConnected(), true);
      const failures: Array<Error | null> = [];
      for (let i = 0; i < 20; i++) pool.send(first, { t: 'stop' } as never, undefined, (err) => failures.push(err));
      await waitFor('the failed writes reported', () => failures.length === 20, 5000);
      assert.ok(
        failures.some((e) => e && /EPIPE|ECONNRESET|channel closed/i.test(e.message)),
        failures.map((e) => e?.message).join(', '),
      );
      const again = await waitFor('the worker started again', () => (pool.up(0) && pool.slots[0].worker !== first ? pool.slots[0].worker : undefined), 10_000);
      assert.notEqual(again.process.pid, pid);
      assert.ok(lines.some((l) => l.msg.startsWith('worker died')));
    } finally {
      pool.beginStop();
      for (const s of pool.slots) s.worker?.process.kill('SIGKILL');
      cluster.setupPrimary(before);
    }
  });
});
