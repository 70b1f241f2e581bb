/**
 * Inside a node, ownership is claimed, not hashed. With two workers, terminals that hash to one worker are
 * placed on the worker with the fewest (so a node fills evenly whatever its SIMs); a terminal whose link arrives before
 * any open is placed by its link, and the opens of its channels then go where its link is; the primary says who owns
 * what only from what its workers serve.
 */
import assert from 'node:assert/strict';
import { channelKey } from '../../plugin-sdk/cluster';
import { shardOf } from '../../core/cluster/shard';
import { startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';
import { HttpFlvPlayer, TcpTerminal, capture, encodeLazily, loopedPackets, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';

/** SIMs from `first` up whose terminal hashes to worker `w` of 2 */
function simsHashingTo(w: number, n: number, first: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (shardOf(channelKey(String(first + i), 1), 2) === w) out.push(String(first + i));
  return out;
}

describe("a node's workers claim their terminals (real process, two workers)", function () {
  this.timeout(90_000);
  let gw: ClusterGateway;
  const terminals: TcpTerminal[] = [];
  const players: HttpFlvPlayer[] = [];

  before(async () => {
    gw = await startClusterGateway('cluster-claims', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
    ]);
  });

  after(() => {
    for (const p of players) p.close();
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
  });

  const open = (sim: string, chanId = 1, over: Record<string, unknown> = {}) =>
    gw.api('POST', '/strm/open', { user: { token: 'tk' }, typ: 'live', simNo: sim, chanId, scheme: 'http', ...over });
  /** the worker whose log says it opened the request (its line may come a moment after the answer) */
  const workerOf = async (reqId: string): Promise<number> =>
    (
      await waitFor(
        `the log line of ${reqId}`,
        () => gw.lines<{ worker: number; reqId?: string }>('"msg":"request opened"').find((l) => l.reqId === reqId),
        5_000,
        20,
      )
    ).worker;

  async function plays(playUrl: string): Promise<void> {
    const p = await HttpFlvPlayer.connect(playUrl);
    players.push(p);
    assert.equal(p.status, 200);
    await waitFor('video frames', () => p.videoFrames() >= 20, 30_000, 50);
  }

  it('terminals that all hash to worker 0 are placed on the worker with the fewest, each where it plays', async () => {
    const sims = simsHashingTo(0, 4, 13500135000);
    const ids: string[] = [];
    for (const sim of sims) {
      const r = await open(sim);
      assert.equal(r.json.errCode, 0, r.text);
      ids.push(r.json.data[0].reqId);
    }
    const workers = await Promise.all(ids.map(workerOf));
    assert.deepEqual([...workers].sort(), [0, 0, 1, 1], `workers ${workers.join()}: by hash all four would be on worker 0`);
    // another channel of a terminal goes to its worker, whatever its load
    const ch2 = await open(sims[1], 2);
    assert.equal(await workerOf(ch2.json.data[0].reqId), workers[1]);
    // and the terminal of each plays there (its link is handed to the worker that claimed it)
    const t = await TcpTerminal.connect(gw.ports['jt1078-ingest.livePort2013']);
    terminals.push(t);
    void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 20), { sim: sims[1], channel: 1 }), 16, 20).catch(() => undefined);
    const st = await gw.api('GET', '/strm/status');
    const playUrl = (st.json.data as Array<{ reqId: string; playUrl: string }>).find((x) => x.reqId === ids[1])!.playUrl;
    await plays(playUrl);
    await gw.api('POST', '/strm/close', { reqIds: [...ids, ch2.json.data[0].reqId] });
  });

  it('a terminal whose link comes before any open is placed by its link; the open of its channel goes where the link is and plays', async () => {
    // worker 0 serves one terminal: the next one nobody owns goes to worker 1, though its SIM hashes to worker 0
    const [busy, sim] = simsHashingTo(0, 2, 13500136000);
    const b = await open(busy);
    assert.equal(await workerOf(b.json.data[0].reqId), 0);
    const t = await TcpTerminal.connect(gw.ports['jt1078-ingest.livePort2013']);
    terminals.push(t);
    void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 40), { sim, channel: 1 }), 16, 20).catch(() => undefined);
    // the link's packets reach its worker before the open (it counts them as nobody's)
    await waitFor(
      'the link counted',
      async () => {
        const m = await gw.api('GET', '/metrics');
        return /gw_jt1078_ingest_unmatched_packets_total\{[^}]*\} [1-9]/.test(m.text) || undefined;
      },
      10_000,
      100,
    );
    const r = await open(sim);
    assert.equal(r.json.errCode, 0, r.text);
    assert.equal(await workerOf(r.json.data[0].reqId), 1, 'the open went to the worker its link was placed on');
    await plays(r.json.data[0].playUrl);
    await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId, b.json.data[0].reqId] });
  });
});
