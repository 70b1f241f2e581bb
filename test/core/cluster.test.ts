/**
 * The real gateway process with two workers (`workers: 2`), driven as users drive it. Terminals
 * and players of two channels owned by different workers meet in their owner whichever worker the API call landed on;
 * keep and close find the worker that holds each request; a request id is unique across workers; an HLS client whose
 * one keep-alive connection asks for both streams gets both (the second forwarded); a worker killed with SIGKILL loses
 * only its own streams, its requests get closed notices (closeCause 4), it is started again and its channels open and
 * play again; SIGTERM stops the whole gateway with exit 0.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  AUTH_A,
  AUTH_B,
  CallbackReceiver,
  api,
  simsOfWorkers,
  startClusterGateway,
  workerPids,
  workerRestarted,
  type ClusterGateway,
} from '../support/cluster-gateway';
import { Client, Terminal, dominantHz, pcmBytes, terminalPackets, tone } from '../../plugins/intercom/test/helpers';
import { HttpFlvPlayer, TcpTerminal, capture, encodeCapture, encodeLazily, ffprobe, loopedPackets, sendUdp, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';

describe('a gateway with two workers (real process)', function () {
  this.timeout(120_000);
  let gw: ClusterGateway;
  let child: ClusterGateway['child'];
  let ports: Record<string, number> = {};
  const cb = new CallbackReceiver();
  const terminals: TcpTerminal[] = [];
  // two channels whose owners differ
  const [simA, simB] = simsOfWorkers(13800138000, 1, 2);

  before(async () => {
    await cb.start();
    gw = await startClusterGateway('cluster', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
      { name: 'hls-out', config: {} },
      { name: 'callback-notifier', config: { allowLoopback: true } },
      { name: 'gov-timed-token', config: {} },
      { name: 'intercom', config: { maxBufferMs: 2000 } },
    ]);
    child = gw.child;
    ports = gw.ports;
    assert.ok(ports['flv-out.port'] > 0, gw.log());
  });

  after(async () => {
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
    cb.stop();
  });

  const open = (sim: string, over: Record<string, unknown> = {}, auth = AUTH_A) =>
    api(
      ports['gateway.httpPort'],
      'POST',
      '/strm/open',
      { user: { token: 'tk' }, typ: 'live', simNo: sim, chanId: 1, scheme: 'http', cb: `http://127.0.0.1:${cb.port}`, ...over },
      auth,
    );

  async function push(sim: string, port: number): Promise<TcpTerminal> {
    const t = await TcpTerminal.connect(port);
    terminals.push(t);
    // one pass quickly (ready at its first keyframe), then more in the background so the stream stays live
    void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 30), { sim, channel: 1 }), 16, 20).catch(() => undefined);
    return t;
  }

  async function playFlv(playUrl: string): Promise<ReturnType<typeof ffprobe>> {
    const player = await HttpFlvPlayer.connect(playUrl);
    assert.equal(player.status, 200);
    await waitFor('video frames', () => player.videoFrames() >= 40, 30_000, 50);
    player.close();
    return ffprobe(player.data(), 'flv');
  }

  it('starts its workers with the collector on their own thread and a young generation of 8 MB semi-spaces (gateway.gcHelperThreads, gcSemiSpaceMB)', () => {
    const pids = workerPids(child.pid!);
    assert.equal(pids.size, 2);
    for (const pid of pids.values()) {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
      assert.ok(argv.includes('--single-threaded-gc'), `worker ${pid}: ${argv.join(' ')}`);
      assert.ok(argv.includes('--max-semi-space-size=8'), `worker ${pid}: ${argv.join(' ')}`);
    }
    // the primary runs no plugin: it keeps node's defaults
    assert.ok(!fs.readFileSync(`/proc/${child.pid}/cmdline`, 'latin1').split('\0').includes('--single-threaded-gc'));
  });

  it('opens, plays and keeps channels owned by different workers, whichever worker the call lands on', async () => {
    const a = await open(simA, { reqId: 'cluster-req-A' });
    const b = await open(simB, { reqId: 'cluster-req-B' });
    assert.equal(a.json.errCode, 0, a.text);
    assert.equal(b.json.errCode, 0, b.text);
    // the opens were served by their channels' workers
    // (the log is written asynchronously: the lines may trail the answers)
    const opened = await waitFor(
      'the request log lines',
      () => {
        const lines = gw
          .log()
          .split('\n')
          .filter((l) => l.includes('"request opened"'))
          .map((l) => JSON.parse(l) as { worker: number; reqId: string });
        return lines.filter((o) => o.reqId.startsWith('cluster-req-')).length === 2 ? lines : undefined;
      },
      10_000,
      20,
    );
    assert.equal(opened.find((o) => o.reqId === 'cluster-req-A')?.worker, 0);
    assert.equal(opened.find((o) => o.reqId === 'cluster-req-B')?.worker, 1);

    await push(simA, a.json.data[0].port);
    await push(simB, b.json.data[0].port);
    for (const r of [a, b]) {
      const p = await playFlv(r.json.data[0].playUrl);
      assert.equal(p.codec, 'h264');
      assert.equal(p.width, 352);
      assert.ok(p.frames >= 40, `decoded ${p.frames} frames`);
    }
    const st = await api(ports['gateway.httpPort'], 'GET', '/strm/status');
    const mine = (st.json.data as Array<{ reqId: string; ready: boolean; bytesIn: number }>).filter((r) => r.reqId.startsWith('cluster-req-'));
    assert.deepEqual(mine.map((r) => r.reqId).sort(), ['cluster-req-A', 'cluster-req-B']);
    assert.ok(mine.every((r) => r.ready && r.bytesIn > 0));
    const health = await api(ports['gateway.httpPort'], 'GET', '/healthz');
    assert.equal(health.json.workers, 2);
    assert.equal(health.json.requests, 2);
    // a scrape sums every worker's series, whichever worker it landed on
    const metrics = await api(ports['gateway.httpPort'], 'GET', '/metrics');
    assert.match(metrics.text, /^gw_core_requests_open 2$/m);
    assert.match(metrics.text, /^gw_core_streams_open 2$/m);
    // each worker's per-stream rows (gauge tables, sent compact) are in it, one a stream, with what was counted
    const rows = metrics.text.split('\n').filter((l) => l.startsWith('gw_jt1078_ingest_stream_packets{'));
    assert.equal(rows.length, 2, rows.join('\n'));
    assert.ok(
      rows.every((l) => Number(l.slice(l.lastIndexOf(' ') + 1)) > 0),
      rows.join('\n'),
    );
    assert.match(metrics.text, /^# TYPE gw_jt1078_ingest_stream_packets gauge$/m);

    const keep = await api(ports['gateway.httpPort'], 'POST', '/strm/keep', { reqIds: ['cluster-req-B', 'no-such-request', 'cluster-req-A'] });
    assert.deepEqual(keep.json.data, [
      { reqId: 'cluster-req-B', keep: true },
      { reqId: 'no-such-request', keep: false },
      { reqId: 'cluster-req-A', keep: true },
    ]);
    // another application's requests answer like unknown ones, whichever worker holds them
    const foreign = await api(ports['gateway.httpPort'], 'POST', '/strm/keep', { reqIds: ['cluster-req-A', 'cluster-req-B'] }, AUTH_B);
    assert.deepEqual(
      foreign.json.data.map((x: { keep: boolean }) => x.keep),
      [false, false],
    );
    assert.equal((await api(ports['gateway.httpPort'], 'GET', '/strm/status', undefined, AUTH_B)).json.count, 0);
  });

  it("a terminal pushing over UDP reaches its channel's worker through the primary, datagram by datagram", async () => {
    // a third channel, on worker 1, in the 2019 layout
    const sim = simsOfWorkers(13900000100, 2, 2)[1];
    const r = await open(sim, { chanId: 2, reqId: 'cluster-udp' });
    assert.equal(r.json.errCode, 0, r.text);
    assert.equal(r.json.data[0].tcp2019, true);
    const player = await HttpFlvPlayer.connect(r.json.data[0].playUrl);
    const packets = encodeCapture(capture(CAPTURE).packets, { sim, channel: 2, layout: '2019' });
    await sendUdp(r.json.data[0].port2019, packets, { perTick: 40, tickMs: 5 });
    await waitFor('video over UDP', () => player.videoFrames() >= 100, 30_000, 50);
    player.close();
    const p = ffprobe(player.data(), 'flv');
    assert.equal(p.codec, 'h264');
    assert.ok(p.frames >= 100, `decoded ${p.frames}`);
    const opened = await waitFor('its log line', () =>
      gw
        .log()
        .split('\n')
        .find((l) => l.includes('"request opened"') && l.includes('cluster-udp')),
    );
    assert.equal((JSON.parse(opened) as { worker: number }).worker, 1);
    await api(ports['gateway.httpPort'], 'POST', '/strm/close', { reqIds: ['cluster-udp'] });
  });

  it('talk reaches the terminal on its worker, over taUrl and over STOMP whichever worker the socket lands on', async () => {
    const sim = simsOfWorkers(13700000500, 1, 2)[1];
    const r = await open(sim, { dataTyp: 2, reqId: 'cluster-talk' });
    assert.equal(r.json.errCode, 0, r.text);
    const { taUrl, wsUrl } = r.json.data[0] as { taUrl: string; wsUrl: string };
    const t = await Terminal.connect(r.json.data[0].port, { layout: '2013' });
    try {
      t.write(terminalPackets({ sim, channel: 1, layout: '2013' }).packets);
      await waitFor(
        'the talk stream ready',
        async () => {
          const st = await api(ports['gateway.httpPort'], 'GET', '/strm/status?reqId=cluster-talk');
          return st.json.data[0]?.ready;
        },
        20_000,
        100,
      );
      const ta = await Client.open(taUrl);
      for (let at = 0; at < 8000; at += 160) ta.send(pcmBytes(tone(700, 160, at)));
      await waitFor('a second of taUrl audio at the terminal', () => t.receiver.report().frames >= 50, 15_000, 50);
      assert.equal(dominantHz(t.receiver.pcm).hz, 700);
      // one talker per channel: the next one starts once this one's talk has ended on the owner (a client's close
      // reaches the worker after the client sees it, through the primary when forwarded, and a normal close first
      // plays out what is buffered: the channel stays taken until then, by design)
      const talkEnded = () =>
        waitFor(
          'the talk ended on its worker',
          async () => /^gw_intercom_talkers 0$/m.test((await api(ports['gateway.httpPort'], 'GET', '/metrics')).text),
          5000,
          20,
        );
      ta.ws.close();
      await ta.closedP;
      await talkEnded();
      // two STOMP sessions, wherever the primary deals them (a socket on worker 0 is forwarded by its request id)
      for (const hz of [1000, 1500]) {
        const c = await Client.open(wsUrl, ['v12.stomp']);
        const stomp = (command: string, headers: Record<string, string>, body?: Buffer) => {
          let head = `${command}\n`;
          for (const [k, v] of Object.entries(headers)) head += `${k}:${v}\n`;
          if (body) head += `content-length:${body.length}\n`;
          c.send(Buffer.concat([Buffer.from(head + '\n'), body ?? Buffer.alloc(0), Buffer.from([0])]));
        };
        stomp('CONNECT', { 'accept-version': '1.2', host: '127.0.0.1' });
        await waitFor(
          'CONNECTED',
          () => {
            assert.equal(c.closed, undefined, `STOMP socket closed: ${JSON.stringify(c.closed)}`);
            return [...c.messages.map((m) => m.toString('latin1')), ...c.texts].some((m) => m.startsWith('CONNECTED'));
          },
          5000,
          20,
        );
        const before = t.receiver.report().frames;
        for (let at = 0; at < 8000; at += 160) stomp('SEND', { destination: '/talk/cluster-talk' }, pcmBytes(tone(hz, 160, at)));
        await waitFor(`a second of ${hz} Hz over STOMP`, () => t.receiver.report().frames >= before + 50, 15_000, 50);
        assert.equal(dominantHz(t.receiver.pcm.subarray(t.receiver.pcm.length - 4000)).hz, hz);
        c.ws.close();
        await c.closedP;
        await talkEnded();
      }
      // the primary deals 'any' connections in turn (the /metrics polls above moved the turn): two STOMP upgrades back
      // to back, nothing between them, land one on each worker, and the one on worker 0 is forwarded to the owner
      const pair = [await Client.open(wsUrl, ['v12.stomp']), await Client.open(wsUrl, ['v12.stomp'])];
      for (const c of pair) {
        c.ws.close();
        await c.closedP;
      }
      const m = await api(ports['gateway.httpPort'], 'GET', '/metrics');
      assert.match(m.text, /^gw_core_forwarded_total\{kind="upgrade"\} [1-9]/m);
    } finally {
      t.close();
      await api(ports['gateway.httpPort'], 'POST', '/strm/close', { reqIds: ['cluster-talk'] });
    }
  });

  it('keeps a request id unique across workers', async () => {
    // cluster-req-A is held by worker 0; simB's channel belongs to worker 1
    const same = await open(simB, { reqId: 'cluster-req-A' });
    assert.equal(same.json.errCode, -7);
    assert.match(same.json.message, /reqId.*in use/);
    const other = await open(simB, { reqId: 'cluster-req-A' }, AUTH_B);
    assert.equal(other.json.errCode, -7);
    assert.doesNotMatch(other.json.message, /in use/, 'another application learns nothing about the id');
  });

  it('a timed token an admin sets on one worker is checked by every worker', async () => {
    const auth = (u: string) => `Basic ${Buffer.from(`${u}:${u}`).toString('base64')}`;
    const expiredAt = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    // several calls, so whichever worker the primary picks for each, both workers have been the one that set it
    for (let i = 0; i < 4; i++) {
      const token = `cluster-token-${i}`;
      const set = await api(ports['gateway.httpPort'], 'POST', '/strm/timed_token', { tokens: [{ token, expiredAt }] }, auth('ops'));
      assert.equal(set.json.errCode, 0, set.text);
      for (const sim of [simA, simB]) {
        const r = await open(sim, { chanId: 9, timedToken: token }, auth('gov'));
        assert.equal(r.json.errCode, 0, `${sim} with the new token: ${r.text}`);
        assert.equal((await open(sim, { chanId: 9, timedToken: `cluster-token-${i - 1}` }, auth('gov'))).json.errCode, -10, 'the old token is gone everywhere');
        await api(ports['gateway.httpPort'], 'POST', '/strm/close', { reqIds: [r.json.data[0].reqId] }, auth('gov'));
      }
    }
  });

  it("serves HLS of both workers' streams on one keep-alive connection", async () => {
    const ha = await open(simA, { reqId: 'cluster-hls-A', fmt: 1 });
    const hb = await open(simB, { reqId: 'cluster-hls-B', fmt: 1 });
    assert.equal(ha.json.errCode, 0, ha.text);
    assert.equal(hb.json.errCode, 0, hb.text);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<net.Socket>();
    agent.on('free', (s: net.Socket) => sockets.add(s));
    try {
      for (const r of [ha, hb, ha, hb]) {
        const u = new URL(r.json.data[0].playUrl);
        const got = await waitFor(
          'a playlist',
          async () => {
            const x = await api(Number(u.port), 'GET', u.pathname + u.search, undefined, '', agent);
            return x.status === 200 ? x : undefined;
          },
          30_000,
          200,
        );
        assert.match(got.text, /^#EXTM3U/);
        assert.match(got.text, /#EXTINF|#EXT-X-PART/);
      }
      assert.equal(sockets.size, 1, 'the four playlists came over one connection');
      const m = await api(ports['gateway.httpPort'], 'GET', '/metrics');
      assert.match(m.text, /^gw_core_forwarded_total\{kind="request"\} [1-9]/m, 'half of them were forwarded');
    } finally {
      agent.destroy();
    }
  });

  it('a worker killed with SIGKILL: its requests get closed notices, the other worker plays on, it comes back', async () => {
    const before = workerPids(child.pid!);
    assert.equal(before.size, 2);
    process.kill(before.get(1)!, 'SIGKILL');
    const closed = await waitFor(
      "closed notices of the dead worker's requests",
      () => {
        const got = cb.notices.filter((n) => n.act === 'closed' && n.closeCause === 4);
        return got.length >= 2 ? got : undefined;
      },
      20_000,
      50,
    );
    assert.deepEqual(closed.map((n) => n.reqId).sort(), ['cluster-hls-B', 'cluster-req-B']);
    // worker 0's requests are untouched and its stream still plays
    const st = await api(ports['gateway.httpPort'], 'GET', '/strm/status');
    assert.deepEqual((st.json.data as Array<{ reqId: string }>).map((r) => r.reqId).sort(), ['cluster-hls-A', 'cluster-req-A']);
    assert.ok(cb.notices.every((n) => n.reqId !== 'cluster-req-A' || n.act !== 'closed'));
    const a = await playFlv(`http://127.0.0.1:${ports['flv-out.port']}/live/${simA}_1_1.flv?reqId=cluster-req-A&token=tk`);
    assert.ok(a.frames >= 40);

    const after = await workerRestarted(child.pid!, 1, before.get(1));
    assert.equal(after.get(0), before.get(0), 'worker 0 was not restarted');
    const again = await waitFor(
      'an open on the restarted worker',
      async () => {
        const r = await open(simB, { reqId: 'cluster-req-B2' });
        return r.json.errCode === 0 ? r : undefined;
      },
      30_000,
      200,
    );
    await push(simB, again.json.data[0].port);
    const b = await playFlv(again.json.data[0].playUrl);
    assert.equal(b.codec, 'h264');
    // its dead predecessor's ids are free again
    assert.equal((await open(simB, { reqId: 'cluster-req-B' })).json.errCode, 0);
  });

  it('closes across workers, and SIGTERM stops every worker with exit 0', async () => {
    const close = await api(ports['gateway.httpPort'], 'POST', '/strm/close', { reqIds: ['cluster-req-A', 'cluster-req-B2', 'cluster-req-B'] });
    assert.deepEqual(
      close.json.data.map((x: { closed: boolean }) => x.closed),
      [true, true, true],
    );
    await waitFor(
      'closed notices (clientReq)',
      () =>
        ['cluster-req-A', 'cluster-req-B2', 'cluster-req-B'].every((id) => cb.notices.some((n) => n.reqId === id && n.act === 'closed' && n.closeCause === 1)),
      10_000,
      50,
    );
    const workers = [...workerPids(child.pid!).values()];
    // the workers' internal sockets (forwarded requests), a worker killed earlier in this file left its own
    const sockets = path.join(os.tmpdir(), `gw-${child.pid}`);
    assert.ok(
      fs.readdirSync(sockets).some((f) => f.endsWith('.sock')),
      `internal sockets in ${sockets}`,
    );
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    for (const pid of workers) assert.throws(() => process.kill(pid, 0), 'worker gone');
    assert.equal(fs.existsSync(sockets), false, 'the primary removed its internal sockets as it exited');
  });
});
