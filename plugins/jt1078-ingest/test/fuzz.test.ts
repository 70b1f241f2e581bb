import assert from 'node:assert/strict';
import type { AccessUnit, TrackInfo } from '../../../plugin-sdk';
import { Jt1078Packet } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { Jt1078StreamAssembler } from '../src/stream-assembler';
import { capturePackets, checksum, prng, readCapture, reencode, assemble } from './helpers';

/** Largest thing the parser may keep between calls: one maximal packet and the header after it. */
const PARSER_BOUND = 65535 + 34 + 34;
const MAX_FRAME = 1 << 20;

/** Checks invariants on everything the assembler emits, whatever it was fed. */
class CheckingSink {
  units: AccessUnit[] = [];
  tracks = 0;
  private last: Record<string, number> = { video: -Infinity, audio: -Infinity };
  keep = false;
  onTrack(_info: TrackInfo): void {
    this.tracks++;
  }
  onAccessUnit(au: AccessUnit): void {
    assert.ok(au.dts > this.last[au.kind], `${au.kind} dts ${au.dts} after ${this.last[au.kind]}`);
    assert.ok(Number.isFinite(au.dts));
    // exact time whatever the input: integer ticks of a positive time base, the ms view derived from them
    assert.ok(Number.isSafeInteger(au.dtsTicks) && au.dtsTicks >= 0 && au.ptsTicks === au.dtsTicks, `${au.kind} ticks ${au.dtsTicks}`);
    assert.ok(au.timescale === (au.kind === 'video' ? 90_000 : 8000) || (au.kind === 'audio' && au.timescale > 0));
    assert.equal(au.dts, (au.dtsTicks * 1000) / au.timescale);
    assert.ok(Number.isInteger(au.duration) && au.duration >= 0);
    assert.ok(au.payload.length > 0 && Number.isFinite(au.receivedAt));
    this.last[au.kind] = au.dts;
    if (this.keep) this.units.push(au);
  }
}

function mutate(src: Buffer, rand: () => number): Buffer[] {
  const r = rand();
  const b = Buffer.from(src);
  const flip = (from: number, to: number, n: number): void => {
    for (let i = 0; i < n; i++) b[from + Math.floor(rand() * Math.max(1, Math.min(to, b.length) - from))] = Math.floor(rand() * 256);
  };
  if (r < 0.4) return [b];
  if (r < 0.5) {
    flip(0, 34, 1 + Math.floor(rand() * 3));
    return [b];
  }
  if (r < 0.58) {
    flip(34, b.length, 1 + Math.floor(rand() * 8));
    return [b];
  }
  if (r < 0.68) return [b.subarray(0, Math.floor(rand() * b.length))];
  if (r < 0.73) return [b, Buffer.from(b)];
  if (r < 0.78) return [];
  if (r < 0.84) {
    const junk = Buffer.alloc(Math.floor(rand() * 60));
    for (let i = 0; i < junk.length; i++) junk[i] = Math.floor(rand() * 256);
    return [junk, b];
  }
  if (r < 0.9) {
    // a length field that lies (2013 video header: length at 28)
    if (b.length > 30) b.writeUInt16BE(Math.floor(rand() * 65536), 28);
    return [b];
  }
  if (r < 0.95) {
    b[15] = Math.floor(rand() * 256);
    return [b];
  }
  b.writeUInt16BE(Math.floor(rand() * 65536), 6);
  return [b];
}

