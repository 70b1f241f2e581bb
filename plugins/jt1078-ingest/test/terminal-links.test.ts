/**
 * The terminal-links service end to end: a gateway (test kit) with jt1078-ingest and a plugin that needs the
 * service, a fake terminal on a real TCP connection or UDP socket on loopback pushing a real capture, and the
 * terminal's side reading what the gateway sends back with the plugin's own parser.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { once } from 'node:events';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import { TERMINAL_LINKS, type TerminalLink, type TerminalLinks } from '../../../plugin-sdk';
import type { PluginDefinition } from '../../../plugin-sdk';
import type { MediaBus } from '../../../plugin-sdk';
import type { AudioTrackInfo } from '../../../plugin-sdk';
import * as fs from 'node:fs';
import { fixturePath } from '../../../test/support/paths';
import type { StreamTyp } from '../../../plugin-sdk';
import { SUB_MARK, type Jt1078Layout, type Jt1078Packet } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { encodePacket } from '../src/packer';
import { addHisiliconHeader } from '../src/audio';
import { capturePackets, fieldsOf } from './helpers';
import { waitFor } from '../../../test/support/until';

const GOJT = 'jt1078/gojt808-d1-h264-g711a-2013.bin';

interface Probe {
  def: PluginDefinition<object>;
  links(): TerminalLinks;
  bus(): MediaBus;
  attached: Array<{ normSim: string; chanId: number; typ: StreamTyp; link: TerminalLink }>;
}

/** A plugin that needs the service (and serves fmt 0 so opens succeed). */
function probePlugin(): Probe {
  let svc: TerminalLinks | undefined;
  let bus: MediaBus | undefined;
  const attached: Probe['attached'] = [];
  const def: PluginDefinition<object> = {
    name: 'links-probe',
    needs: [TERMINAL_LINKS],
    setup(ctx) {
      svc = ctx.services.get(TERMINAL_LINKS);
      bus = ctx.bus;
      svc.onAttach((e) => attached.push(e));
      ctx.sessions.registerOutput({ name: 'links-probe', fmt: 0, schemes: ['http', 'ws'], playUrl: (a) => `http://127.0.0.1:1/${a.streamName}` });
    },
  };
  return { def, links: () => svc as TerminalLinks, bus: () => bus as MediaBus, attached };
}

/** The capture as one terminal: its packets re-encoded with this SIM, channel and layout (audio optionally framed). */
function terminalPackets(o: { sim: string; channel: number; layout: Jt1078Layout; hisilicon?: boolean }): Buffer[] {
  return capturePackets(GOJT).map((p) =>
    encodePacket(fieldsOf(p, { sim: o.sim, channel: o.channel, layout: o.layout }), o.hisilicon && p.dataType === 3 ? addHisiliconHeader(p.body) : p.body),
  );
}

const payloadOf = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

