import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { once } from 'node:events';
import { Jt1078Parser } from '../../plugins/jt1078-ingest/src/parser';
import type { Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { splitAnnexB } from '../../plugin-sdk/formats/annexb';
import { flvFileHeader, serializeTag } from '../../plugin-sdk/formats/flv';
import { fixturePath, scratchDir } from '../support/paths';
import { FlvPlayCounter } from './support/flv-play-counter';
import {
  bucketsDelta, bucketsOf, coreTimes, cpuSeconds, histogramQuantile, parsePrometheus, quantile, rssBytes, summariseCpuProfile, sumOf,
} from './support/process-probe';
import { SynthTerminal, synthesise } from './support/synth-terminals';
import { BENCHES, main as benchMain } from './run';

const GLACIALL = () => fixturePath('jt1078/glaciall-cif-h264-2013.bin');

function tag(type: 8 | 9 | 18, timestamp: number, size: number): Buffer {
  return serializeTag({ type, timestamp, body: Buffer.alloc(size, type), keyframe: false });
}

describe('bench support: FlvPlayCounter', () => {
  const tags = [tag(18, 0, 40), tag(9, 0, 30), tag(9, 40, 70_000), tag(8, 41, 160), tag(9, 0x1234567, 5)];
  const flv = Buffer.concat([flvFileHeader(true, true), ...tags]);

  it('counts tags and timestamps of a chunked HTTP-FLV response from a real server, split anywhere', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'video/x-flv' });
      // one write per tag, as the gateway does: each becomes a chunk of the chunked encoding
      res.write(flvFileHeader(true, true));
      for (const t of tags) res.write(t);
      setImmediate(() => res.end());
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const sock = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      const raw: Buffer[] = [];
      sock.on('data', (d: Buffer) => raw.push(d));
      sock.write('GET /live/x.flv HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
      await once(sock, 'end');
      sock.destroy();
      const wire = Buffer.concat(raw);
      assert.match(wire.toString('latin1', 0, 300), /transfer-encoding: chunked/i, 'the server really used chunked encoding');
      for (const step of [wire.length, 4096, 7, 1]) {
        const seen: Array<[number, number, number]> = [];
        const c = new FlvPlayCounter((type, ts, size) => seen.push([type, ts, size]));
        for (let i = 0; i < wire.length; i += step) c.push(wire.subarray(i, i + step));
        assert.equal(c.error, 'response ended (last chunk)', `step ${step}`);
        assert.equal(c.status, 200);
        assert.deepEqual(seen, [[18, 0, 40], [9, 0, 30], [9, 40, 70_000], [8, 41, 160], [9, 0x1234567, 5]], `step ${step}`);
        assert.equal(c.videoTags, 3);
        assert.equal(c.audioTags, 1);
        assert.equal(c.flvBytes, flv.length);
        assert.equal(c.bytes, wire.length);
      }
    } finally {
      server.close();
    }
  });

  it('reads a response without chunked encoding', () => {
    const c = new FlvPlayCounter();
    c.push(Buffer.concat([Buffer.from('HTTP/1.0 200 OK\r\nContent-Type: video/x-flv\r\n\r\n'), flv]));
    assert.equal(c.error, undefined);
    assert.equal(c.tags, 5);
  });

  it('reports a refusal, a non-FLV body and lost sync instead of counting garbage', () => {
    const refused = new FlvPlayCounter();
    refused.push(Buffer.from('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n'));
    assert.equal(refused.error, 'HTTP 401');
    const notFlv = new FlvPlayCounter();
    notFlv.push(Buffer.from('HTTP/1.0 200 OK\r\n\r\n<html>'));
    assert.equal(notFlv.error, 'FLV signature missing');
    const junk = new FlvPlayCounter();
    junk.push(Buffer.concat([Buffer.from('HTTP/1.0 200 OK\r\n\r\n'), flvFileHeader(true, false), Buffer.alloc(20, 0x41)]));
    assert.match(junk.error ?? '', /lost sync/);
    const huge = new FlvPlayCounter();
    huge.push(Buffer.alloc(20_000, 0x41));
    assert.match(huge.error ?? '', /head larger than 16 KiB/);
  });
});

