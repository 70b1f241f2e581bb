/**
 * A fleet node with two workers: its workers share the node's place in the directory (one heartbeat field each, one
 * epoch), an open asked of a single-process node lands on it and plays, and a worker killed with SIGKILL gives its
 * requests back to the fleet: their closed notices (closeCause 4, sent by the primary through a live worker) and their
 * request ids, free again across the fleet.
 */
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { CallbackReceiver, workerPids } from '../support/cluster-gateway';
import { startRedis, type RedisServer } from '../support/redis';
import { sharedPorts, startFleetNode, type FleetNode, type FleetPorts } from '../support/fleet-node';
import { HttpFlvPlayer, TcpTerminal, capture, encodeLazily, loopedPackets, waitFor } from './helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';
const HOSTS = ['127.0.0.5', '127.0.0.6'];

describe('a fleet node with two workers (real processes)', function () {
  this.timeout(120_000);
  let redis: RedisServer;
  let ports: FleetPorts;
  let one: FleetNode;
  let two: FleetNode;
  const cb = new CallbackReceiver();
  const terminals: TcpTerminal[] = [];
  const players: HttpFlvPlayer[] = [];
  const SIM = '13700137000';

  before(async () => {
    await cb.start();
    redis = await startRedis();
    ports = await sharedPorts(HOSTS);
    const plugins = [
      {
        name: 'jt1078-ingest',
        config: { livePort2013: ports.live2013, livePort2019: ports.live2019, replayPort2013: ports.replay2013, replayPort2019: ports.replay2019 },
      },
      { name: 'flv-out', config: { port: ports.flv } },
      { name: 'callback-notifier', config: { allowLoopback: true } },
    ];
    [one, two] = await Promise.all([
      startFleetNode({ nodeId: 'one', host: HOSTS[0], ports, directoryUrl: redis.url, plugins }),
      startFleetNode({ nodeId: 'two', host: HOSTS[1], ports, directoryUrl: redis.url, plugins, gateway: { workers: 2 } }),
    ]);
  });

  after(async () => {
    for (const p of players) p.close();
    for (const t of terminals) t.socket.destroy();
    await Promise.all([one?.stop().catch(() => undefined), two?.stop().catch(() => undefined)]);
    await redis?.stop();
    cb.stop();
  });

  const openOn = (n: FleetNode, chanId: number, over: Record<string, unknown> = {}) =>
    n.api('POST', '/strm/open', {
      user: { token: 'tk' },
      typ: 'live',
      simNo: SIM,
      chanId,
      scheme: 'http',
      keepIntv: 600,
      cb: `http://127.0.0.1:${cb.port}`,
      ...over,
    });

  it('its workers write one heartbeat field each under one epoch; an open asked of the other node lands on it and plays', async () => {
    const client = new Redis(redis.url);
    try {
      const fields = await waitFor(
        "both workers' heartbeat",
        async () => {
          const f = await client.hgetall('gw:node:two');
          return Object.keys(f).length === 2 ? f : undefined;
        },
        10_000,
        100,
      );
      const epochs = new Set(Object.values(fields).map((v) => (JSON.parse(v) as { epoch: string }).epoch));
      assert.equal(epochs.size, 1, JSON.stringify(fields));
    } finally {
      client.disconnect();
    }
    const first = await openOn(two, 2);
    assert.equal(first.json.errCode, 0, first.text);
    const r = await openOn(one, 1, { reqId: 'worker-fleet-0001' });
    assert.equal(r.json.errCode, 0, r.text);
    const d = r.json.data[0];
    assert.equal(d.host, HOSTS[1]);
    const t = await TcpTerminal.connect(d.port, d.host);
    terminals.push(t);
    void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 40), { sim: SIM, channel: 1 }), 16, 20).catch(() => undefined);
    const p = await HttpFlvPlayer.connect(d.playUrl);
    players.push(p);
    assert.equal(p.status, 200);
    await waitFor('video frames', () => p.videoFrames() >= 30, 30_000, 50);
    // the fleet's claim names the node and the worker that serves the channel (whichever worker took the open)
    const opened = await waitFor(
      "the request's log line",
      () => two.lines<{ worker: number; reqId?: string }>('"msg":"request opened"').find((l) => l.reqId === 'worker-fleet-0001'),
      5_000,
      20,
    );
    const redisClient = new Redis(redis.url);
    try {
      await waitFor(
        'the claim naming the serving worker',
        async () => (await redisClient.get(`gw:{s:${SIM}}:ch:1`))?.endsWith(`|${opened.worker}`),
        5_000,
        100,
      );
      assert.match((await redisClient.get(`gw:{s:${SIM}}:ch:1`))!, /^two\|/);
    } finally {
      redisClient.disconnect();
    }
  });

  it('a worker killed with SIGKILL: its requests get closed notices and their ids are free again across the fleet', async () => {
    // every channel of a SIM is in one worker: the one whose log says it opened the request
    const opened = await waitFor(
      "the request's log line",
      () => two.lines<{ worker: number; reqId?: string }>('"msg":"request opened"').find((l) => l.reqId === 'worker-fleet-0001'),
      5_000,
      20,
    );
    const pid = workerPids(two.child.pid!).get(opened.worker);
    assert.ok(pid);
    process.kill(pid, 'SIGKILL');
    const n = await waitFor('the closed notice', () => cb.notices.find((x) => x.reqId === 'worker-fleet-0001' && x.act !== 'ready'), 15_000, 50);
    assert.equal(n.closeCause, 4);
    // the id is free again: the fleet's directory forgot it with the notice
    const again = await waitFor(
      'the id free again',
      async () => {
        const x = await openOn(one, 7, { reqId: 'worker-fleet-0001' });
        return x.json?.errCode === 0 ? x : undefined;
      },
      15_000,
      250,
    );
    assert.equal(again.json.errCode, 0);
  });
});
