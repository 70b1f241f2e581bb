/**
 * Several workers: what is left when a process dies. Connections that arrive while a worker dies get an answer or a
 * reset, never a hang: Node closes the primary's copy of a handed-over socket only when the worker acknowledges it,
 * so unless the primary ends them, the one in flight and those queued behind it stay open in the primary with nobody
 * reading them (a client would wait for its own timeout).
 *
 * And a primary killed with SIGKILL while nothing reads the gateway's output any more (a log
 * shipper killed with it, a closed terminal) must not leave its workers behind. Each worker stops when its link to
 * the primary goes, and its logger flushes at exit; sonic-boom 4.2's synchronous flush retries a broken pipe (EPIPE)
 * for ever, so with it workers would hang at exit holding their memory and any UDP port they shared (rtsp-out's RTP
 * and RTCP), which a restarted gateway could then not bind. package.json pins sonic-boom 5.0.2, where the flush gives up on
 * errors it cannot retry.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
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

/** GET /healthz on a new connection: the status, 'reset' for a connection closed on it, or 'hung' after 5 s */
function probe(port: number): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    req.on('timeout', () => {
      resolve('hung');
      req.destroy();
    });
    req.on('error', () => resolve('reset'));
  });
}

describe('processes of a two-worker gateway that die (real process)', function () {
  this.timeout(120_000);

  it('connections that arrive while a worker dies are answered or reset, never left hanging', async () => {
    const gw = await startClusterGateway('cluster-dying', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
    ]);
    try {
      const outcomes: string[] = [];
      const startedLines = () => gw.lines('"msg":"gateway started"').length;
      for (let round = 0; round < 4; round++) {
        const pids = await waitFor(
          'both workers up',
          () => {
            const p = workerPids(gw.child.pid!);
            return p.size === 2 && startedLines() >= 2 + round ? p : undefined;
          },
          30_000,
          50,
        ).catch((e: Error) => {
          const said = gw
            .log()
            .split('\n')
            .map((l) => l.slice(0, 400));
          throw new Error(
            `${e.message} (round ${round}, workers ${JSON.stringify([...workerPids(gw.child.pid!)])}); the gateway said:\n${said.slice(-30).join('\n')}`,
          );
        });
        process.kill(pids.get(round % 2)!, 'SIGKILL');
        // at once, before the primary has seen the exit: some of these go to the dying worker
        outcomes.push(...(await Promise.all(Array.from({ length: 6 }, () => probe(gw.ports['gateway.httpPort'])))));
      }
      assert.equal(outcomes.filter((o) => o === 'hung').length, 0, outcomes.join(' '));
      assert.ok(outcomes.filter((o) => o === '200').length >= outcomes.length / 2, outcomes.join(' '));
    } finally {
      gw.stop();
    }
  });

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
      // a worker stops within its 10 s stop limit; with a flush that retries EPIPE for ever it would still be there hours later
      await waitFor('both workers gone', () => pids.every((p) => !alive(p)), 30_000, 100);
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
      gw.stop();
    }
  });
});
