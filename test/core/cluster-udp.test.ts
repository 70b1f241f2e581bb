/**
 * Several workers, for terminals that push over UDP: the real gateway with two workers. A UDP port of a
 * multi-worker gateway is the primary's socket; once the primary has routed a terminal's datagram to the worker that
 * owns its channel, that worker binds a socket of its own to the port, connected to the terminal
 * (gateway.udpPeerSockets, core/cluster/udp-peers.ts), and the terminal's datagrams and what is sent to it skip the
 * primary. Checked here with real datagrams, real players (ffprobe decodes what they got) and `ss` for who holds which
 * socket: video and talk on a peer socket of the owner, a terminal whose one source port carries channels of both
 * workers, a worker killed under a pushing terminal, and `udpPeerSockets: false`.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as dgram from 'node:dgram';
import { simsOfWorkers, startClusterGateway, workerPids, workerRestarted, type ClusterGateway } from '../support/cluster-gateway';
import { Client, dominantHz, pcmBytes, terminalPackets, tone } from '../../plugins/intercom/test/helpers';
import { TalkReceiver } from '../../plugins/jt1078-ingest/tools/talk-receiver';
import { HttpFlvPlayer, capture, encodeLazily, ffprobe, loopedPackets, metricSum, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A terminal on one UDP socket: sends datagrams at a steady pace in the background until stopped. */
class UdpTerminal {
  readonly received: Buffer[] = [];
  readonly fromPorts = new Set<number>();
  sent = 0;
  private stopped = false;
  private constructor(readonly sock: dgram.Socket) {
    sock.on('message', (m, r) => {
      this.received.push(m);
      this.fromPorts.add(r.port);
    });
    sock.on('error', () => undefined);
  }

  static async open(): Promise<UdpTerminal> {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', () => resolve()));
    return new UdpTerminal(s);
  }

  get port(): number {
    return this.sock.address().port;
  }

  /** sends `datagrams` to `port`, 8 every 4 ms (a 1 Mbit/s terminal's pace), until they run out or stop() */
  push(port: number, datagrams: Iterable<Buffer>): Promise<void> {
    return (async () => {
      let n = 0;
      for (const d of datagrams) {
        if (this.stopped) return;
        this.sock.send(d, port, '127.0.0.1');
        this.sent++;
        if (++n % 8 === 0) await sleep(4);
      }
    })();
  }

  close(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.sock.close();
  }
}

/** pid holding the UDP socket bound to `localPort` and connected to 127.0.0.1:`peerPort`, from `ss` */
function peerSocketOwner(localPort: number, peerPort: number): number | undefined {
  const out = execFileSync('ss', ['-uanpH'], { encoding: 'utf8' });
  for (const line of out.split('\n')) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 6 || !cols[3].endsWith(`:${localPort}`) || cols[4] !== `127.0.0.1:${peerPort}`) continue;
    const m = /pid=(\d+)/.exec(line);
    if (m) return Number(m[1]);
  }
  return undefined;
}

const open = (gw: ClusterGateway, sim: string, over: Record<string, unknown> = {}) =>
  gw.api('POST', '/strm/open', { user: { token: 'tk' }, typ: 'live', simNo: sim, chanId: 1, scheme: 'http', ...over });
const video = (sim: string, passes = 20) => encodeLazily(loopedPackets(capture(CAPTURE), passes), { sim, channel: 1 });

/** opens channel 1 of the first SIM from `firstSim` up that worker 1 owns, and starts a UDP terminal pushing its video */
async function pushingToWorker1(gw: ClusterGateway, firstSim: number, passes: number, over: Record<string, unknown> = {}) {
  const sim = simsOfWorkers(firstSim, 1, 2)[1];
  const r = await open(gw, sim, over);
  assert.equal(r.json.errCode, 0, r.text);
  const port = r.json.data[0].port as number;
  const t = await UdpTerminal.open();
  void t.push(port, video(sim, passes));
  return { sim, port, t, playUrl: r.json.data[0].playUrl as string };
}