describe('jt1078 fuzz: mutated and truncated packets through parser and assembler', function () {
  this.timeout(60000);
  const sources: Buffer[] = [
    ...capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin'),
    ...capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 1500),
  ].map((p: Jt1078Packet, i) => reencode(p, i % 7 === 3 ? { layout: '2019' } : {}));

  it('survives 110,000 mutated packets on a TCP stream with bounded memory, then decodes a clean capture', () => {
    const rand = prng(0xc0ffee);
    const sink = new CheckingSink();
    const asm = new Jt1078StreamAssembler(sink, { maxFrameBytes: MAX_FRAME });
    const parser = new Jt1078Parser((p) => asm.push(p));
    let pending: Buffer[] = [];
    let pendingLen = 0;
    let maxParser = 0;
    const flush = (): void => {
      const data = Buffer.concat(pending, pendingLen);
      pending = [];
      pendingLen = 0;
      // random chunking, from single bytes to large reads
      for (let off = 0; off < data.length;) {
        const n = rand() < 0.1 ? 1 + Math.floor(rand() * 8) : 1 + Math.floor(rand() * 8192);
        parser.push(data.subarray(off, off + n));
        off += n;
        if (parser.pendingBytes > maxParser) maxParser = parser.pendingBytes;
        assert.ok(asm.pendingFrameBytes <= 2 * MAX_FRAME);
        assert.equal(asm.pendingPackets, 0);
      }
    };
    for (let i = 0; i < 110_000; i++) {
      for (const b of mutate(sources[Math.floor(rand() * sources.length)], rand)) {
        pending.push(b);
        pendingLen += b.length;
      }
      if (pendingLen > 256 * 1024) flush();
    }
    flush();
    assert.ok(maxParser <= PARSER_BOUND, `parser kept ${maxParser} bytes`);
    assert.ok(parser.stats.resyncs > 1000, `resyncs ${parser.stats.resyncs}`);
    assert.ok(parser.stats.junkBytes > 0);
    assert.ok(asm.stats.reassembly.droppedFrames > 100);

    // a clean capture afterwards: once the parser is back in step, the frames are the right ones
    const clean = assemble(capturePackets('jt1078/glaciall-cif-h264-2013.bin')).out.video();
    sink.keep = true;
    const valid = readCapture('jt1078/glaciall-cif-h264-2013.bin');
    for (let off = 0; off < valid.length; off += 4096) parser.push(valid.subarray(off, off + 4096));
    const got = sink.units.filter((u) => u.kind === 'video');
    assert.ok(got.length > 0);
    assert.equal(got[0].keyframe, true);
    const k = clean.findIndex((u) => checksum(u.payload) === checksum(got[0].payload));
    const thirdKey = clean.map((u, i) => (u.keyframe ? i : -1)).filter((i) => i >= 0)[2];
    assert.ok(k >= 0 && k <= thirdKey, `resumed at clean frame ${k}`);
    assert.equal(got.length, clean.length - k);
    for (let i = 0; i < got.length; i++) assert.ok(got[i].payload.equals(clean[k + i].payload), `frame ${k + i}`);
  });

  it('survives 30,000 mutated datagrams with reordering on, then decodes a clean capture', () => {
    const rand = prng(77);
    let now = 0;
    const sink = new CheckingSink();
    const asm = new Jt1078StreamAssembler(sink, { reorder: { maxPackets: 64, maxDelayMs: 200 }, now: () => now, maxFrameBytes: MAX_FRAME });
    const parser = new Jt1078Parser((p) => asm.push(p));
    for (let i = 0; i < 30_000; i++) {
      const parts = mutate(sources[Math.floor(rand() * sources.length)], rand);
      // sometimes two packets in one datagram
      parser.pushDatagram(Buffer.concat(parts));
      now += rand() * 3;
      if (asm.nextDeadline() <= now) asm.poll();
      assert.ok(asm.pendingPackets <= 2 * 65);
      assert.ok(asm.pendingFrameBytes <= 2 * MAX_FRAME);
      assert.equal(parser.pendingBytes, 0);
    }
    const packets = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
    const clean = assemble(packets).out.video();
    sink.keep = true;
    for (const p of packets) {
      parser.pushDatagram(reencode(p));
      now += 5;
      if (asm.nextDeadline() <= now) asm.poll();
    }
    asm.flush();
    const got = sink.units.filter((u) => u.kind === 'video');
    assert.ok(got.length > 0);
    const k = clean.findIndex((u) => checksum(u.payload) === checksum(got[0].payload));
    assert.ok(k >= 0 && clean[k].keyframe);
    assert.equal(got.length, clean.length - k);
    for (let i = 0; i < got.length; i++) assert.ok(got[i].payload.equals(clean[k + i].payload), `frame ${k + i}`);
  });
});
