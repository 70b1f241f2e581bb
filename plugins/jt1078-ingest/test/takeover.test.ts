/**
 * One publisher link per stream (README), on real sockets on loopback: the real terminal pushes from
 * 127.0.0.1, the other sender from 127.0.0.2. What the bus stream sees (its publisher epoch counts every
 * attachPublisher), what the terminal-links service finds, the metrics and the log lines.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import { ManualClock } from '../../../plugin-sdk';
import { TERMINAL_LINKS, type TerminalLinks } from '../../../plugin-sdk';
import type { PluginDefinition } from '../../../plugin-sdk';
import type { MediaBus } from '../../../plugin-sdk';
import type { Notice } from '../../../plugin-sdk';
import { capturePackets, reencode } from './helpers';
import { waitFor } from '../../../test/support/until';

const REAL = 'jt1078/glaciall-cif-h264-2013.bin';
const OTHER = 'jt1078/xunilcyl-d1-h264-2013.bin';
const SIM = '13800138000';
const STREAM = `${SIM}_1_1`;
const REFUSED_LINE = 'another link pushes this stream: refused';

/** A capture as this SIM and channel, looped without end (seq and timestamps continue across passes). */
function* looped(file: string, sim: string, channel: number): Generator<Buffer> {
  const packets = capturePackets(file);
  const span = packets[packets.length - 1].timestamp - packets[0].timestamp + 40;
  for (let pass = 0; ; pass++) {
    for (const p of packets) yield reencode(p, { sim, channel, seq: (p.seq + pass * packets.length) & 0xffff, timestamp: p.timestamp + pass * span });
  }
}

/** A terminal (or an impostor): pushes packets paced (a batch, a pause) from a chosen local address until stopped. */
class Sender {
  sent = 0;
  private running: Promise<void> | undefined;
  private stopped = false;
  closedByPeer = false;
  private constructor(
    readonly transport: 'tcp' | 'udp',
    private readonly write: (bufs: Buffer[]) => Promise<void>,
    private shut: (() => Promise<void>) | undefined,
    readonly localPort: number,
  ) {}

  static async tcp(port: number, from: string): Promise<Sender> {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
    s.on('error', () => undefined);
    await once(s, 'connect');
    const sender: Sender = new Sender(
      'tcp',
      async (bufs) => {
        if (s.destroyed) return;
        s.cork();
        for (const b of bufs) s.write(b);
        s.uncork();
        if (s.writableNeedDrain) {
          await new Promise<void>((resolve) => {
            const done = (): void => {
              s.off('drain', done);
              s.off('close', done);
              resolve();
            };
            s.on('drain', done);
            s.on('close', done);
          });
        }
      },
      async () => {
        if (s.destroyed) return;
        const closed = once(s, 'close');
        s.end();
        await closed;
      },
      s.localPort!,
    );
    s.on('close', () => {
      if (!sender.stopped) sender.closedByPeer = true;
    });
    return sender;
  }

  static async udp(port: number, from: string): Promise<Sender> {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(0, from, () => resolve());
    });
    return new Sender(
      'udp',
      async (bufs) => {
        await Promise.all(bufs.map((d) => new Promise<void>((resolve) => s.send(d, port, '127.0.0.1', () => resolve()))));
      },
      () => new Promise<void>((resolve) => s.close(() => resolve())),
      s.address().port,
    );
  }

  /** pushes `packets` (all of them, or until stopped), `batch` every `pauseMs` */
  push(packets: Iterator<Buffer>, o: { count?: number; batch?: number; pauseMs?: number } = {}): Promise<void> {
    const batch = o.batch ?? 16;
    const count = o.count ?? Infinity;
    this.stopped = false;
    this.running = (async () => {
      let n = 0;
      while (!this.stopped && n < count && !this.closedByPeer) {
        const bufs: Buffer[] = [];
        for (let k = 0; k < batch && n < count; k++, n++) bufs.push(packets.next().value as Buffer);
        await this.write(bufs);
        this.sent += bufs.length;
        await sleep(o.pauseMs ?? 4);
      }
    })();
    return this.running;
  }

  /** stops pushing; the connection stays open */
  async pause(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  async close(): Promise<void> {
    await this.pause();
    if (this.shut === undefined) return;
    const shut = this.shut;
    this.shut = undefined;
    await shut();
  }
}

interface Probe {
  def: PluginDefinition<object>;
  links(): TerminalLinks;
  bus(): MediaBus;
  notices: Notice[];
}

