import assert from 'node:assert/strict';
import { Jt1078Packet, probeHeader, PROBE_INVALID, MAX_HEADER_LENGTH, SimDecoder } from '../src/packet';
import { normaliseSim } from '../../../plugin-sdk';
import { Jt1078Parser } from '../src/parser';
import { encodePacket } from '../src/packer';
import { CAPTURES, capturePackets, fieldsOf, packetKey, parseAll, prng, readCapture, reencode } from './helpers';

function keys(ps: Jt1078Packet[]): string[] {
  return ps.map(packetKey);
}

function parseChunked(data: Buffer, size: number, layout?: '2013' | '2019'): { packets: Jt1078Packet[]; parser: Jt1078Parser; maxPending: number } {
  const packets: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => packets.push(p), { layout });
  let maxPending = 0;
  for (let i = 0; i < data.length; i += size) {
    parser.push(data.subarray(i, i + size));
    if (parser.pendingBytes > maxPending) maxPending = parser.pendingBytes;
  }
  parser.end();
  return { packets, parser, maxPending };
}

/** Junk that cannot contain the magic (no 0x30 byte) */
function junk(rand: () => number, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    let v = Math.floor(rand() * 256);
    if (v === 0x30) v = 0x31;
    b[i] = v;
  }
  return b;
}