describe('jt1078 terminal-links service', function () {
  this.timeout(30000);
  let gw: TestGateway;
  let probe: Probe;

  async function boot(config: Record<string, unknown> = {}): Promise<void> {
    await gw?.stop();
    probe = probePlugin();
    gw = await startTestGateway({
      plugins: [
        { name: 'jt1078-ingest', config: { udp: true, downlinkMaxPendingBytes: 4096, ...config } },
        { name: 'links-probe', def: probe.def },
      ],
    });
  }
  beforeEach(() => boot());
  afterEach(async () => {
    await gw.stop();
  });

  async function open(simNo: string, chanId: number): Promise<void> {
    const r = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo, chanId });
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
  }

  it("TCP, 2013: finds the link pushing a channel and sends G.711A down it as the terminal's own packets", async () => {
    await open('156987000796', 1);
    const received: Jt1078Packet[] = [];
    const parser = new Jt1078Parser((p) => received.push(p), { layout: '2019' });
    const sock = net.connect(gw.ports['jt1078-ingest.livePort2013'], '127.0.0.1');
    await once(sock, 'connect');
    /** once set, bytes go here instead of to the parser */
    let tail: Buffer[] | undefined;
    sock.on('data', (d) => (tail ? tail.push(d) : parser.push(d)));
    try {
      assert.equal(probe.links().find('156987000796', 1, 'live'), undefined, 'nothing pushes yet');
      for (const b of terminalPackets({ sim: '156987000796', channel: 1, layout: '2013' })) sock.write(b);
      const link = await waitFor('the link', () => {
        const l = probe.links().find('0156987000796', 1, 'live'); // any SIM spelling: normalised
        return l && l.layout === '2013' && l;
      });
      assert.equal(probe.links().find('156987000796', 1, 'replay'), undefined);
      assert.equal(probe.links().find('156987000796', 2, 'live'), undefined);
      assert.equal(link.transport, 'tcp');
      assert.equal(link.remote, `127.0.0.1:${sock.localPort}`);
      assert.deepEqual(
        probe.attached.map((e) => [e.normSim, e.chanId, e.typ, e.link === link]),
        [['156987000796', 1, 'live', true]],
      );
      assert.equal(link.hisiliconAudio, false);

      const frames = [payloadOf(160, 1), payloadOf(160, 2), payloadOf(2000, 3)];
      frames.forEach((payload, i) => assert.equal(link.sendAudio('156987000796', 1, { codec: 'g711a', payload, timestamp: 1_700_000_000_000 + 20 * i }), true));
      const raw = encodePacket(
        { layout: '2013', sim: '156987000796', channel: 1, pt: 6, marker: true, seq: 999, dataType: 3, subMark: 0, timestamp: 5 },
        payloadOf(10, 9),
      );
      assert.equal(link.write(raw), true);
      await waitFor('6 packets back', () => received.length >= 6);
      assert.equal(parser.layout, '2013');
      assert.ok(received.every((p) => p.layout === '2013' && p.sim === '156987000796' && p.channel === 1 && p.pt === 6 && p.dataType === 3));
      // the link's own sequence numbers, from 0, across frames; the big frame split into 950-byte subpackages
      assert.deepEqual(
        received.map((p) => p.seq),
        [0, 1, 2, 3, 4, 999],
      );
      assert.deepEqual(
        received.map((p) => p.timestamp),
        [1_700_000_000_000, 1_700_000_000_020, 1_700_000_000_040, 1_700_000_000_040, 1_700_000_000_040, 5],
      );
      assert.deepEqual(
        received.map((p) => p.subMark),
        [SUB_MARK.ATOMIC, SUB_MARK.ATOMIC, SUB_MARK.FIRST, SUB_MARK.MIDDLE, SUB_MARK.LAST, SUB_MARK.ATOMIC],
      );
      assert.deepEqual(
        received.map((p) => p.marker),
        [true, true, false, false, true, true],
      );
      assert.ok(received[0].body.equals(frames[0]) && received[1].body.equals(frames[1]), 'no HiSilicon header: the terminal sends none');
      assert.ok(Buffer.concat(received.slice(2, 5).map((p) => p.body)).equals(frames[2]));
      assert.ok(received[5].body.equals(payloadOf(10, 9)));
      // the frame's layout wins over the link's (read as a 2019 terminal reads it: one lone 2019 audio packet is also a
      // valid 2013 video packet, byte for byte, so only the reader's own layout tells)
      const t: Buffer[] = (tail = []);
      assert.equal(link.sendAudio('156987000796', 1, { codec: 'g711a', payload: frames[0], timestamp: 7, layout: '2019' }), true);
      await waitFor('a 2019 packet', () => Buffer.concat(t).length >= 30 + 160);
      const again: Jt1078Packet[] = [];
      const fresh = new Jt1078Parser((p) => again.push(p), { layout: '2019' });
      fresh.push(Buffer.concat(t));
      fresh.end();
      assert.equal(again.length, 1);
      assert.deepEqual([again[0].layout, again[0].sim, again[0].channel, again[0].seq, again[0].timestamp], ['2019', '156987000796', 1, 5, 7]);
      assert.ok(again[0].body.equals(frames[0]));
      // what cannot be packed is the caller's bug, not a refusal
      assert.throws(() => link.sendAudio('156987000796', 1, { codec: 'unknown', payload: frames[0], timestamp: 0 }), /no JT\/T 1078 payload type/);
      assert.throws(() => link.sendAudio('156987000796', 1, { codec: 'g711a', payload: frames[0], timestamp: -1 }), /timestamp/);
    } finally {
      sock.destroy();
    }
  });

  it('TCP: refuses while the terminal does not read (backlog over the cap), then takes audio again; refuses once closed', async () => {
    await open('156987000796', 1);
    const sock = net.connect(gw.ports['jt1078-ingest.livePort2013'], '127.0.0.1');
    await once(sock, 'connect');
    let got = 0;
    sock.on('data', (d) => {
      got += d.length;
    });
    for (const b of terminalPackets({ sim: '156987000796', channel: 1, layout: '2013' })) sock.write(b);
    const link = await waitFor('the link', () => probe.links().find('156987000796', 1, 'live'));
    const closed: string[] = [];
    link.onClose((why) => closed.push(why));
    sock.pause();
    // far more than the kernel's socket buffers hold: the rest stays in the link's socket
    assert.equal(link.write(Buffer.alloc(16 << 20, 0x30)), true);
    assert.ok(link.pendingBytes > 4096);
    const frame = { codec: 'g711a' as const, payload: payloadOf(160, 1), timestamp: 0 };
    assert.equal(link.sendAudio('156987000796', 1, frame), false, 'backlog over downlinkMaxPendingBytes');
    assert.equal(link.write(Buffer.alloc(100)), false);
    sock.resume();
    await waitFor('the backlog drained', () => link.pendingBytes === 0 && got >= 16 << 20, 20000);
    assert.equal(link.sendAudio('156987000796', 1, frame), true);
    const metrics = await (await fetch(`${gw.baseUrl}/metrics`)).text();
    assert.match(metrics, /gw_jt1078_ingest_downlink_refused_total\{reason="backlog"\} 2/);
    assert.match(metrics, /gw_jt1078_ingest_downlink_packets_total\{transport="tcp"\} 2/);

    sock.destroy();
    await waitFor('the link closed', () => link.closed);
    assert.deepEqual(closed, ['terminal disconnected']);
    assert.equal(link.sendAudio('156987000796', 1, frame), false);
    assert.equal(link.write(Buffer.alloc(10)), false);
    assert.equal(probe.links().find('156987000796', 1, 'live'), undefined);
    // a late listener still hears why
    const late = await new Promise<string>((r) => link.onClose(r));
    assert.equal(late, 'terminal disconnected');
  });

  it("UDP, 2019, HiSilicon audio: sends to the terminal's address through the listener, header added back", async () => {
    await open('13912345678', 2);
    const term = dgram.createSocket('udp4');
    term.bind(0, '127.0.0.1');
    await once(term, 'listening');
    const received: Jt1078Packet[] = [];
    const parser = new Jt1078Parser((p) => received.push(p));
    term.on('message', (m) => parser.pushDatagram(m));
    const port = gw.ports['jt1078-ingest.livePort2019:udp'];
    try {
      const packets = terminalPackets({ sim: '13912345678', channel: 2, layout: '2019', hisilicon: true });
      for (let i = 0; i < packets.length; i++) {
        term.send(packets[i], port, '127.0.0.1');
        if (i % 20 === 19) await new Promise((r) => setTimeout(r, 2));
      }
      const link = await waitFor('the link with HiSilicon audio', () => {
        const l = probe.links().find('13912345678', 2, 'live');
        return l && l.hisiliconAudio && l;
      });
      assert.deepEqual([link.transport, link.layout, link.remote], ['udp', '2019', `127.0.0.1:${(term.address() as net.AddressInfo).port}`]);
      const payload = payloadOf(320, 4);
      assert.equal(link.sendAudio('13912345678', 2, { codec: 'g711a', payload, timestamp: 40 }), true);
      assert.equal(link.sendAudio('13912345678', 2, { codec: 'g711a', payload, timestamp: 80 }), true);
      await waitFor('2 datagrams', () => received.length >= 2);
      for (const [i, p] of received.entries()) {
        assert.deepEqual(
          [p.layout, p.sim, p.channel, p.pt, p.dataType, p.seq, p.timestamp, p.subMark],
          ['2019', '13912345678', 2, 6, 3, i, 40 * (i + 1), SUB_MARK.ATOMIC],
        );
        assert.deepEqual([...p.body.subarray(0, 4)], [0x00, 0x01, 160, 0x00], 'HiSilicon header: 160 words follow');
        assert.ok(p.body.subarray(4).equals(payload));
      }
      // G.726 goes as PT 8; a frame a HiSilicon header cannot frame is refused loudly
      assert.equal(link.sendAudio('13912345678', 2, { codec: 'g726', payload: payloadOf(80, 5), timestamp: 120 }), true);
      await waitFor('the G.726 datagram', () => received.length >= 3);
      assert.deepEqual([received[2].pt, received[2].seq, received[2].body.length], [8, 2, 84]);
      assert.throws(() => link.sendAudio('13912345678', 2, { codec: 'g711a', payload: payloadOf(161, 6), timestamp: 0 }), /even number of bytes/);
    } finally {
      term.close();
    }
  });

  it('a reconnect is a new link: the old one reports its close, the new one is attached and found', async () => {
    await open('156987000796', 1);
    const packets = terminalPackets({ sim: '156987000796', channel: 1, layout: '2013' });
    const a = net.connect(gw.ports['jt1078-ingest.livePort2013'], '127.0.0.1');
    await once(a, 'connect');
    for (const b of packets.slice(0, 100)) a.write(b);
    const first = await waitFor('the first link', () => probe.links().find('156987000796', 1, 'live'));
    const closed = new Promise<string>((r) => first.onClose(r));
    a.destroy();
    assert.equal(await closed, 'terminal disconnected');
    const b = net.connect(gw.ports['jt1078-ingest.livePort2013'], '127.0.0.1');
    await once(b, 'connect');
    try {
      for (const x of packets.slice(100)) b.write(x);
      const second = await waitFor('the second link', () => probe.links().find('156987000796', 1, 'live'));
      assert.notEqual(second, first);
      assert.equal(second.remote, `127.0.0.1:${b.localPort}`);
      assert.deepEqual(
        probe.attached.map((e) => e.link),
        [first, second],
      );
    } finally {
      b.destroy();
    }
  });

  it('site keys: hisiliconDownlink always; per-terminal G.726 bits and packing (terminalAudio) reach the track', async () => {
    await boot({ hisiliconDownlink: 'always', g726Packing: 'left', terminalAudio: { '013900000002': { g726Bits: 3, g726Packing: 'right' } } });
    await open('13900000001', 1);
    await open('13900000002', 1);
    const raw = fs.readFileSync(fixturePath('g726/in_32.g726'));
    const socks: net.Socket[] = [];
    try {
      for (const sim of ['13900000001', '13900000002']) {
        const sock = net.connect(gw.ports['jt1078-ingest.livePort2013'], '127.0.0.1');
        await once(sock, 'connect');
        socks.push(sock);
        const video = capturePackets(GOJT)
          .filter((p) => p.dataType !== 3)
          .slice(0, 30);
        for (const p of video) sock.write(encodePacket(fieldsOf(p, { sim, channel: 1 }), p.body));
        for (let i = 0; i < 8; i++) {
          sock.write(
            encodePacket(
              { layout: '2013', sim, channel: 1, pt: 8, marker: true, seq: 1000 + i, dataType: 3, subMark: 0, timestamp: 40 * i },
              raw.subarray(160 * i, 160 * (i + 1)),
            ),
          );
        }
      }
      const track = (sim: string) =>
        waitFor(`${sim}'s audio track`, () =>
          probe
            .bus()
            .get(`${sim}_1_1`)
            ?.tracks.find((t): t is AudioTrackInfo => t.kind === 'audio'),
        );
      // the site's packing, the bits measured (32 kbit/s); the overridden terminal: its own bits and packing
      assert.deepEqual(await track('13900000001'), { kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 4, packing: 'left' });
      assert.deepEqual(await track('13900000002'), { kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 3, packing: 'right' });
      // the terminal sends no HiSilicon header, but the site wants one on everything sent down
      const link = await waitFor('the link', () => probe.links().find('13900000001', 1, 'live'));
      assert.equal(link.hisiliconAudio, false);
      const received: Jt1078Packet[] = [];
      const parser = new Jt1078Parser((p) => received.push(p));
      socks[0].on('data', (d) => parser.push(d));
      // (two: a reader not yet in step takes a packet once the header after it confirms it)
      assert.equal(link.sendAudio('13900000001', 1, { codec: 'g726', payload: payloadOf(160, 7), timestamp: 9 }), true);
      assert.equal(link.sendAudio('13900000001', 1, { codec: 'g726', payload: payloadOf(160, 8), timestamp: 49 }), true);
      await waitFor('the packet', () => received.length >= 1);
      assert.deepEqual([received[0].pt, received[0].body.length, ...received[0].body.subarray(0, 4)], [8, 164, 0, 1, 80, 0]);
    } finally {
      for (const s2 of socks) s2.destroy();
    }
  });

  it('a bad terminalAudio override stops boot naming it', async () => {
    await assert.rejects(boot({ terminalAudio: { '13900000002': { g726Bits: 6 } } }), /key terminalAudio: 13900000002\.g726Bits must be 2, 3, 4 or 5/);
    await assert.rejects(boot({ terminalAudio: { abc: {} } }), /SIM 'abc' must be 1 to 20 digits/);
    await boot();
  });
});
