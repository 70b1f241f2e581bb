import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { fixturePath, repoRoot, scratchDir } from '../../../test/support/paths';
import { Jt1078Packet } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { Jt1078StreamAssembler } from '../src/stream-assembler';
import { UsageError, loadCapture, parseSimulatorArgs, runSimulator } from '../tools/simulator';
import { Collector, capturePackets, checksum } from './helpers';

const GOJT = 'jt1078/gojt808-d1-h264-g711a-2013.bin';

interface Conn {
  packets: Jt1078Packet[];
  parser: Jt1078Parser;
  ended: Promise<void>;
}

/** A TCP listener on a free port that parses each connection's stream. */
async function tcpSink(onPacket?: (p: Jt1078Packet) => void): Promise<{ server: net.Server; port: number; conns: Conn[] }> {
  const conns: Conn[] = [];
  const server = net.createServer((s) => {
    const packets: Jt1078Packet[] = [];
    const parser = new Jt1078Parser((p) => {
      packets.push(p);
      onPacket?.(p);
    });
    s.on('data', (d) => parser.push(d));
    const ended = new Promise<void>((resolve) =>
      s.on('close', () => {
        parser.end();
        resolve();
      }),
    );
    conns.push({ packets, parser, ended });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as net.AddressInfo).port, conns };
}

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = path.join(repoRoot, 'dist/plugins/jt1078-ingest/tools/simulator.js');
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('jt1078 terminal simulator', function () {
  this.timeout(30000);
  const capture = capturePackets(GOJT);

  it('replays a capture as several TCP terminals with their own SIMs and a new channel', async () => {
    const { server, port, conns } = await tcpSink();
    try {
      const summary = await runSimulator({ file: fixturePath(GOJT), port, speed: 0, count: 3, sim: '013800000001', chan: 5 });
      assert.equal(summary.terminals, 3);
      assert.equal(summary.packets, 3 * 540);
      assert.equal(summary.bytes, 3 * fs.statSync(fixturePath(GOJT)).size);
      assert.equal(summary.passes, 3);
      await Promise.all(conns.map((c) => c.ended));
      assert.equal(conns.length, 3);
      const sims = conns.map((c) => c.packets[0].sim).sort();
      assert.deepEqual(sims, ['13800000001', '13800000002', '13800000003']);
      for (const c of conns) {
        assert.equal(c.packets.length, 540);
        assert.equal(c.parser.layout, '2013');
        assert.equal(c.parser.stats.junkBytes, 0);
        assert.ok(
          c.packets.every(
            (p, i) =>
              p.channel === 5 &&
              p.sim === c.packets[0].sim &&
              p.seq === capture[i].seq &&
              p.timestamp === capture[i].timestamp &&
              p.marker === capture[i].marker &&
              p.subMark === capture[i].subMark &&
              checksum(p.body) === checksum(capture[i].body),
          ),
        );
      }
    } finally {
      server.close();
    }
  });

  it('re-packs to the 2019 layout over UDP, one packet per datagram, paced', async () => {
    const sock = dgram.createSocket('udp4');
    sock.bind(0, '127.0.0.1');
    await once(sock, 'listening');
    const out = new Collector();
    const asm = new Jt1078StreamAssembler(out, { reorder: {} });
    const parser = new Jt1078Parser((p) => asm.push(p), { layout: '2013' });
    let datagrams = 0;
    sock.on('message', (m) => {
      datagrams++;
      parser.pushDatagram(m);
    });
    try {
      // 4.2 s of capture at speed 10: paced, so the loopback receive buffer never overflows
      const summary = await runSimulator({ file: fixturePath(GOJT), port: (sock.address() as net.AddressInfo).port, udp: true, proto: '2019', speed: 10 });
      assert.equal(summary.packets, 540);
      // datagrams still in flight on loopback
      for (let i = 0; i < 50 && datagrams < 540; i++) await new Promise((r) => setTimeout(r, 20));
      asm.flush();
      assert.equal(datagrams, 540);
      assert.equal(parser.layout, '2019');
      assert.equal(parser.stats.packets, 540);
      assert.equal(out.video().length, 102);
      assert.equal(out.audio().length, 214);
    } finally {
      sock.close();
    }
  });

  it('loops with continuous timestamps and sequence numbers until aborted', async () => {
    const out = new Collector();
    const asm = new Jt1078StreamAssembler(out);
    const ac = new AbortController();
    let received = 0;
    const { server, port, conns } = await tcpSink((p) => {
      asm.push(p);
      if (++received === 1500) ac.abort();
    });
    try {
      const summary = await runSimulator({ file: fixturePath(GOJT), port, speed: 0, loop: true, signal: ac.signal });
      await Promise.all(conns.map((c) => c.ended));
      assert.ok(summary.passes >= 2, `passes ${summary.passes}`);
      assert.ok(received >= 1500 && received === summary.packets, `${received} received, ${summary.packets} sent`);
      const s = asm.stats;
      assert.equal(s.reorder.resets, 0, 'sequence numbers continue across passes');
      assert.equal(s.reassembly.lostPackets, 0);
      assert.equal(s.timeline.rebases, 0, 'timestamps continue across passes');
      assert.ok(out.video().length >= 2 * 102);
    } finally {
      server.close();
    }
  });

  it('rejects bad options with clear messages', async () => {
    assert.throws(() => parseSimulatorArgs([]), /no capture file given/);
    assert.throws(() => parseSimulatorArgs(['x.bin']), /--port is required/);
    assert.throws(() => parseSimulatorArgs(['x.bin', '--port', '7612', '--proto', '2016']), /--proto must be 2013 or 2019/);
    assert.throws(() => parseSimulatorArgs(['x.bin', '--port', 'abc']), /--port must be a whole number/);
    assert.throws(() => parseSimulatorArgs(['x.bin', '--port', '1', '--bogus']), /unknown option '--bogus'/);
    assert.deepEqual(
      parseSimulatorArgs([
        'x.bin',
        '--port',
        '7613',
        '--udp',
        '--proto',
        '2019',
        '--speed',
        '0',
        '--count',
        '4',
        '--sim',
        '1',
        '--chan',
        '2',
        '--loop',
        '--host',
        'h',
      ]),
      { file: 'x.bin', port: 7613, udp: true, proto: '2019', speed: 0, count: 4, sim: '1', chan: 2, loop: true, host: 'h' },
    );
    await assert.rejects(runSimulator({ file: fixturePath(GOJT), port: 1, chan: 0 }), /channel must be 1..255/);
    await assert.rejects(runSimulator({ file: fixturePath(GOJT), port: 1, sim: '999999999999', count: 2 }), /more than 12 digits/);
    const dir = scratchDir('jt1078-sim');
    try {
      const junk = path.join(dir, 'junk.bin');
      fs.writeFileSync(junk, Buffer.from('not a capture at all'));
      assert.throws(
        () => loadCapture(junk),
        (e: unknown) => e instanceof UsageError && /no JT\/T 1078 packets found/.test((e as Error).message),
      );
      assert.throws(() => loadCapture(path.join(dir, 'missing.bin')), /cannot read capture file/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('command line', () => {
    it('prints usage and exits 2 on a usage error', async () => {
      const r = await run(['--port', '7612']);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /error: no capture file given/);
      assert.match(r.stderr, /usage: simulator <capture file>/);
    });

    it('exits 1 with the reason when the gateway is not there', async () => {
      const probe = net.createServer();
      probe.listen(0, '127.0.0.1');
      await once(probe, 'listening');
      const port = (probe.address() as net.AddressInfo).port;
      await new Promise<void>((r) => probe.close(() => r()));
      const r = await run([fixturePath(GOJT), '--port', String(port), '--speed', '0']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /cannot connect to 127\.0\.0\.1:\d+/);
    });

    it('sends the capture, logs one summary line and exits 0', async () => {
      const { server, port, conns } = await tcpSink();
      try {
        const r = await run([fixturePath(GOJT), '--host', '127.0.0.1', '--port', String(port), '--speed', '0', '--proto', '2019']);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /^simulator: 1 terminal\(s\), 540 packets, \d+ bytes, \d+\.\d s\n$/);
        await Promise.all(conns.map((c) => c.ended));
        assert.equal(conns[0].packets.length, 540);
        assert.equal(conns[0].parser.layout, '2019');
      } finally {
        server.close();
      }
    });
  });
});