function probePlugin(): Probe {
  let svc: TerminalLinks | undefined;
  let bus: MediaBus | undefined;
  const notices: Notice[] = [];
  const def: PluginDefinition<object> = {
    name: 'takeover-probe',
    needs: [TERMINAL_LINKS],
    setup(ctx) {
      svc = ctx.services.get(TERMINAL_LINKS);
      bus = ctx.bus;
      ctx.notices.on((n) => notices.push(n));
      ctx.sessions.registerOutput({ name: 'takeover-probe', fmt: 0, schemes: ['http', 'ws'], playUrl: (a) => `http://127.0.0.1:1/${a.streamName}` });
    },
  };
  return { def, links: () => svc as TerminalLinks, bus: () => bus as MediaBus, notices };
}

describe('jt1078 one publisher link per stream', function () {
  this.timeout(30_000);
  let gw: TestGateway | undefined;
  let probe: Probe;
  const senders: Sender[] = [];

  async function boot(config: Record<string, unknown>, clock?: ManualClock): Promise<TestGateway> {
    probe = probePlugin();
    gw = await startTestGateway({
      captureLogs: true,
      clock,
      plugins: [
        { name: 'jt1078-ingest', config: { udp: true, disconnectGraceMs: 1000, unknownGraceMs: 30_000, ...config } },
        { name: 'takeover-probe', def: probe.def },
      ],
    });
    return gw;
  }
  afterEach(async () => {
    for (const s of senders.splice(0)) await s.close();
    await gw?.stop();
    gw = undefined;
  });

  async function open(g: TestGateway, sim: string, chanId: number): Promise<string> {
    const r = await g.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: sim, chanId });
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    return r.json.data[0].reqId as string;
  }
  async function sender(g: TestGateway, transport: 'tcp' | 'udp', from: string): Promise<Sender> {
    const port = g.ports[`jt1078-ingest.livePort2013${transport === 'udp' ? ':udp' : ''}`];
    const s = transport === 'tcp' ? await Sender.tcp(port, from) : await Sender.udp(port, from);
    senders.push(s);
    return s;
  }
  async function metricsText(g: TestGateway): Promise<string> {
    return (await fetch(`${g.baseUrl}/metrics`)).text();
  }
  async function metric(g: TestGateway, name: string, labels: Record<string, string> = {}): Promise<number> {
    let sum = 0;
    for (const line of (await metricsText(g)).split('\n')) {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (m && m[1] === name && Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
    }
    return sum;
  }
  const epoch = (): number | undefined => probe.bus().get(STREAM)?.epoch;
  const publisherRemote = (): string | undefined => probe.links().find(SIM, 1, 'live')?.remote;
  const videoFrames = (): number => probe.bus().get(STREAM)?.stats().videoFrames ?? 0;

  it('a link silent past the grace is taken over; the old link coming back is refused (no flip back)', async () => {
    const g = await boot({});
    await open(g, SIM, 1);
    const a = await sender(g, 'tcp', '127.0.0.1');
    const real = looped(REAL, SIM, 1);
    const pushingA = a.push(real, { count: 600, batch: 32, pauseMs: 5 });
    await waitFor('the terminal publishing', () => videoFrames() > 0);
    const b = await sender(g, 'tcp', '127.0.0.2');
    void b.push(looped(OTHER, SIM, 1));
    await pushingA;
    assert.equal(epoch(), 1, 'one publisher while the terminal is alive');
    assert.equal(publisherRemote(), `127.0.0.1:${a.localPort}`);
    const refusedWhileAlive = await metric(g, 'gw_jt1078_ingest_takeovers_refused_total', { listener: 'live2013', transport: 'tcp' });
    assert.ok(refusedWhileAlive > 0, "the other link's packets are counted");

    // a's connection stays open, but nothing comes for the channel: past the grace b takes over
    const silentFrom = Date.now();
    await waitFor('b publishing', () => publisherRemote() === `127.0.0.2:${b.localPort}`);
    assert.ok(Date.now() - silentFrom >= 900, `not within the grace (${Date.now() - silentFrom} ms)`);
    assert.equal(epoch(), 2);
    assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total', { listener: 'live2013', transport: 'tcp', reason: 'silent' }), 1);

    // a pushes again: now b is the live publisher, so a is refused and the stream does not flip back
    const refusedBefore = await metric(g, 'gw_jt1078_ingest_takeovers_refused_total', { transport: 'tcp' });
    await a.push(real, { count: 300, batch: 32, pauseMs: 5 });
    await sleep(100);
    assert.equal(epoch(), 2, 'no flip back');
    assert.equal(publisherRemote(), `127.0.0.2:${b.localPort}`);
    assert.ok((await metric(g, 'gw_jt1078_ingest_takeovers_refused_total', { transport: 'tcp' })) >= refusedBefore + 300);
    assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total'), 1);
    assert.equal(g.logs.filter((l) => l.msg === 'terminal pushing').length, 2, 'a and b attached once each');
  });

  it('the refused link cannot disturb the publisher; its unknown-channel grace still closes it; one log line per link', async () => {
    const g = await boot({ unknownGraceMs: 600 });
    const req = await open(g, SIM, 1);
    await open(g, SIM, 2);
    const a = await sender(g, 'tcp', '127.0.0.1');
    const pushingA = a.push(looped(REAL, SIM, 1), { count: 2000, batch: 32, pauseMs: 5 });
    await waitFor('the terminal publishing', () => videoFrames() > 0);
    const framesAtStart = videoFrames();
    const terminalLink = probe.links().find(SIM, 1, 'live');
    // b carries nothing but the live channel; c also pushes channel 2, which nobody else does
    const b = await sender(g, 'tcp', '127.0.0.2');
    const c = await sender(g, 'udp', '127.0.0.2');
    void b.push(looped(OTHER, SIM, 1));
    const mixed = (function* () {
      const one = looped(OTHER, SIM, 1);
      const two = looped(OTHER, SIM, 2);
      for (;;) {
        yield one.next().value as Buffer;
        yield two.next().value as Buffer;
      }
    })();
    void c.push(mixed);
    await waitFor('b closed by the gateway', () => b.closedByPeer, 5000);
    await pushingA;
    assert.equal(epoch(), 1, 'one publisher all along');
    assert.equal(probe.links().find(SIM, 1, 'live'), terminalLink, "the terminal's link is still the one found");
    assert.equal(terminalLink!.closed, false);
    assert.ok(videoFrames() > framesAtStart + 500, "the terminal's frames kept flowing");
    assert.equal(probe.links().find(SIM, 2, 'live')?.remote, `127.0.0.2:${c.localPort}`, 'c publishes the channel it alone pushes');
    assert.ok(await g.api('GET', '/strm/status').then((r) => (r.json.data as Array<{ reqId: string }>).some((x) => x.reqId === req)));
    assert.equal(
      probe.notices.some((n) => n.payload.act === 'closed'),
      false,
    );

    const refusedLines = g.logs.filter((l) => l.msg === REFUSED_LINE);
    assert.deepEqual(
      refusedLines.map((l) => String(l.link).split(' ')[1]).sort(),
      [`127.0.0.2:${b.localPort}`, `127.0.0.2:${c.localPort}`].sort(),
      'one line per refused link, not one per packet',
    );
    assert.ok(refusedLines.every((l) => l.stream === STREAM && l.level === 40));
    const closed = g.logs.find((l) => l.msg === 'terminal link closed' && String(l.link).includes(`127.0.0.2:${b.localPort}`));
    assert.ok(closed, "b's close is logged");
    assert.equal(closed.reason, 'no opened channel within the grace period');
    assert.ok(Number(closed.refused) > 1, 'with the count of its refused packets');
    assert.equal(closed.refusedNotLogged, Number(closed.refused) - 1);
    // no SIM or stream name in the new series' labels
    const lines = (await metricsText(g)).split('\n').filter((l) => /^gw_jt1078_ingest_takeovers_/.test(l));
    assert.ok(lines.length >= 2, lines.join('\n'));
    assert.ok(
      lines.every((l) => !l.includes(SIM)),
      lines.join('\n'),
    );
  });

  it('pinFirstAddress: another address is refused even past the grace; the first address (any port, any transport) resumes', async () => {
    const g = await boot({ pinFirstAddress: true, udpIdleMs: 1000 });
    const req = await open(g, SIM, 1);
    const a = await sender(g, 'tcp', '127.0.0.1');
    await a.push(looped(REAL, SIM, 1), { count: 400, batch: 32, pauseMs: 5 });
    await waitFor('the terminal publishing', () => videoFrames() > 0);
    const b = await sender(g, 'tcp', '127.0.0.2');
    void b.push(looped(OTHER, SIM, 1));
    // a stays open and silent well past the grace: b is still refused
    await sleep(1500);
    assert.equal(publisherRemote(), `127.0.0.1:${a.localPort}`);
    assert.equal(epoch(), 1);
    // the terminal again from its address, on a new connection (a new port): it takes over its own silent link
    const a2 = await sender(g, 'tcp', '127.0.0.1');
    await a2.push(looped(REAL, SIM, 1), { count: 400, batch: 32, pauseMs: 5 });
    await waitFor('a2 publishing', () => publisherRemote() === `127.0.0.1:${a2.localPort}`);
    assert.equal(epoch(), 2);
    // it goes; within the grace it comes back over UDP, still from its address
    await a2.close();
    await a.close();
    await sleep(200);
    const u = await sender(g, 'udp', '127.0.0.1');
    await u.push(looped(REAL, SIM, 1), { count: 400, batch: 16, pauseMs: 4 });
    await waitFor('the UDP source publishing', () => probe.links().find(SIM, 1, 'live')?.transport === 'udp' && publisherRemote());
    assert.equal(publisherRemote(), `127.0.0.1:${u.localPort}`);
    assert.equal(await metric(g, 'gw_jt1078_ingest_reconnects_total'), 1);
    // it goes for good: b, still pushing, never gets the stream, which closes at the end of the grace
    await u.close();
    await waitFor('the request closed', () => probe.notices.find((n) => n.payload.reqId === req && n.payload.act === 'closed'), 10_000);
    const n = probe.notices.find((x) => x.payload.reqId === req && x.payload.act === 'closed')!;
    assert.equal(n.payload.closeCause, 2);
    assert.equal(epoch(), undefined, 'the stream is gone');
    assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total', { reason: 'gone' }), 0);
    assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total', { reason: 'silent' }), 1, 'a2 over a');
    const refusedLine = g.logs.find((l) => l.msg === REFUSED_LINE);
    assert.equal(refusedLine?.why, 'pinned to another address');
  });

  it("without pinning, a closed publisher's stream waits out the grace for a link from another, refused, address", async () => {
    const g = await boot({});
    const req = await open(g, SIM, 1);
    const a = await sender(g, 'tcp', '127.0.0.1');
    const pushingA = a.push(looped(REAL, SIM, 1), { count: 600, batch: 32, pauseMs: 5 });
    await waitFor('the terminal publishing', () => videoFrames() > 0);
    const b = await sender(g, 'udp', '127.0.0.2');
    void b.push(looped(OTHER, SIM, 1));
    await pushingA;
    await a.close();
    const gone = Date.now();
    await waitFor('b publishing', () => publisherRemote() === `127.0.0.2:${b.localPort}`);
    assert.ok(Date.now() - gone >= 900, `b waited for the grace (${Date.now() - gone} ms)`);
    assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total', { listener: 'live2013', transport: 'udp', reason: 'gone' }), 1);
    assert.equal(await metric(g, 'gw_jt1078_ingest_disconnects_total'), 0);
    assert.equal(
      probe.notices.some((n) => n.payload.reqId === req && n.payload.act === 'closed'),
      false,
    );
  });
  /**
   * On the gateway's clock (manual here): the terminal's last packet at T, its link closed at T+400, the disconnect
   * grace ends at T+1400. A refused sender that pushed within the grace before that moment gets the stream then;
   * one that did not leaves the stream to close.
   */
  for (const lastPush of [800, 200]) {
    const handed = lastPush === 800;
    it(`the grace ends with the terminal away: ${handed ? 'the sender still pushing takes over' : 'a sender silent since the grace began does not; the stream closes'}`, async () => {
      const clock = new ManualClock(Date.now());
      const g = await boot({}, clock);
      const req = await open(g, SIM, 1);
      const refused = () => metric(g, 'gw_jt1078_ingest_takeovers_refused_total');
      const a = await sender(g, 'tcp', '127.0.0.1');
      await a.push(looped(REAL, SIM, 1), { count: 300, batch: 32, pauseMs: 2 });
      await waitFor('the terminal publishing', () => videoFrames() > 0);
      const b = await sender(g, 'tcp', '127.0.0.2');
      const other = looped(OTHER, SIM, 1);
      await b.push(other, { count: 50 });
      await waitFor('b refused', async () => (await refused()) === 50);
      clock.advance(400);
      await a.close();
      await waitFor('the terminal gone', () => probe.links().find(SIM, 1, 'live') === undefined);
      clock.advance(lastPush - 400);
      await b.push(other, { count: 20 });
      await waitFor('b refused while the terminal may come back', async () => (await refused()) === 70);
      clock.advance(1400 - lastPush - 1);
      assert.equal(epoch(), 1);
      clock.advance(1);
      if (handed) {
        assert.equal(publisherRemote(), `127.0.0.2:${b.localPort}`, 'b publishes from the end of the grace');
        assert.equal(epoch(), 2);
        assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total', { listener: 'live2013', transport: 'tcp', reason: 'gone' }), 1);
        await b.push(other, { count: 50 });
        await waitFor("b's packets on the stream", async () => (await metric(g, 'gw_jt1078_ingest_stream_packets', { stream: STREAM })) === 50);
        assert.equal(await refused(), 70, 'b is the publisher: nothing more refused');
        assert.equal(
          probe.notices.some((n) => n.payload.act === 'closed'),
          false,
        );
      } else {
        const closed = await waitFor('the request closed', () => probe.notices.find((n) => n.payload.reqId === req && n.payload.act === 'closed'));
        assert.equal(closed.payload.closeCause, 2);
        assert.equal(await metric(g, 'gw_jt1078_ingest_takeovers_accepted_total'), 0);
        assert.equal(await metric(g, 'gw_jt1078_ingest_disconnects_total'), 1);
      }
    });
  }
});
