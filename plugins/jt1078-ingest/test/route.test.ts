import assert from 'node:assert/strict';
import { routeTerminal } from '../src/route';
import { capture, encodeCapture } from '../../../test/e2e/helpers';

const CAP = 'jt1078/glaciall-cif-h264-2013.bin';

function packets(o: { layout?: '2013' | '2019'; sim?: string; channel?: number } = {}, n = 20): Buffer[] {
  return encodeCapture(capture(CAP).packets.slice(0, n), o);
}
const stream = (o: Parameters<typeof packets>[0] = {}, n = 20): Buffer => Buffer.concat(packets(o, n));

describe('jt1078-ingest router (which worker a terminal connection belongs to)', () => {
  it('keys a 2013 and a 2019 terminal of the same SIM and channel alike (normalised SIM)', () => {
    assert.deepEqual(routeTerminal(stream({ layout: '2013', sim: '013800001111', channel: 2 }), false), { key: '13800001111_2' });
    assert.deepEqual(routeTerminal(stream({ layout: '2019', sim: '00000000013800001111', channel: 2 }), false), { key: '13800001111_2' });
  });

  it('asks for more until a header chains, however the first bytes are split', () => {
    const whole = stream({ layout: '2019', sim: '13912345678', channel: 4 });
    let decided: ReturnType<typeof routeTerminal> = 'more';
    for (let n = 1; n <= whole.length && decided === 'more'; n++) decided = routeTerminal(whole.subarray(0, n), false);
    assert.deepEqual(decided, { key: '13912345678_4' });
    // a lone header is not enough to tell the layouts apart
    assert.equal(routeTerminal(whole.subarray(0, 30), false), 'more');
  });

  it('decides each datagram alone (UDP: one packet, nothing follows), in either layout', () => {
    for (const layout of ['2013', '2019'] as const) {
      const sim = layout === '2013' ? '13800138000' : '00000000013900000123';
      for (const d of packets({ layout, sim, channel: 3 }, 60)) {
        assert.deepEqual(routeTerminal(d, true), { key: `${layout === '2013' ? '13800138000' : '13900000123'}_3` });
      }
    }
    assert.equal(routeTerminal(Buffer.alloc(900, 0x5a), true), 'any');
  });

  it('keys interleaved terminals, channels and layouts each by its own bytes (the reused SIM string and key)', () => {
    // the same 6 SIM bytes under 2013 and, padded, under 2019; another SIM; another channel; in bursts and alone
    const kinds = [
      { layout: '2013' as const, sim: '013800001111', channel: 1, key: '13800001111_1' },
      { layout: '2013' as const, sim: '013800001111', channel: 2, key: '13800001111_2' },
      { layout: '2019' as const, sim: '00000000013800001111', channel: 1, key: '13800001111_1' },
      { layout: '2019' as const, sim: '00000000013800001112', channel: 1, key: '13800001112_1' },
      { layout: '2013' as const, sim: '013800001112', channel: 1, key: '13800001112_1' },
    ];
    const datagrams = kinds.map((k) => packets(k, 6));
    let checked = 0;
    for (const order of [
      [0, 0, 1, 1, 2, 3, 4, 0],
      [4, 3, 2, 1, 0, 2, 2, 1],
      [1, 0, 1, 0, 3, 3, 4, 4],
    ]) {
      for (const i of order) {
        for (const d of datagrams[i].slice(0, 1 + (checked % 3))) {
          assert.deepEqual(routeTerminal(d, true), { key: kinds[i].key }, `kind ${i}, datagram ${checked}`);
          checked++;
        }
      }
    }
    assert.ok(checked >= 24, `${checked} datagrams`);
  });

  it('skips junk before the first packet and gives up on junk alone', () => {
    const junk = Buffer.alloc(300, 0x5a);
    assert.deepEqual(routeTerminal(Buffer.concat([junk, stream({ sim: '13800138000', channel: 1 })]), false), { key: '13800138000_1' });
    assert.equal(routeTerminal(Buffer.alloc(100, 0x5a), false), 'more');
    assert.equal(routeTerminal(Buffer.alloc(4096, 0x5a), true), 'any');
    // a magic followed by garbage is no header
    const fake = Buffer.concat([Buffer.from('01cd'), Buffer.alloc(4092, 0xff)]);
    assert.equal(routeTerminal(fake, true), 'any');
  });
});
