/**
 * A fleet: three real gateway nodes bound to 127.0.0.2, .3 and .4 on the same ports, one real redis-server
 * as their directory. An open on A for a channel lands on B (B serves another channel of the SIM); the terminal
 * pushes to B's address and a player plays B's URL; keep and close go through C and status through A; request ids
 * are unique over the fleet; connIdx picks B's second address set. Redis killed and started again: the live stream
 * plays on, opens answer -2 while it is down and again once it is back, and every claim left names a node that serves
 * its channel. B killed with SIGKILL: within 10 s its requests get closed notices (closeCause 13, from a survivor),
 * and a new open of its channel succeeds on A or C, where a terminal that reconnects plays.
 */
import assert from 'node:assert/strict';
import Redis from 'ioredis';
import { CallbackReceiver } from '../support/cluster-gateway';
import { startRedis, type RedisServer } from '../support/redis';
import { sharedPorts, startFleetNode, type FleetNode, type FleetPorts } from '../support/fleet-node';
import { HttpFlvPlayer, TcpTerminal, capture, encodeLazily, loopedPackets, waitFor } from './helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';
const HOSTS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];

interface Notice {
  act: string;
  reqId: string;
  closeCause?: number;
  closeReason?: string;
  simNo: string;
  instId: string;
}

