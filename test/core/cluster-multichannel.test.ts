/**
 * A terminal that sends several channels over one TCP link (they exist in the field), against a gateway with two
 * workers (real process). The primary hands the link to the worker of the channel of its first packet; the packets
 * of the other channels find their streams only if those are in the same worker. They are since a channel key shards
 * by its SIM alone (core/cluster/shard.ts); before, FNV over the whole key `{sim}_{chan}` spread one terminal's
 * channels over the workers, and the other channels' packets were dropped. The SIM here is one whose channels 1 and 2
 * the old hash put in different workers (computed below), so this test fails under the old rule.
 *
 * The packets are a real capture's (glaciall, H.264 CIF), re-packed for each channel and interleaved packet by packet
 * on the one link, channel 1 first.
 */
import assert from 'node:assert/strict';
import { channelKey } from '../../plugin-sdk/cluster';
import { shardOf } from '../../core/cluster/shard';
import type { Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { api, startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';
import { HttpFlvPlayer, TcpTerminal, capture, encodeOne, loopedPackets, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';
const WORKERS = 2;
const CHANNELS = [1, 2, 3];

/** the shard before channel keys counted by their SIM: FNV-1a over the whole key */
function oldShardOf(key: string, workers: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % workers;
}

/**
 * A SIM from `first` up whose channels 1 and 2 the old hash put in different workers. (With two workers that is every
 * SIM: the shard was the hash's low bit, which is the low bit of the key's last character, '1' and '2' differing in
 * it; channel 3 went with channel 1. Searched all the same, so the test says what it relies on.)
 */
function simSplitByOldHash(first: number): string {
  for (let i = 0; i < 1000; i++) {
    const sim = String(first + i);
    if (oldShardOf(channelKey(sim, 1), WORKERS) !== oldShardOf(channelKey(sim, 2), WORKERS)) return sim;
  }
  throw new Error('no SIM whose channels the old hash split');
}

/** the capture's packets for every channel, interleaved packet by packet (channel 1's first), until `stop()` says so */
function* interleaved(packets: Iterable<Jt1078Packet>, sim: string, stop: () => boolean): Generator<Buffer> {
  for (const p of packets) {
    if (stop()) return;
    for (const channel of CHANNELS) yield encodeOne(p, { sim, channel });
  }
}

describe('one TCP link carrying channels 1, 2 and 3 of a terminal, two workers (real process)', function () {
  this.timeout(90_000);
  let gw: ClusterGateway;
  const players: HttpFlvPlayer[] = [];
  let terminal: TcpTerminal | undefined;

  before(async () => {
    gw = await startClusterGateway('cluster-multichannel', { workers: WORKERS }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
    ]);
  });

  after(() => {
    for (const p of players) p.close();
    terminal?.socket.destroy();
    gw?.stop();
  });

  it('plays every channel the link carries, though the old full-key hash would have split them over the workers', async () => {
    const sim = simSplitByOldHash(13800138000);
    // the point of the SIM: the old hash split its channels (the link, routed by channel 1, would have reached
    // channel 2's stream in the other worker); the SIM rule keeps them together
    assert.notEqual(oldShardOf(channelKey(sim, 1), WORKERS), oldShardOf(channelKey(sim, 2), WORKERS));
    const owner = shardOf(channelKey(sim, 1), WORKERS);
    for (const chan of CHANNELS) assert.equal(shardOf(channelKey(sim, chan), WORKERS), owner, `channel ${chan}`);

    const opened = [];
    for (const chanId of CHANNELS) {
      const r = await api(gw.ports['gateway.httpPort'], 'POST', '/strm/open', {
        user: { token: 'tk' },
        typ: 'live',
        simNo: sim,
        chanId,
        scheme: 'http',
        reqId: `multichan-${chanId}`,
      });
      assert.equal(r.json?.errCode, 0, r.text);
      opened.push(r.json.data[0] as { port: number; playUrl: string });
    }
    const port = gw.ports['jt1078-ingest.livePort2013'];
    for (const o of opened) assert.equal(o.port, port, 'every channel is pushed to the live 2013 port');

    // one link, all three channels: a few passes in the background keep the streams live while the players join
    terminal = await TcpTerminal.connect(port);
    let done = false;
    const sending = terminal
      .send(
        interleaved(loopedPackets(capture(CAPTURE), 5), sim, () => done),
        48,
        20,
      )
      .catch(() => undefined);

    for (const o of opened) players.push(await HttpFlvPlayer.connect(o.playUrl, { keep: false }));
    for (const p of players) assert.equal(p.status, 200);
    await waitFor("a video keyframe on every channel's player", () => players.every((p) => p.counter!.keyframes >= 1), 30_000, 50).catch((err: Error) => {
      const got = players.map((p, i) => `channel ${CHANNELS[i]}: ${p.counter!.keyframes} keyframes, ${p.counter!.videoFrames} frames`);
      throw new Error(`${err.message} (${got.join('; ')})`);
    });
    for (const [i, p] of players.entries()) assert.ok(p.counter!.videoFrames >= 1, `channel ${CHANNELS[i]}: ${p.counter!.videoFrames} video frames`);

    // every request is ready and was fed, in the one worker that holds them all
    const status = await api(gw.ports['gateway.httpPort'], 'GET', '/strm/status');
    const mine = (status.json.data as Array<{ reqId: string; ready: boolean; bytesIn: number }>).filter((r) => r.reqId.startsWith('multichan-'));
    assert.deepEqual(mine.map((r) => r.reqId).sort(), ['multichan-1', 'multichan-2', 'multichan-3']);
    for (const r of mine) assert.ok(r.ready && r.bytesIn > 0, JSON.stringify(r));
    const opens = await waitFor(
      'the request log lines',
      () => {
        const lines = gw.lines<{ reqId: string; worker: number }>('"request opened"').filter((l) => l.reqId.startsWith('multichan-'));
        return lines.length === CHANNELS.length ? lines : undefined;
      },
      10_000,
      20,
    );
    for (const l of opens) assert.equal(l.worker, owner, `${l.reqId} opened in worker ${l.worker}`);

    done = true;
    await sending;
    await terminal.end();
  });
});
