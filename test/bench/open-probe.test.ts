import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { OpenProbe, PROBE_NICE } from './support/open-probe';

/** scheduling policy (0: SCHED_OTHER) and nice of a thread, from /proc */
function schedOf(pid: number, tid: number): { policy: number; nice: number } {
  const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
  // fields after the command's closing parenthesis: state is field 3, so field n is at index n - 3
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { policy: Number(f[41 - 3]), nice: Number(f[19 - 3]) };
}

describe('bench open-latency probe', function () {
  this.timeout(20_000);

  it('runs ahead of the load generator that shares its core: SCHED_OTHER at nice -10, not real-time', async () => {
    const probe = new OpenProbe();
    try {
      assert.ok(probe.niced, 'setpriority failed: the bench needs root or CAP_SYS_NICE');
      // SCHED_FIFO starves a spinning generator when node's own threads wake the probe's loop without end (tried)
      assert.deepEqual(schedOf(probe.pid!, probe.pid!), { policy: 0, nice: PROBE_NICE });
    } finally {
      await probe.close();
    }
  });
});