describe('a fleet of three nodes on one Redis directory (real processes)', function () {
  this.timeout(180_000);
  let redis: RedisServer;
  let ports: FleetPorts;
  const nodes: Record<'A' | 'B' | 'C', FleetNode> = {} as never;
  const cb = new CallbackReceiver();
  const terminals: TcpTerminal[] = [];
  const players: HttpFlvPlayer[] = [];
  const SIM = '13900139000';
  /** B's requests (their closed notices come from a survivor when B dies) */
  const onB: string[] = [];

  const plugins = () => [
    {
      name: 'jt1078-ingest',
      config: { livePort2013: ports.live2013, livePort2019: ports.live2019, replayPort2013: ports.replay2013, replayPort2019: ports.replay2019 },
    },
    { name: 'flv-out', config: { port: ports.flv } },
    { name: 'callback-notifier', config: { allowLoopback: true } },
  ];
  const start = (id: 'A' | 'B' | 'C', host: string) =>
    startFleetNode({
      nodeId: `node-${id.toLowerCase()}`,
      host,
      ports,
      directoryUrl: redis.url,
      plugins: plugins(),
      // the test outlives the default open, consumption and keep timeouts of requests it leaves unplayed or unkept
      gateway: { publicHosts: [`line2-${id.toLowerCase()}.example`], openTimeoutSec: 600, consumptionTimeoutSec: 600 },
    });

  before(async () => {
    await cb.start();
    redis = await startRedis();
    ports = await sharedPorts(HOSTS);
    [nodes.A, nodes.B, nodes.C] = await Promise.all([start('A', HOSTS[0]), start('B', HOSTS[1]), start('C', HOSTS[2])]);
    // the fleet has formed once every node sees the three (each reads the live nodes every second)
    for (const n of Object.values(nodes)) {
      await waitFor(`${n.nodeId} sees three nodes`, async () => /^gw_fleet_nodes 3$/m.test((await n.api('GET', '/metrics')).text), 10_000, 100);
    }
  });

  after(async () => {
    for (const p of players) p.close();
    for (const t of terminals) t.socket.destroy();
    await Promise.all(Object.values(nodes).map((n) => n?.stop().catch(() => undefined)));
    await redis?.stop();
    cb.stop();
  });

  const openOn = (n: FleetNode, chanId: number, over: Record<string, unknown> = {}, sim = SIM) =>
    n.api('POST', '/strm/open', {
      user: { token: 'tk' },
      typ: 'live',
      simNo: sim,
      chanId,
      scheme: 'http',
      keepIntv: 600,
      cb: `http://127.0.0.1:${cb.port}`,
      ...over,
    });

  async function push(host: string, port: number, sim: string, channel: number): Promise<TcpTerminal> {
    const t = await TcpTerminal.connect(port, host);
    terminals.push(t);
    void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 40), { sim, channel }), 16, 20).catch(() => undefined);
    return t;
  }

  async function play(playUrl: string, frames = 30): Promise<HttpFlvPlayer> {
    const p = await HttpFlvPlayer.connect(playUrl);
    players.push(p);
    assert.equal(p.status, 200, playUrl);
    await waitFor(`${frames} video frames from ${playUrl}`, () => p.videoFrames() >= frames, 30_000, 50);
    return p;
  }

  it('an open on A for a channel lands on B, which serves another channel of its SIM; the terminal pushes to B and B plays it', async () => {
    const first = await openOn(nodes.B, 2);
    assert.equal(first.json.errCode, 0, first.text);
    assert.equal(first.json.data[0].host, HOSTS[1]);
    onB.push(first.json.data[0].reqId);

    const r = await openOn(nodes.A, 1);
    assert.equal(r.json.errCode, 0, r.text);
    const d = r.json.data[0];
    onB.push(d.reqId);
    assert.equal(d.host, HOSTS[1], "the push address is B's");
    assert.equal(d.port, ports.live2013);
    assert.ok(d.playUrl.startsWith(`http://${HOSTS[1]}:${ports.flv}/live/${SIM}_1_1.flv?`), d.playUrl);
    assert.equal(d.ready, false);
    assert.equal(d.ctrl, true);

    await push(d.host, d.port, SIM, 1);
    const p = await play(d.playUrl);
    assert.ok(p.videoFrames() >= 30);
    // a second open of the same channel, on C, joins B's stream: ready as B sees it, not ctrl
    const again = await openOn(nodes.C, 1);
    assert.equal(again.json.errCode, 0, again.text);
    assert.equal(again.json.data[0].host, HOSTS[1]);
    assert.equal(again.json.data[0].ready, true);
    assert.equal(again.json.data[0].ctrl, false);
    onB.push(again.json.data[0].reqId);
  });

  it('keep and close go through C, status through A (each request listed once, with its node)', async () => {
    const [a, b] = onB;
    const kept = await nodes.C.api('POST', '/strm/keep', { reqIds: [a, 'nope-not-open', b] });
    assert.deepEqual(kept.json.data, [
      { reqId: a, keep: true },
      { reqId: 'nope-not-open', keep: false },
      { reqId: b, keep: true },
    ]);
    // another application's ids answer exactly like unknown ones
    const foreign = await nodes.C.api('POST', '/strm/keep', { reqIds: [a] }, `Basic ${Buffer.from('b:b').toString('base64')}`);
    assert.deepEqual(foreign.json.data, [{ reqId: a, keep: false }]);

    const status = await nodes.A.api('GET', '/strm/status');
    assert.equal(status.json.errCode, 0, status.text);
    const mine = (status.json.data as Array<{ reqId: string; node: string; ready: boolean }>).filter((s) => onB.includes(s.reqId));
    assert.equal(mine.length, onB.length, status.text);
    for (const s of mine) assert.equal(s.node, 'node-b');
    assert.ok(mine.some((s) => s.ready));

    // a request to close, opened on A and served by B, closed through C
    const extra = await openOn(nodes.A, 3);
    assert.equal(extra.json.data[0].host, HOSTS[1], 'the SIM rule again');
    const closed = await nodes.C.api('POST', '/strm/close', { reqIds: [extra.json.data[0].reqId] });
    assert.deepEqual(closed.json.data, [{ reqId: extra.json.data[0].reqId, closed: true }]);
    const n = await waitFor('the closed notice', () => cb.notices.find((x) => x.reqId === extra.json.data[0].reqId && x.act !== 'ready'));
    assert.equal(n.closeCause, 1);
  });

  it("a request id is unique across the fleet; connIdx picks the owner's address set, and one it does not have answers -7", async () => {
    const reqId = 'fleet-unique-0001';
    const one = await openOn(nodes.A, 1, { reqId }, '13900139111');
    assert.equal(one.json.errCode, 0, one.text);
    const two = await openOn(nodes.C, 2, { reqId }, '13900139222');
    assert.equal(two.json.errCode, -7, two.text);
    assert.match(two.json.message, /reqId/);
    await nodes.B.api('POST', '/strm/close', { reqIds: [reqId] });

    const line2 = await openOn(nodes.A, 1, { connIdx: 1 });
    assert.equal(line2.json.errCode, 0, line2.text);
    assert.equal(line2.json.data[0].host, 'line2-b.example');
    assert.ok(line2.json.data[0].playUrl.startsWith(`http://line2-b.example:${ports.flv}/`), line2.json.data[0].playUrl);
    onB.push(line2.json.data[0].reqId);
    const none = await openOn(nodes.A, 1, { connIdx: 2 });
    assert.equal(none.json.errCode, -7, none.text);
    assert.match(none.json.message, /connIdx/);
  });

  it('a burst of opens of new terminals through one node spreads over the fleet (fewest streams, counting its own placements)', async () => {
    const hosts: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await openOn(nodes.C, 1, {}, String(13900140000 + i));
      assert.equal(r.json.errCode, 0, r.text);
      hosts.push(r.json.data[0].host);
      ids.push(r.json.data[0].reqId);
    }
    const per = new Map<string, number>();
    for (const h of hosts) per.set(h, (per.get(h) ?? 0) + 1);
    assert.ok(per.size >= 2, hosts.join());
    assert.ok(Math.max(...per.values()) <= 4, hosts.join());
    const closed = await nodes.A.api('POST', '/strm/close', { reqIds: ids });
    assert.ok(
      (closed.json.data as Array<{ closed: boolean }>).every((c) => c.closed),
      closed.text,
    );
  });

  it('Redis killed and started again: the stream plays on, opens answer -2 while it is down and again after, no claim is left that nobody serves', async () => {
    const player = players[0];
    const port = redis.port;
    await redis.stop();
    const before = player.videoFrames();
    const down = await waitFor(
      'an open refused for the directory',
      async () => {
        const r = await openOn(nodes.A, 9, {}, '13900139333');
        return r.json?.errCode === -2 ? r : undefined;
      },
      15_000,
      200,
    );
    assert.match(down.json.message, /directory/);
    const health = await nodes.A.api('GET', '/healthz');
    assert.equal(health.json.status, 'degraded', health.text);
    assert.ok(health.json.degraded.directory, health.text);
    // a keep of B's request through B itself still works without the directory
    const kept = await nodes.B.api('POST', '/strm/keep', { reqIds: [onB[0]] });
    assert.deepEqual(kept.json.data, [{ reqId: onB[0], keep: true }]);
    await waitFor('frames while Redis is down', () => player.videoFrames() >= before + 50, 20_000, 100);

    redis = await startRedis({ port });
    const again = await waitFor(
      'an open answered again',
      async () => {
        const r = await openOn(nodes.A, 9, {}, '13900139333');
        return r.json?.errCode === 0 ? r : undefined;
      },
      20_000,
      250,
    );
    assert.equal(again.json.errCode, 0);
    await nodes.A.api('POST', '/strm/close', { reqIds: [again.json.data[0].reqId] });
    await waitFor('healthz ok', async () => (await nodes.A.api('GET', '/healthz')).json.status === 'ok', 10_000, 200);
    // the nodes put back their claims and requests: B's channel is B's again, and its requests are found through C
    const client = new Redis(redis.url);
    try {
      await waitFor("B's claim put back", async () => (await client.get(`gw:{s:${SIM}}:ch:1`))?.startsWith('node-b|'), 10_000, 200);
      // B's restore puts its claims back, then its requests (core/directory/redis-directory.ts): a first look by C
      // can come between the two
      await waitFor(
        "B's request found through C",
        async () => ((await nodes.C.api('GET', '/strm/status')).json.data as Array<{ reqId: string }>).some((s) => s.reqId === onB[0]),
        10_000,
        200,
      );
      const claims = await client.keys('gw:{s:*}:ch:*');
      for (const k of claims) {
        const owner = (await client.get(k))!.split('|')[0];
        assert.ok(['node-a', 'node-b', 'node-c'].includes(owner), `${k} -> ${owner}`);
      }
      // every claim is a channel with an open stream: B's SIM channels 1 and 2 (9 was closed)
      let seen: string[] = [];
      await waitFor(
        'only served channels claimed',
        async () => {
          seen = (await client.keys('gw:{s:*}:ch:*')).sort();
          return seen.join() === [`gw:{s:${SIM}}:ch:1`, `gw:{s:${SIM}}:ch:2`].join() ? seen : undefined;
        },
        15_000,
        250,
      ).catch((err: Error) => assert.fail(`${err.message}: ${seen.join(', ')}`));
    } finally {
      client.disconnect();
    }
  });

  it('B killed with SIGKILL: within 10 s each of its requests gets a closed notice (13, naming B) from a survivor; its channel opens on A or C and plays there', async () => {
    const killedAt = Date.now();
    nodes.B.kill();
    for (const reqId of onB) {
      const n = await waitFor(
        `closed notice of ${reqId}`,
        () => cb.notices.find((x) => x.reqId === reqId && x.act === 'closed') as Notice | undefined,
        10_000,
        50,
      );
      assert.equal(n.closeCause, 13, JSON.stringify(n));
      assert.match(n.closeReason ?? '', /node-b/);
    }
    const within = Date.now() - killedAt;
    assert.ok(within <= 10_000, `notices after ${within} ms`);
    const r = await waitFor(
      "an open of B's channel on A",
      async () => {
        const x = await openOn(nodes.A, 1);
        return x.json?.errCode === 0 ? x : undefined;
      },
      10_000,
      250,
    );
    const d = r.json.data[0];
    assert.ok([HOSTS[0], HOSTS[2]].includes(d.host), d.host);
    await push(d.host, d.port, SIM, 1);
    const p = await play(d.playUrl, 20);
    assert.ok(p.videoFrames() >= 20);
  });
});