async function playsVideo(url: string, frames = 100): Promise<void> {
  const player = await HttpFlvPlayer.connect(url);
  try {
    await waitFor(`${frames} video frames at ${url}`, () => player.videoFrames() >= frames, 30_000, 50);
  } finally {
    player.close();
  }
  const p = ffprobe(player.data(), 'flv');
  assert.equal(p.codec, 'h264');
  assert.ok(p.frames >= frames, `decoded ${p.frames}`);
}

describe('UDP terminals with two workers: peer sockets in the owner (real process)', function () {
  this.timeout(120_000);
  let gw: ClusterGateway;
  const terminals: UdpTerminal[] = [];

  before(async () => {
    gw = await startClusterGateway('cluster-udp', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
      { name: 'intercom', config: { maxBufferMs: 2000 } },
    ]);
  });

  after(() => {
    gw?.stop();
    for (const t of terminals) t.close();
  });

  const terminal = async () => {
    const t = await UdpTerminal.open();
    terminals.push(t);
    return t;
  };

  it("a terminal's datagrams reach its channel's worker on a socket of that worker's, connected to the terminal", async () => {
    const { port, t, playUrl } = await pushingToWorker1(gw, 13600000100, 60, { reqId: 'udp-peer-video' });
    terminals.push(t);
    await playsVideo(playUrl);
    const worker1 = workerPids(gw.child.pid!).get(1);
    assert.equal(peerSocketOwner(port, t.port), worker1, 'worker 1 holds a socket on the push port connected to the terminal');
    const m = (await gw.api('GET', '/metrics')).text;
    assert.equal(metricSum(m, 'gw_core_udp_peer_sockets'), 1, m);
    // the first datagrams came through the primary (until the socket connected); from then on, all of them straight
    const direct = async () => metricSum((await gw.api('GET', '/metrics')).text, 'gw_core_udp_peer_socket_datagrams');
    const [s1, d1] = [t.sent, await direct()];
    await sleep(500);
    const [s2, d2] = [t.sent, await direct()];
    assert.ok(s2 - s1 > 200, `the terminal still sends (${s2 - s1} datagrams in 0.5 s)`);
    assert.ok(d2 - d1 >= (s2 - s1) * 0.9, `${d2 - d1} of the ${s2 - s1} datagrams sent meanwhile came straight to the worker`);
    t.close();
    await gw.api('POST', '/strm/close', { reqIds: ['udp-peer-video'] });
  });

  it("talk to a UDP terminal leaves from the port it pushes to, through its worker's peer socket", async () => {
    const sim = simsOfWorkers(13600000200, 1, 2)[1];
    const r = await open(gw, sim, { dataTyp: 2, reqId: 'udp-peer-talk' });
    assert.equal(r.json.errCode, 0, r.text);
    const port = r.json.data[0].port as number;
    const t = await terminal();
    const receiver = new TalkReceiver({ layout: '2013', keepSamples: 8000 * 30 });
    t.sock.on('message', (m) => receiver.push(m));
    // the terminal's own audio, looped, keeps the talk stream live
    const { packets } = terminalPackets({ sim, channel: 1, layout: '2013' });
    void t.push(
      port,
      (function* () {
        for (let i = 0; i < 40; i++) yield* packets;
      })(),
    );
    await waitFor('the talk stream ready', async () => (await gw.api('GET', '/strm/status?reqId=udp-peer-talk')).json.data[0]?.ready, 20_000, 100);
    await waitFor('the peer socket in worker 1', () => peerSocketOwner(port, t.port) === workerPids(gw.child.pid!).get(1), 10_000, 50);
    const ta = await Client.open(r.json.data[0].taUrl);
    for (let at = 0; at < 8000; at += 160) ta.send(pcmBytes(tone(700, 160, at)));
    await waitFor('a second of talk at the terminal', () => receiver.report().frames >= 50, 15_000, 50);
    assert.equal(dominantHz(receiver.pcm).hz, 700);
    assert.deepEqual([...t.fromPorts], [port], 'every datagram came from the push port');
    ta.ws.close();
    await ta.closedP;
    t.close();
    await gw.api('POST', '/strm/close', { reqIds: ['udp-peer-talk'] });
  });

  it('one source port carrying channels of both workers: each channel reaches its owner, and the port stays on the primary', async () => {
    const [simA, simB] = simsOfWorkers(13600000300, 1, 2);
    const a = await open(gw, simA, { reqId: 'udp-shared-A' });
    const b = await open(gw, simB, { reqId: 'udp-shared-B' });
    assert.equal(a.json.errCode, 0, a.text);
    assert.equal(b.json.errCode, 0, b.text);
    const before = metricSum((await gw.api('GET', '/metrics')).text, 'gw_core_udp_peer_socket_events_total', { event: 'shared' });
    const t = await terminal();
    // the two channels' packets interleaved on one socket, as a terminal that multiplexes its channels sends them
    const both = (function* () {
      const [x, y] = [video(simA), video(simB)];
      for (;;) {
        const p = x.next();
        const q = y.next();
        if (p.done || q.done) return;
        yield p.value;
        yield q.value;
      }
    })();
    void t.push(a.json.data[0].port, both);
    await Promise.all([playsVideo(a.json.data[0].playUrl), playsVideo(b.json.data[0].playUrl)]);
    const m = (await gw.api('GET', '/metrics')).text;
    assert.ok(metricSum(m, 'gw_core_udp_peer_socket_events_total', { event: 'shared' }) > before, m);
    assert.equal(peerSocketOwner(a.json.data[0].port, t.port), undefined, 'no worker keeps a socket for a shared port');
    t.close();
    await gw.api('POST', '/strm/close', { reqIds: ['udp-shared-A', 'udp-shared-B'] });
  });

  it("a worker killed under a pushing UDP terminal: the terminal is nobody's until its datagrams or an open place it again, and its worker takes its datagrams", async () => {
    const { sim, port, t, playUrl } = await pushingToWorker1(gw, 13600000400, 60, { reqId: 'udp-kill' });
    terminals.push(t);
    await playsVideo(playUrl, 20);
    const pids = workerPids(gw.child.pid!);
    assert.equal(peerSocketOwner(port, t.port), pids.get(1));
    process.kill(pids.get(1)!, 'SIGKILL');
    await workerRestarted(gw.child.pid!, 1, pids.get(1));
    const again = await waitFor(
      'an open on the restarted worker',
      async () => {
        const x = await open(gw, sim, { reqId: 'udp-kill-2' });
        return x.json.errCode === 0 ? x : undefined;
      },
      30_000,
      200,
    );
    await playsVideo(again.json.data[0].playUrl, 40);
    // claimed, not hashed: while worker 1 restarted, the terminal's datagrams placed it on worker 0, where it opens
    const opened = gw.lines<{ worker: number; reqId?: string }>('"msg":"request opened"').find((l) => l.reqId === 'udp-kill-2');
    assert.ok(opened, gw.log());
    assert.equal(peerSocketOwner(port, t.port), workerPids(gw.child.pid!).get(opened.worker), 'the owner holds the peer socket');
    t.close();
    await gw.api('POST', '/strm/close', { reqIds: ['udp-kill-2'] });
  });
});

describe('UDP terminals with two workers and udpPeerSockets: false (real process)', function () {
  this.timeout(60_000);
  let gw: ClusterGateway;

  before(async () => {
    gw = await startClusterGateway('cluster-udp-off', { workers: 2, udpPeerSockets: false }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
    ]);
  });

  after(() => gw?.stop());

  it('every datagram crosses the primary, and no other socket may bind the port', async () => {
    const { port, t, playUrl } = await pushingToWorker1(gw, 13600000500, 20);
    try {
      await playsVideo(playUrl);
      assert.equal(peerSocketOwner(port, t.port), undefined);
      assert.doesNotMatch((await gw.api('GET', '/metrics')).text, /^gw_core_udp_peer_sockets /m);
    } finally {
      t.close();
    }
    // without SO_REUSEADDR on the primary's socket, another process's socket asking for it is refused
    const intruder = dgram.createSocket({ type: 'udp4', reuseAddr: true });
    const err = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
      intruder.once('error', resolve);
      intruder.bind(port, '127.0.0.1', () => resolve(undefined));
    });
    intruder.close();
    assert.equal(err?.code, 'EADDRINUSE');
  });
});
