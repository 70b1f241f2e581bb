import assert from 'node:assert/strict';
import { Jt1078Packet, SUB_MARK } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { Jt1078Packer, encodeSim } from '../src/packer';
import { Jt1078Reassembler, Jt1078Frame } from '../src/reassembler';

function parse(bufs: Buffer[], layout?: '2013' | '2019'): Jt1078Packet[] {
  const out: Jt1078Packet[] = [];
  const p = new Jt1078Parser((x) => out.push(x), { layout });
  for (const b of bufs) p.push(b);
  p.end();
  return out;
}

describe('jt1078 packer', () => {
  const payload = Buffer.alloc(2000);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;

  for (const layout of ['2013', '2019'] as const) {
    it(`splits a frame into subpackages of at most 950 bytes (${layout})`, () => {
      const packer = new Jt1078Packer({ layout, sim: '13800138000', channel: 2, firstSeq: 65534 });
      const bufs = packer.packFrame({ dataType: 0, pt: 98, timestamp: 123456789012, payload });
      const ps = parse(bufs, layout === '2013' ? '2019' : '2013');
      assert.equal(ps.length, 3);
      assert.deepEqual(
        ps.map((p) => p.body.length),
        [950, 950, 100],
      );
      assert.deepEqual(
        ps.map((p) => p.subMark),
        [SUB_MARK.FIRST, SUB_MARK.MIDDLE, SUB_MARK.LAST],
      );
      assert.deepEqual(
        ps.map((p) => p.marker),
        [false, false, true],
      );
      assert.deepEqual(
        ps.map((p) => p.seq),
        [65534, 65535, 0],
      );
      assert.ok(ps.every((p) => p.layout === layout && p.sim === '13800138000' && p.channel === 2 && p.timestamp === 123456789012));
      assert.equal(packer.seq, 1);
      const frames: Jt1078Frame[] = [];
      const r = new Jt1078Reassembler({ onFrame: (f) => frames.push(f) });
      for (const p of ps) r.push(p);
      assert.equal(frames.length, 1);
      assert.ok(frames[0].payload.equals(payload));
    });
  }

  it('sends a small frame as one atomic packet with the M bit, audio without intervals', () => {
    const packer = new Jt1078Packer({ layout: '2013', sim: '1', channel: 1 });
    const [b] = packer.packFrame({ dataType: 3, pt: 6, timestamp: 20, payload: Buffer.alloc(160, 0xd5) });
    assert.equal(b.length, 26 + 160);
    const [p] = parse([b]);
    assert.equal(p.subMark, SUB_MARK.ATOMIC);
    assert.equal(p.marker, true);
    assert.equal(p.sim, '1');
    assert.deepEqual([...b.subarray(8, 14)], [0, 0, 0, 0, 0, 1]);
  });

  it('refuses what cannot be encoded, with clear messages', () => {
    assert.throws(() => encodeSim('12ab', '2013'), /decimal digits/);
    assert.throws(() => encodeSim('1234567890123', '2013'), /more than 12 digits/);
    assert.doesNotThrow(() => encodeSim('12345678901234567890', '2019'));
    assert.throws(() => new Jt1078Packer({ layout: '2013', sim: '1', channel: 0 }).packFrame({ dataType: 0, pt: 98, timestamp: 0, payload }), /channel/);
    assert.throws(() => new Jt1078Packer({ layout: '2013', sim: '1', channel: 1 }).packFrame({ dataType: 1, pt: 98, timestamp: -1, payload }), /timestamp/);
  });
});
