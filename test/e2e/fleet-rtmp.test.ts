/**
 * RTMP in a fleet: two real gateway nodes (127.0.0.2 and .3, the same ports) on one real redis-server. An encoder
 * publishes to node B; B claims the channel in the directory while it publishes, so an open of that channel through
 * node A goes to B, whose RTMP URL plays what the encoder sends. A relay call through A for B's request is answered
 * by B (a plugin route that names its request goes to the node that holds it). The encoder gone and the request
 * closed, the claim goes with them.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import type { ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { startRedis, type RedisServer } from '../support/redis';
import { sharedPorts, startFleetNode, type FleetNode, type FleetPorts } from '../support/fleet-node';
import { ffmpegListen, ffmpegPublish, probeVideo, recordAndProbe } from '../../plugins/rtmp/test/helpers';
import { waitFor } from './helpers';
import { scratchDir } from '../support/paths';

const HOSTS = ['127.0.0.2', '127.0.0.3'];
const KEY = 'fleet-publish-key';

async function freeOn(hosts: string[]): Promise<number> {
  for (;;) {
    const port = 30_000 + Math.floor(Math.random() * 20_000);
    let ok = true;
    for (const host of hosts) {
      ok = await new Promise<boolean>((resolve) => {
        const srv = net.createServer();
        srv.once('error', () => resolve(false));
        srv.listen(port, host, () => srv.close(() => resolve(true)));
      });
      if (!ok) break;
    }
    if (ok) return port;
  }
}

describe('RTMP in a fleet of two nodes on one Redis directory (real processes)', function () {
  this.timeout(180_000);
  let redis: RedisServer;
  let ports: FleetPorts;
  let rtmpPort: number;
  const nodes: Record<'A' | 'B', FleetNode> = {} as never;
  let encoder: ChildProcess | undefined;
  let reqIdOnB = '';

  const start = (id: 'A' | 'B', host: string) =>
    startFleetNode({
      nodeId: `node-${id.toLowerCase()}`,
      host,
      ports,
      directoryUrl: redis.url,
      plugins: [
        {
          name: 'jt1078-ingest',
          config: { livePort2013: ports.live2013, livePort2019: ports.live2019, replayPort2013: ports.replay2013, replayPort2019: ports.replay2019 },
        },
        { name: 'rtmp', config: { port: rtmpPort, publishKeys: [{ appId: 'A', key: KEY }], relayAllowLoopback: true } },
      ],
      gateway: { openTimeoutSec: 600, consumptionTimeoutSec: 600 },
    });

  before(async () => {
    redis = await startRedis();
    ports = await sharedPorts(HOSTS);
    rtmpPort = await freeOn(HOSTS);
    [nodes.A, nodes.B] = await Promise.all([start('A', HOSTS[0]), start('B', HOSTS[1])]);
    for (const n of Object.values(nodes)) {
      await waitFor(`${n.nodeId} sees two nodes`, async () => /^gw_fleet_nodes 2$/m.test((await n.api('GET', '/metrics')).text), 10_000, 100);
    }
  });

  after(async () => {
    encoder?.kill('SIGKILL');
    await Promise.all(Object.values(nodes).map((n) => n?.stop().catch(() => undefined)));
    await redis?.stop();
  });

  it("an open through A of a channel an encoder publishes to B goes to B, and B's RTMP URL plays it", async () => {
    encoder = ffmpegPublish(`rtmp://${HOSTS[1]}:${rtmpPort}/push/cam42_2?key=${KEY}`, { audio: 'none' });
    await waitFor('B publishing', async () => /^gw_rtmp_publishers 1$/m.test((await nodes.B.api('GET', '/metrics')).text), 20_000, 100);
    // the claim reaches Redis a moment after the publish starts
    await new Promise((r) => setTimeout(r, 500));
    const r = await nodes.A.api('POST', '/strm/open', { user: { token: 'tk' }, typ: 'live', simNo: 'cam42', chanId: 2, scheme: 'rtmp', keepIntv: 600 });
    assert.equal(r.json.errCode, 0, r.text);
    const o = r.json.data[0];
    assert.match(o.playUrl, new RegExp(`^rtmp://${HOSTS[1].replace(/\./g, '\\.')}:${rtmpPort}/live/cam42_2_1\\?`), 'the URL names B');
    await waitFor('ready', async () => (await nodes.A.api('GET', `/strm/status?reqId=${o.reqId}`)).json.data[0]?.ready, 20_000, 100);
    const p = await recordAndProbe(o.playUrl, 2);
    const v = p.streams.find((s) => s.codec_type === 'video');
    assert.equal(`${v?.codec_name} ${v?.width}x${v?.height}`, 'h264 320x240');
    assert.equal(p.decodeErrors, '');
    reqIdOnB = o.reqId;
  });

  it("POST /strm/relay through A for B's request is answered by B, whose relay reaches ffmpeg listening", async () => {
    const port = await freeOn(['127.0.0.1']);
    const file = path.join(scratchDir('fleet-relay'), 'got.flv');
    const receiver = ffmpegListen(`rtmp://127.0.0.1:${port}/app/fleetkey`, file);
    try {
      const r = await nodes.A.api('POST', '/strm/relay', { reqId: reqIdOnB, url: `rtmp://127.0.0.1:${port}/app/fleetkey` });
      assert.equal(r.json.errCode, 0, r.text);
      assert.equal(r.json.data[0].url, `rtmp://127.0.0.1:${port}/app/***`);
      await waitFor(
        'publishing, as status through A says',
        async () => {
          const st = (await nodes.A.api('GET', `/strm/status?reqId=${reqIdOnB}`)).json.data[0];
          return st?.flags?.relays?.[0]?.state === 'publishing' && st.flags.relays[0].bytesOut > 30_000;
        },
        30_000,
        200,
      );
      const stop = await nodes.A.api('POST', '/strm/relay/stop', { reqId: reqIdOnB });
      assert.equal(stop.json.data.length, 1, stop.text);
      assert.equal(await receiver.exited, 0);
    } finally {
      receiver.kill();
    }
    const v = await probeVideo(file);
    assert.equal(v?.codec_name, 'h264');
    assert.ok(Number(v?.nb_read_frames) >= 10, `${v?.nb_read_frames} frames`);
  });

  it('the encoder gone and its request closed, B holds no claim any more', async () => {
    encoder?.kill('SIGKILL');
    encoder = undefined;
    await waitFor('B without publishers', async () => /^gw_rtmp_publishers 0$/m.test((await nodes.B.api('GET', '/metrics')).text), 20_000, 100);
    // B still serves cam42_2 (the open of the test before holds its stream): close it, then nothing holds the channel
    const st = await nodes.A.api('GET', '/strm/status');
    const ids = (st.json.data as Array<{ reqId: string }>).map((x) => x.reqId);
    await nodes.A.api('POST', '/strm/close', { reqIds: ids });
    await waitFor('the claim released', async () => /^gw_fleet_claims_held 0$/m.test((await nodes.B.api('GET', '/metrics')).text), 20_000, 200);
  });
});