describe('bench support: metrics and /proc', () => {
  const text = [
    '# HELP x_seconds latency',
    '# TYPE x_seconds histogram',
    'x_seconds_bucket{le="0.001"} 50',
    'x_seconds_bucket{le="0.01"} 90',
    'x_seconds_bucket{le="0.1"} 100',
    'x_seconds_bucket{le="+Inf"} 100',
    'x_seconds_sum 1.5',
    'x_seconds_count 100',
    'bytes_total{listener="live2013",transport="tcp"} 1000',
    'bytes_total{listener="live2019",transport="tcp"} 24',
    'odd{path="a \\"quoted\\" \\\\ value"} 3',
    '',
  ].join('\n');

  it('parses Prometheus text: labels with escapes, sums by label match', () => {
    const m = parsePrometheus(text);
    assert.equal(sumOf(m, 'bytes_total'), 1024);
    assert.equal(sumOf(m, 'bytes_total', { listener: 'live2019' }), 24);
    assert.equal(sumOf(m, 'absent'), 0);
    assert.equal(m.get('odd')![0].labels.path, 'a "quoted" \\ value');
  });

  it('interpolates histogram quantiles inside buckets, over the difference of two scrapes', () => {
    const b = bucketsOf(parsePrometheus(text), 'x_seconds')!;
    assert.deepEqual(b.le, [0.001, 0.01, 0.1, Infinity]);
    assert.equal(histogramQuantile(b, 0.5), 0.001);
    assert.ok(Math.abs(histogramQuantile(b, 0.7) - 0.0055) < 1e-12);
    assert.ok(Math.abs(histogramQuantile(b, 0.99) - 0.091) < 1e-12);
    const earlier = { le: b.le, counts: [50, 50, 50, 50] };
    const d = bucketsDelta(b, earlier);
    assert.deepEqual(d.counts, [0, 40, 50, 50]);
    assert.ok(Math.abs(histogramQuantile(d, 0.5) - 0.006625) < 1e-12);
    assert.ok(Number.isNaN(histogramQuantile({ le: [1, Infinity], counts: [0, 0] }, 0.5)));
    // everything above the last finite bound: the bound is the best that can be said
    assert.equal(histogramQuantile({ le: [1, Infinity], counts: [0, 10] }, 0.5), 1);
  });

  it('takes exact quantiles of samples', () => {
    const xs = Array.from({ length: 100 }, (_x, i) => 100 - i);
    assert.equal(quantile(xs, 0.5), 50);
    assert.equal(quantile(xs, 0.99), 99);
    assert.ok(Number.isNaN(quantile([], 0.5)));
  });

  it('reads CPU time and RSS of a process from /proc', () => {
    const before = cpuSeconds(process.pid);
    let x = 0;
    for (let i = 0; i < 3e7; i++) x += Math.sqrt(i);
    assert.ok(x > 0);
    assert.ok(cpuSeconds(process.pid) > before, 'CPU time grows while this process computes');
    const rss = rssBytes(process.pid);
    assert.ok(rss > 10e6 && rss < 8e9, `RSS ${rss}`);
    const cores = coreTimes();
    assert.ok(cores.length >= 1 && cores.every((c) => c.total > 0 && c.busy <= c.total));
    assert.throws(() => cpuSeconds(2 ** 30), /ENOENT/);
  });

  it('summarises self time of a .cpuprofile per function and per file, leaving idle out of the shares', () => {
    const dir = scratchDir('bench-prof');
    try {
      const frame = (functionName: string, url: string, lineNumber: number) => ({ functionName, url, lineNumber, columnNumber: 0, scriptId: '0' });
      const prof = {
        nodes: [
          { id: 1, callFrame: frame('(root)', '', -1), children: [2, 3, 4] },
          { id: 2, callFrame: frame('hot', 'file:///repo/dist/a.js', 9), children: [5] },
          { id: 3, callFrame: frame('(idle)', '', -1) },
          { id: 4, callFrame: frame('(garbage collector)', '', -1) },
          { id: 5, callFrame: frame('', 'file:///repo/dist/a.js', 19) },
        ],
        samples: [2, 2, 3, 4, 5, 2],
        timeDeltas: [1000, 1000, 5000, 1000, 2000, 1000],
      };
      const f = path.join(dir, 'x.cpuprofile');
      fs.writeFileSync(f, JSON.stringify(prof));
      const s = summariseCpuProfile(f, '/repo');
      assert.equal(s.totalMs, 11);
      assert.equal(s.busyMs, 6);
      assert.deepEqual(s.functions.map((e) => [e.name, e.where, e.selfMs, e.pct]), [
        ['hot', 'dist/a.js:10', 3, 50],
        ['(anonymous)', 'dist/a.js:20', 2, (100 * 2) / 6],
        ['(garbage collector)', '', 1, (100 * 1) / 6],
      ]);
      assert.deepEqual(s.files.map((e) => [e.name, e.selfMs]), [['dist/a.js', 5], ['(garbage collector)', 1]]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bench support: synthetic terminals', () => {
  it('pads the capture to the target rate with filler NAL units, I frames first, frames intact', () => {
    const s = synthesise(GLACIALL(), 1);
    assert.ok(Math.abs((s.bytesPerSecond * 8) / 1e6 - 1) < 0.02, `wire rate ${(s.bytesPerSecond * 8) / 1e6} Mbit/s`);
    assert.ok(s.padFactor > 4 && s.padFactor < 8, `pad factor ${s.padFactor}`);
    assert.equal(s.frames[0].key, true);
    assert.ok(s.keyframes.length > 50 && s.keyframes.every((i) => s.frames[i].key));
    // every template is valid JT/T 1078: the project's parser reads it back, packet for packet
    const packets: Jt1078Packet[] = [];
    const parser = new Jt1078Parser((p) => packets.push(p));
    for (const f of s.frames.slice(0, 60)) parser.push(f.buf);
    parser.end();
    assert.equal(packets.length, s.frames.slice(0, 60).reduce((n, f) => n + f.packets.length, 0));
    assert.ok(packets.every((p) => p.body.length <= 950));
    const first = Buffer.concat(packets.filter((p) => p.dataType === 0 && p.timestamp === packets[0].timestamp).map((p) => p.body));
    const types = splitAnnexB(first).map((n) => n[0] & 0x1f);
    assert.deepEqual([types[0], types[1]], [7, 8], 'SPS and PPS lead the I frame');
    assert.ok(types.includes(5), 'IDR slice kept');
    assert.equal(types[types.length - 1], 12, 'filler data appended last');
  });

  it('sends over a real socket with its own SIM, running sequence numbers and rising timestamps, whole frames per write', async () => {
    const s = synthesise(GLACIALL(), 1);
    const server = net.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection');
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await once(client, 'connect');
    const [peer] = (await accepted) as [net.Socket];
    try {
      const packets: Jt1078Packet[] = [];
      const parser = new Jt1078Parser((p) => packets.push(p));
      peer.on('data', (d: Buffer) => parser.push(d));
      const term = new SynthTerminal('13912345678', client, s, 1 << 20);
      const first = s.keyframes[3];
      term.start(0, first);
      // media time 0 is the start frame: everything up to 2 s after it is due
      const sent = term.sendDue(2000, 1000);
      const expected = s.frames.slice(first).filter((f) => f.t - s.frames[first].t <= 2000).length;
      assert.equal(sent, expected);
      const bytes = term.bytes;
      while (parser.stats.bytes < bytes) await once(peer, 'data');
      parser.end(); // the parser holds a packet until the next header confirms it
      assert.equal(packets.length, s.frames.slice(first, first + sent).reduce((n, f) => n + f.packets.length, 0));
      assert.ok(packets.every((p) => p.sim === '13912345678' && p.channel === 1));
      packets.forEach((p, i) => assert.equal(p.seq, i & 0xffff));
      for (let i = 1; i < packets.length; i++) assert.ok(packets[i].timestamp >= packets[i - 1].timestamp);
      assert.equal(packets[0].dataType, 0, 'starts on an I frame');
      // what players match against: media time from the first frame sent
      assert.equal(term.sentT[0], 0);
      assert.equal(term.sentT[term.sentCount - 1], packets[packets.length - 1].timestamp - packets[0].timestamp);
      assert.equal(term.dropped, 0);
    } finally {
      client.destroy();
      peer.destroy();
      server.close();
    }
  });
});

describe('bench dispatcher', () => {
  it('lists the benchmarks and refuses an unknown one with exit code 2', async () => {
    for (const name of ['ingest-flv', 'record-catalog', 'aac-engine', 'codecs']) assert.ok(name in BENCHES, `${name} is registered`);
    // every registered one loads and has its entry point
    for (const b of Object.values(BENCHES)) assert.equal(typeof b.load().run, 'function');
    const err: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((s: string) => { err.push(String(s)); return true; }) as typeof process.stderr.write;
    try {
      assert.equal(await benchMain(['no-such-bench']), 2);
      assert.equal(await benchMain(['ingest-flv', '--terminals', 'many']), 1);
    } finally {
      process.stderr.write = write;
    }
    assert.match(err.join(''), /unknown benchmark 'no-such-bench'/);
    assert.match(err.join(''), /--terminals needs a whole number from 1 to 5000, got 'many'/);
  });
});
