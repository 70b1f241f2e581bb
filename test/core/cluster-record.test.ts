/**
 * The recorder on a gateway with two workers (the real process). Both workers write one SQLite catalog and one store;
 * each runs the recorder's maintenance pass (recovery of rows an unclean stop left unfinished, retention), which must
 * not take another worker's live recording for an orphan (else each worker would close the other's every pass). A worker killed with SIGKILL leaves its recording's row unfinished: it is
 * closed once its file has been quiet for orphanQuietSec, and the worker started in its place leaves the other
 * worker's live one alone. /strm/record lists both workers' recordings whichever worker answers.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openSqliteCatalog } from '../../plugins/recorder/src/catalog-sqlite';
import { CallbackReceiver, simsOfWorkers, startClusterGateway, workerPids, workerRestarted, type ClusterGateway } from '../support/cluster-gateway';
import { TcpTerminal, capture, encodeLazily, loopedPackets, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';

describe('the recorder on a gateway with two workers (real process)', function () {
  this.timeout(120_000);
  let gw: ClusterGateway;
  const cb = new CallbackReceiver();
  const terminals: TcpTerminal[] = [];
  const sims = simsOfWorkers(13400134000, 1, 2);
  const reqIds = sims.map((_, i) => `rec-worker-${i}`);

  before(async () => {
    await cb.start();
    gw = await startClusterGateway('cluster-record', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
      // a maintenance pass every second in each worker; a file quiet for 3 s is an orphan's
      { name: 'recorder', config: { timeZone: 'UTC', sizeUpdateSec: 1, retentionIntervalSec: 1, orphanQuietSec: 3 } },
      { name: 'callback-notifier', config: { allowLoopback: true } },
    ]);
  });

  after(() => {
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
    cb.stop();
  });

  async function rows(): Promise<Map<string, { state: string; sz: number }>> {
    const c = openSqliteCatalog({ dir: path.join(gw.dir, 'data', 'recorder') });
    try {
      const out = new Map<string, { state: string; sz: number }>();
      for (const id of reqIds) {
        const r = await c.getByReqId('A', id);
        if (r) out.set(id, { state: r.state, sz: r.sz });
      }
      return out;
    } finally {
      await c.close();
    }
  }

  it("a worker's maintenance pass leaves the other worker's live recording alone", async () => {
    for (const [i, sim] of sims.entries()) {
      const r = await gw.api('POST', '/strm/open', {
        user: { token: 'tk' },
        typ: 'live',
        simNo: sim,
        chanId: 1,
        keepIntv: 600,
        record: true,
        reqId: reqIds[i],
        cb: `http://127.0.0.1:${cb.port}`,
      });
      assert.equal(r.json.errCode, 0, r.text);
      assert.equal(r.json.data[0].recording, true);
      const t = await TcpTerminal.connect(r.json.data[0].port);
      terminals.push(t);
      void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 60), { sim, channel: 1 }), 16, 20).catch(() => undefined);
    }
    await waitFor(
      'both recordings catalogued and growing',
      async () => {
        const r = await rows();
        return reqIds.every((id) => (r.get(id)?.sz ?? 0) > 20_000);
      },
      30_000,
      200,
    );
    // several passes in each worker
    await new Promise((r) => setTimeout(r, 3500));
    const r = await rows();
    for (const id of reqIds)
      assert.equal(
        r.get(id)?.state,
        'recording',
        `${id}: ${JSON.stringify(r.get(id))}\n${gw
          .lines('closed a recording')
          .map((l) => JSON.stringify(l))
          .join('\n')}`,
      );
    assert.deepEqual(gw.lines('closed a recording left unfinished'), []);
    // a row another writer closed while the stream was quiet is marked live again by the recording's next size update
    const c = openSqliteCatalog({ dir: path.join(gw.dir, 'data', 'recorder') });
    await c.update(reqIds[0], { state: 'done', endTm: new Date() });
    await c.close();
    assert.equal((await rows()).get(reqIds[0])?.state, 'done');
    await waitFor('the row live again', async () => (await rows()).get(reqIds[0])?.state === 'recording', 5000, 100);
    // either worker lists both workers' recordings
    for (let i = 0; i < 4; i++) {
      // the last hour, in the recorder's time zone (UTC), up to now
      const since = new Date(Date.now() - 3600_000).toISOString().slice(0, 19).replace('T', ' ');
      const listed = await gw.api('GET', `/strm/record?startTm=${encodeURIComponent(since)}`);
      assert.equal(listed.json.errCode, 0, listed.text);
      const mine = (listed.json.data as Array<{ reqId: string }>)
        .map((x) => x.reqId)
        .filter((id) => reqIds.includes(id))
        .sort();
      assert.deepEqual(mine, reqIds);
    }
  });

  it("the worker started after a SIGKILL does not close the other worker's live recording", async () => {
    const before = workerPids(gw.child.pid!);
    process.kill(before.get(1)!, 'SIGKILL');
    await workerRestarted(gw.child.pid!, 1, before.get(1));
    await waitFor(
      'the new worker 1 up',
      () =>
        gw
          .log()
          .split('\n')
          .filter((l) => l.includes('"msg":"gateway started"')).length >= 3,
      30_000,
      100,
    );
    // the dead worker's row is an orphan: closed from its file once that has been quiet for orphanQuietSec
    const orphan = await waitFor(
      "the dead worker's recording closed",
      async () => {
        const x = (await rows()).get(reqIds[1]);
        return x?.state === 'done' ? x : undefined;
      },
      20_000,
      200,
    );
    const listedOrphan = (await gw.api('GET', `/strm/record?reqId=${reqIds[1]}`)).json.data[0] as { path: string };
    assert.equal(orphan.sz, fs.statSync(path.join(gw.dir, 'data', 'records', ...listedOrphan.path.split('/'))).size);
    const r = await rows();
    assert.equal(r.get(reqIds[0])?.state, 'recording', JSON.stringify(r.get(reqIds[0])));
    assert.deepEqual(
      gw.lines<{ reqId: string }>('closed a recording left unfinished').map((l) => l.reqId),
      [reqIds[1]],
    );
    const szBefore = r.get(reqIds[0])!.sz;
    await waitFor('worker 0 still recording', async () => ((await rows()).get(reqIds[0])?.sz ?? 0) > szBefore, 10_000, 200);
    // its own recording ends cleanly: done, with its file's size
    assert.equal((await gw.api('POST', '/strm/close', { reqIds: [reqIds[0]] })).json.data[0].closed, true);
    const done = await waitFor(
      'the closed recording done',
      async () => {
        const x = (await rows()).get(reqIds[0]);
        return x?.state === 'done' ? x : undefined;
      },
      10_000,
      100,
    );
    const listed = (await gw.api('GET', `/strm/record?reqId=${reqIds[0]}`)).json.data[0] as { path: string; sz: number };
    assert.equal(done.sz, fs.statSync(path.join(gw.dir, 'data', 'records', ...listed.path.split('/'))).size);
  });

  it('orphanQuietSec 0 with several workers stops boot, naming the key', async () => {
    await assert.rejects(
      startClusterGateway('cluster-record-0', { workers: 2 }, [
        { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
        { name: 'recorder', config: { orphanQuietSec: 0 } },
      ]),
      /orphanQuietSec: 0 with 2 workers would let each worker close the others' live recordings/,
    );
  });
});