describe('jt1078 parser', () => {
  describe('real captures', () => {
    for (const c of CAPTURES) {
      it(`parses all of ${c.file}`, () => {
        const { packets, parser } = parseAll(readCapture(c.file));
        assert.equal(packets.length, c.packets);
        assert.equal(parser.layout, '2013');
        assert.equal(parser.stats.junkBytes, 0);
        assert.equal(parser.stats.resyncs, 0);
        assert.equal(parser.stats.bytes, readCapture(c.file).length);
        for (const p of packets) {
          assert.equal(p.sim, c.sim);
          assert.equal(p.channel, c.channel);
        }
        // consecutive sequence numbers, every body inside the file
        for (let i = 1; i < packets.length; i++) assert.equal(packets[i].seq, (packets[i - 1].seq + 1) & 0xffff);
      });
    }

    for (const c of CAPTURES) {
      it(`reusePacket: one object refilled, the same fields and bodies as new objects, chunks of any size (${c.file})`, () => {
        const data = readCapture(c.file);
        const want = parseAll(data).packets.map(packetKey);
        const rnd = prng(c.packets);
        const seen = new Set<Jt1078Packet>();
        const got: string[] = [];
        // the key is taken during the call: afterwards the object holds the next packet
        const parser = new Jt1078Parser(
          (p) => {
            seen.add(p);
            got.push(packetKey(p));
          },
          { reusePacket: true },
        );
        for (let at = 0; at < data.length;) {
          const n = 1 + Math.floor(rnd() * 3000);
          // a borrowed chunk: overwritten once the parser returns, as a socket's shared read buffer is
          const chunk = Buffer.from(data.subarray(at, at + n));
          parser.push(chunk);
          chunk.fill(0xa5);
          at += n;
        }
        parser.end();
        assert.deepEqual(got, want);
        assert.equal(seen.size, 1);
      });
    }

    it('reusePacket leaves datagrams their own packets (the UDP reorder buffer keeps them)', () => {
      const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 20);
      const got: Jt1078Packet[] = [];
      const parser = new Jt1078Parser((p) => got.push(p), { reusePacket: true });
      for (const p of packets) parser.pushDatagram(reencode(p));
      assert.equal(new Set(got).size, packets.length);
      assert.deepEqual(got.map(packetKey), packets.map(packetKey));
    });

    it('reads the fields of the first xunilcyl packet exactly', () => {
      const p = capturePackets('jt1078/xunilcyl-d1-h264-2013.bin')[0];
      assert.equal(p.pt, 98);
      assert.equal(p.marker, false);
      assert.equal(p.seq, 0);
      assert.equal(p.dataType, 0);
      assert.equal(p.subMark, 1);
      // "timestamps near 2^40"
      assert.equal(p.timestamp, 0x0100000abb6f);
      assert.equal(p.body.length, 0x1c);
      assert.deepEqual([...p.body.subarray(0, 5)], [0, 0, 0, 1, 0x67]);
    });
  });

  describe('chunking', () => {
    it('gives identical packets for every chunk size 1..128 and some odd larger ones', () => {
      const data = readCapture('jt1078/gojt808-d1-h264-g711a-2013.bin');
      const want = keys(parseAll(data).packets);
      const sizes = [...Array.from({ length: 128 }, (_, i) => i + 1), 949, 950, 951, 4093, 65536];
      for (const size of sizes) {
        const { packets, parser, maxPending } = parseChunked(data, size);
        assert.deepEqual(keys(packets), want, `chunk size ${size}`);
        assert.equal(parser.stats.junkBytes, 0, `chunk size ${size}`);
        // only a straddling packet is kept between chunks
        assert.ok(maxPending <= 34 + 950, `chunk size ${size}: kept ${maxPending} bytes`);
      }
    });

    it('gives identical packets when split into two or three pieces at every position', () => {
      const all = readCapture('jt1078/xunilcyl-d1-h264-2013.bin');
      // first 12 packets (a whole I frame and more): every header and body boundary is a split point
      const data = all.subarray(0, 4000);
      const want = keys(parseAll(data).packets);
      assert.ok(want.length >= 4);
      for (let a = 0; a <= data.length; a++) {
        const got: Jt1078Packet[] = [];
        const parser = new Jt1078Parser((p) => got.push(p));
        parser.push(data.subarray(0, a));
        parser.push(data.subarray(a));
        parser.end();
        assert.deepEqual(keys(got), want, `split at ${a}`);
      }
      for (let a = 0; a <= 200; a++) {
        for (let b = a; b <= 200; b += 7) {
          const got: Jt1078Packet[] = [];
          const parser = new Jt1078Parser((p) => got.push(p));
          parser.push(data.subarray(0, a));
          parser.push(data.subarray(a, b));
          parser.push(data.subarray(b));
          parser.end();
          assert.deepEqual(keys(got), want, `split at ${a}, ${b}`);
        }
      }
    });
  });

  describe('junk and resynchronisation', () => {
    it('skips junk injected between packets and loses nothing else', () => {
      const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 600);
      const rand = prng(7);
      const parts: Buffer[] = [];
      let junkTotal = 0;
      let injections = 0;
      parts.push(junk(rand, 17)); // before the first packet too
      junkTotal += 17;
      injections++;
      for (let i = 0; i < packets.length; i++) {
        parts.push(reencode(packets[i]));
        if (i % 37 === 5) {
          const n = 1 + Math.floor(rand() * 300);
          parts.push(junk(rand, n));
          junkTotal += n;
          injections++;
        }
      }
      // text junk with a partial magic in it
      parts.push(Buffer.from('01c garbage 01 c d'), reencode(packets[0], { seq: 9999 }));
      junkTotal += 18;
      injections++;
      const data = Buffer.concat(parts);
      const want = [...keys(packets), packetKey({ ...packets[0], seq: 9999 })];
      for (const size of [1, 3, 64, 1000, data.length]) {
        const { packets: got, parser } = parseChunked(data, size);
        assert.deepEqual(keys(got), want, `chunk size ${size}`);
        assert.equal(parser.stats.junkBytes, junkTotal, `chunk size ${size}`);
        assert.equal(parser.stats.resyncs, injections, `chunk size ${size}`);
      }
    });

    it('rejects a truncated packet found while searching when a real packet starts inside its claimed body', () => {
      const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 200);
      const k = packets.findIndex((p, i) => i > 5 && p.body.length === 950);
      assert.ok(k > 5 && k < 150);
      const whole = reencode(packets[k]);
      const truncated = whole.subarray(0, 200);
      const data = Buffer.concat([
        ...packets.slice(0, k).map((p) => reencode(p)),
        Buffer.from([1, 2, 3]), // junk: the parser is searching when it meets the truncated packet
        truncated,
        ...packets.slice(k + 1).map((p) => reencode(p)),
      ]);
      const { packets: got, parser } = parseAll(data);
      assert.deepEqual(keys(got), keys([...packets.slice(0, k), ...packets.slice(k + 1)]));
      assert.equal(parser.stats.junkBytes, 3 + 200);
    });

    it('skips transparent data packets and counts them', () => {
      const packets = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin').slice(0, 40);
      const parts: Buffer[] = [];
      for (const p of packets) {
        parts.push(reencode(p));
        parts.push(encodePacket(fieldsOf(p, { dataType: 4, subMark: 0, pt: 91 }), Buffer.from('serial data')));
      }
      const { packets: got, parser } = parseChunked(Buffer.concat(parts), 100);
      assert.deepEqual(keys(got), keys(packets));
      assert.equal(parser.stats.transparent, 40);
      assert.equal(parser.stats.packets, 80);
    });

    it('accepts bodies over 950 bytes', () => {
      const packets = capturePackets('jt1078/xunilcyl-d1-h264-2013.bin').slice(0, 10);
      const big = Buffer.alloc(30000, 0x41);
      const data = Buffer.concat([reencode(packets[0]), reencode(packets[1], { seq: 1 }), encodePacket(fieldsOf(packets[2]), big), reencode(packets[3])]);
      for (const size of [1000, data.length]) {
        const { packets: got } = parseChunked(data, size);
        assert.equal(got.length, 4);
        assert.equal(got[2].body.length, 30000);
        assert.ok(got[2].body.equals(big));
      }
    });
  });

  describe('layout detection', () => {
    const source = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
    const repacked2019 = Buffer.concat(source.map((p) => reencode(p, { layout: '2019' })));

    it('detects a 2019 stream on a 2013 port and round-trips every field', () => {
      for (const size of [1, 50, 950, repacked2019.length]) {
        const { packets, parser } = parseChunked(repacked2019, size, '2013');
        assert.equal(parser.layout, '2019');
        assert.equal(packets.length, source.length);
        assert.deepEqual(keys(packets), keys(source.map((p) => ({ ...p, layout: '2019' as const }))));
        assert.equal(parser.stats.junkBytes, 0);
        assert.equal(parser.stats.layoutSwitches, 0);
      }
    });

    it('detects a 2013 stream on a 2019 port', () => {
      const data = readCapture('jt1078/smallchi-cif-h264-2013.bin');
      const { packets, parser } = parseChunked(data, 777, '2019');
      assert.equal(parser.layout, '2013');
      assert.equal(packets.length, 1478);
      assert.equal(parser.stats.junkBytes, 0);
    });

    it('tells 2019 from 2013 when a zero-padded SIM makes single headers valid both ways', () => {
      // An 11-digit SIM padded to 20 digits: digits 13-14 read as a 2013 channel (0x12), digits 15-16 as
      // a 2013 data type byte (00: I frame). A 2019 audio header then reads as a valid 2013 video header of
      // the same length, so audio alone is ambiguous; the first video packet settles it.
      const sim = '00000000013912001234';
      const audio = source.filter((p) => p.dataType === 3).slice(0, 3);
      const video = source.filter((p) => p.dataType !== 3).slice(0, 4);
      const enc = (p: Jt1078Packet): Buffer => encodePacket(fieldsOf(p, { layout: '2019', sim }), p.body);
      const a = enc(audio[0]);
      assert.equal(probeHeader(a, 0, a.length, '2013'), a.length, 'one audio header reads as 2013 too');
      const seq = [...audio, ...video];
      const data = Buffer.concat(seq.map(enc));
      for (const guess of ['2013', '2019'] as const) {
        for (const size of [data.length, 200]) {
          const { packets, parser } = parseChunked(data, size, guess);
          assert.equal(parser.layout, '2019', `guess ${guess}, chunk ${size}`);
          assert.deepEqual(keys(packets), keys(seq.map((p) => ({ ...p, layout: '2019' as const, sim: '13912001234' }))));
        }
      }
    });

    it('detects the layout of datagrams, with one or several packets each', () => {
      const got: Jt1078Packet[] = [];
      const parser = new Jt1078Parser((p) => got.push(p), { layout: '2013' });
      let off = 0;
      const sizes = source.map((p) => 34 - (p.dataType === 3 ? 4 : 0) + p.body.length);
      let i = 0;
      while (i < source.length) {
        const n = 1 + (i % 3); // 1, 2 or 3 packets per datagram
        let len = 0;
        for (let k = 0; k < n && i + k < source.length; k++) len += sizes[i + k];
        parser.pushDatagram(repacked2019.subarray(off, off + len));
        off += len;
        i += n;
      }
      assert.equal(parser.layout, '2019');
      assert.deepEqual(keys(got), keys(source.map((p) => ({ ...p, layout: '2019' as const }))));
      assert.equal(parser.stats.junkBytes, 0);
    });

    it('skips junk inside datagrams and a truncated datagram', () => {
      const got: Jt1078Packet[] = [];
      const parser = new Jt1078Parser((p) => got.push(p));
      const a = reencode(source[0]);
      const b = reencode(source[1]);
      parser.pushDatagram(Buffer.concat([a, b]));
      parser.pushDatagram(Buffer.concat([Buffer.from('xx'), a, Buffer.from('yyy')]));
      parser.pushDatagram(b.subarray(0, b.length - 1));
      parser.pushDatagram(Buffer.alloc(0));
      assert.deepEqual(keys(got), keys([source[0], source[1], source[0]]));
      assert.equal(parser.stats.junkBytes, 2 + 3 + b.length - 1);
    });
  });

  describe('header validation', () => {
    const good = reencode(capturePackets('jt1078/glaciall-cif-h264-2013.bin')[0]);
    const mutate = (i: number, v: number): Buffer => {
      const b = Buffer.from(good);
      b[i] = v;
      return b;
    };
    it('accepts the real header', () => {
      assert.equal(probeHeader(good, 0, good.length, '2013'), good.length);
    });
    for (const [what, i, v] of [
      ['version not 2', 4, 0x41],
      ['bad BCD digit in SIM', 9, 0x3a],
      ['channel 0', 14, 0],
      ['data type 5', 15, 0x51],
      ['subpackage mark 4', 15, 0x04],
      ['magic', 2, 0x64],
    ] as Array<[string, number, number]>) {
      it(`rejects ${what}`, () => {
        const b = mutate(i, v);
        assert.equal(probeHeader(b, 0, b.length, '2013'), PROBE_INVALID);
      });
    }
    it('rejects a body longer than the configured maximum', () => {
      assert.equal(probeHeader(good, 0, good.length, '2013', 100), PROBE_INVALID);
    });
    it('never needs more than MAX_HEADER_LENGTH bytes to decide', () => {
      const b = reencode(capturePackets('jt1078/glaciall-cif-h264-2013.bin')[0], { layout: '2019' });
      assert.ok(probeHeader(b, 0, MAX_HEADER_LENGTH, '2019') > 0);
    });
  });

  it('normalises SIMs', () => {
    assert.equal(normaliseSim('013800138000'), '13800138000');
    assert.equal(normaliseSim('00000000000000000001'), '1');
    assert.equal(normaliseSim('000000000000'), '0');
    assert.equal(normaliseSim('13800138000'), '13800138000');
    assert.equal(normaliseSim('00ab12'), '00ab12');
  });
});

