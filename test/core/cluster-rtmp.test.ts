/**
 * RTMP on a gateway with two workers (the real process). An RTMP connection says whose it is only at its play or
 * publish, after a handshake and commands the primary cannot route by: it starts on any worker, and the worker that
 * took it moves it, with what it read, to the worker that owns the stream ('late' route). ffmpeg plays each
 * worker's channel several times (so connections land on both workers and some move), and an encoder that
 * publishes holds its channel on its worker, where the channel's opens then go.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { simsOfWorkers, startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';
import { ffmpegListen, ffmpegPublish, probeVideo, recordAndProbe } from '../../plugins/rtmp/test/helpers';
import { TcpTerminal, capture, encodeLazily, loopedPackets, waitFor } from '../e2e/helpers';
import { scratchDir } from '../support/paths';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';
const KEY = 'cluster-publish-key';

describe('RTMP on a gateway with two workers (real process)', function () {
  this.timeout(180_000);
  let gw: ClusterGateway;
  const terminals: TcpTerminal[] = [];
  let encoder: ChildProcess | undefined;
  /** a channel owned by worker 0 and one by worker 1 */
  const sims = simsOfWorkers(13700137000, 1, 2);
  const urls = new Map<string, string>();
  const reqIds = new Map<string, string>();

  before(async () => {
    gw = await startClusterGateway('cluster-rtmp', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'rtmp', config: { port: 0, publishKeys: [{ appId: 'A', key: KEY }], relayAllowLoopback: true } },
    ]);
    assert.ok(gw.ports['rtmp.port'] > 0, gw.log());
    for (const sim of sims) {
      const r = await gw.api('POST', '/strm/open', { user: { token: 'tk' }, typ: 'live', simNo: sim, chanId: 1, scheme: 'rtmp', dataTyp: 1 });
      assert.equal(r.json.errCode, 0, r.text);
      urls.set(sim, r.json.data[0].playUrl);
      const t = await TcpTerminal.connect(r.json.data[0].port);
      terminals.push(t);
      void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 60), { sim, channel: 1 }), 16, 20).catch(() => undefined);
      const reqId = r.json.data[0].reqId;
      reqIds.set(sim, reqId);
      await waitFor('the stream ready', async () => (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0]?.ready, 30_000, 100);
    }
  });

  after(() => {
    encoder?.kill('SIGKILL');
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
  });

  it("ffmpeg plays each worker's channel over RTMP, whichever worker its connection lands on", async () => {
    for (const [i, sim] of sims.entries()) {
      for (let round = 0; round < 2; round++) {
        const p = await recordAndProbe(urls.get(sim)!, 2);
        fs.rmSync(p.file, { force: true });
        const v = p.streams.find((s) => s.codec_type === 'video');
        assert.equal(v?.codec_name, 'h264', `worker ${i}'s channel, round ${round}`);
        assert.equal(`${v?.width}x${v?.height}`, '352x288');
        assert.ok(Number(v?.nb_read_frames) >= 25, `worker ${i}'s channel, round ${round}: ${v?.nb_read_frames} frames`);
        assert.equal(p.decodeErrors, '');
      }
    }
    // four connections on two workers taken in turn: at least one began on the other worker and was moved
    const m = (await gw.api('GET', '/metrics')).text;
    const moved = Number(/^gw_rtmp_connections_moved_total (\d+)/m.exec(m)?.[1] ?? 0);
    assert.ok(moved >= 1, `connections moved: ${moved}`);
  });

  it('an encoder publishes on either worker; the open of its channel goes there and plays over RTMP', async () => {
    encoder = ffmpegPublish(`rtmp://127.0.0.1:${gw.ports['rtmp.port']}/push/enc77_3?key=${KEY}`, { audio: 'none' });
    const opened = await waitFor(
      'the published channel open and ready',
      async () => {
        const r = await gw.api('POST', '/strm/open', { user: { token: 'tk' }, typ: 'live', simNo: 'enc77', chanId: 3, scheme: 'rtmp', dataTyp: 1 });
        if (r.json.errCode !== 0) return undefined;
        const reqId = r.json.data[0].reqId;
        const ready = await waitFor('ready', async () => (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0]?.ready, 5000, 100).catch(
          () => false,
        );
        if (!ready) {
          await gw.api('POST', '/strm/close', { reqIds: [reqId] });
          return undefined;
        }
        return r.json.data[0] as { playUrl: string };
      },
      40_000,
      500,
    );
    for (let round = 0; round < 2; round++) {
      const p = await recordAndProbe(opened.playUrl, 2);
      fs.rmSync(p.file, { force: true });
      const v = p.streams.find((s) => s.codec_type === 'video');
      assert.equal(`${v?.codec_name} ${v?.width}x${v?.height}`, 'h264 320x240', `round ${round}`);
      assert.equal(p.decodeErrors, '');
    }
  });

  it("POST /strm/relay of each worker's request is answered by that worker, and ffmpeg listening receives the stream", async () => {
    const dir = scratchDir('cluster-relay');
    for (const [i, sim] of sims.entries()) {
      const port = await new Promise<number>((resolve) => {
        const s = net.createServer().listen(0, '127.0.0.1', () => {
          const p = (s.address() as net.AddressInfo).port;
          s.close(() => resolve(p));
        });
      });
      const file = path.join(dir, `${i}.flv`);
      const receiver = ffmpegListen(`rtmp://127.0.0.1:${port}/app/k${i}`, file);
      try {
        const reqId = reqIds.get(sim)!;
        // several calls: each lands on either worker, and is answered by the one that holds the request
        for (let k = 0; k < 3; k++) {
          const r = await gw.api('POST', '/strm/relay', { reqId, url: `rtmp://127.0.0.1:${port}/app/k${i}` });
          assert.equal(r.json.errCode, 0, `worker ${i}'s request, call ${k}: ${r.text}`);
        }
        await waitFor(
          'the relay publishing',
          async () => {
            const st = (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0];
            const relays = (st?.flags?.relays ?? st?.relays ?? []) as Array<{ state: string; bytesOut: number }>;
            return relays.length === 1 && relays[0].state === 'publishing' && relays[0].bytesOut > 50_000;
          },
          30_000,
          200,
        );
        const stop = await gw.api('POST', '/strm/relay/stop', { reqId });
        assert.equal(stop.json.data.length, 1, stop.text);
        assert.equal(await receiver.exited, 0);
      } finally {
        receiver.kill();
      }
      const v = await probeVideo(file);
      assert.equal(v?.codec_name, 'h264');
      assert.ok(Number(v?.nb_read_frames) >= 10, `worker ${i}: ${v?.nb_read_frames} frames`);
    }
  });
});
