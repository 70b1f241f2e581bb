/**
 * Issue 16, every core: a primary killed with SIGKILL while nothing reads the gateway's output any more (a log
 * shipper killed with it, a closed terminal) must not leave its workers behind. Each worker stops when its link to
 * the primary goes, and its logger flushes at exit; sonic-boom 4.2's synchronous flush retried a broken pipe (EPIPE)
 * for ever, so workers hung at exit holding their memory and any UDP port they shared (rtsp-out's RTP and RTCP),
 * which a restarted gateway could then not bind. package.json pins sonic-boom 5.0.2, where the flush gives up on
 * errors it cannot retry.
 */
import assert from 'node:assert/strict';
import { startClusterGateway, workerPids } from '../support/cluster-gateway';
import { waitFor } from '../e2e/helpers';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('workers of a primary killed with SIGKILL (real process)', function () {
  this.timeout(60_000);

  it('exit even when nothing reads their output any more', async () => {
    const gw = await startClusterGateway('cluster-orphans', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'rtsp-out', config: { port: 0, rtpPort: 0, rtcpPort: 0 } },
    ]);
    const pids = [...workerPids(gw.child.pid!).values()];
    try {
      assert.equal(pids.length, 2);
      // the reader of stdout and stderr goes first: the workers' next writes get EPIPE
      gw.child.stdout!.destroy();
      gw.child.stderr!.destroy();
      gw.child.kill('SIGKILL');
      // a worker stops within its 10 s stop limit; before the fix they were still there hours later
      await waitFor('both workers gone', () => pids.every((p) => !alive(p)), 30_000, 100);
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
      gw.stop();
    }
  });
});