describe('jt1078 SIM decoding (one decoder per connection, remembering the last SIM)', () => {
  it('tells apart SIMs that differ in any one byte, in either layout, and layouts with the same leading bytes', () => {
    const d = new SimDecoder();
    const hex = (h: string) => Buffer.from(h, 'hex');
    // bytes at an offset, as in a packet
    const at = (h: string) => Buffer.concat([hex('ffff'), hex(h)]);
    const base6 = '013800138000';
    assert.equal(d.decode(at(base6), 2, 6), '13800138000');
    assert.equal(d.decode(at(base6), 2, 6), '13800138000');
    for (let i = 0; i < 6; i++) {
      const b = hex(base6);
      b[i] ^= 0x11;
      const want = normaliseSim(b.toString('hex'));
      assert.equal(d.decode(at(b.toString('hex')), 2, 6), want, `byte ${i} changed`);
      assert.equal(d.decode(at(base6), 2, 6), '13800138000', `back after byte ${i}`);
    }
    // the 2019 layout: the same first six bytes and four more are another SIM
    assert.equal(d.decode(at(base6 + '00000000'), 2, 10), '1380013800000000000');
    for (let i = 0; i < 10; i++) {
      const b = hex(base6 + '12345678');
      b[i] ^= 0x01;
      assert.equal(d.decode(at(b.toString('hex')), 2, 10), normaliseSim(b.toString('hex')), `2019 byte ${i} changed`);
    }
    assert.equal(d.decode(at(base6), 2, 6), '13800138000');
    // a SIM of all zero bytes on a fresh decoder is decoded, not taken for the empty start state
    assert.equal(new SimDecoder().decode(hex('000000000000'), 0, 6), '0');
    assert.equal(new SimDecoder().decode(hex('00000000000000000000'), 0, 10), '0');
  });
});
