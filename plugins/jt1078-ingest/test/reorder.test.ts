import assert from 'node:assert/strict';
import { Jt1078Packet } from '../src/packet';
import { Jt1078Reorderer, ReorderOptions } from '../src/reorder';
import { capturePackets, prng } from './helpers';

interface Released {
  p: Jt1078Packet;
  lost: number;
}

class FakeClock {
  t = 0;
  now = (): number => this.t;
}

function makeReorderer(opts: ReorderOptions = {}): { r: Jt1078Reorderer; out: Released[]; clock: FakeClock } {
  const out: Released[] = [];
  const clock = new FakeClock();
  const r = new Jt1078Reorderer({ onOrderedPacket: (p, lost) => out.push({ p, lost }) }, { now: clock.now, ...opts });
  return { r, out, clock };
}

/** Moves each packet up to `span` places later, drops `dropRate` of them. */
function shuffleAndDrop(packets: Jt1078Packet[], seed: number, span: number, dropRate: number, calm = 1): { sent: Jt1078Packet[]; dropped: Set<Jt1078Packet> } {
  const rand = prng(seed);
  const dropped = new Set<Jt1078Packet>();
  // the first `calm` packets arrive in order and complete (at least the very first one: the buffer
  // starts from whatever arrives first)
  const kept = packets.filter((p, i) => {
    if (i >= calm && rand() < dropRate) {
      dropped.add(p);
      return false;
    }
    return true;
  });
  // sort on index + jitter: no packet moves more than `span` places (the first one stays first)
  const keyed = kept.map((p, i) => ({ p, k: i < calm ? i - span : i + rand() * span }));
  keyed.sort((a, b) => a.k - b.k);
  return { sent: keyed.map((x) => x.p), dropped };
}

function seqDiff(a: number, b: number): number {
  return (b - a) & 0xffff;
}

/**
 * What must come out: per kind, every packet not dropped, in sequence order, each with lostBefore equal
 * to the dropped packets that `counts` says belong in the gap before it.
 */
function checkRelease(
  packets: Jt1078Packet[],
  sent: Jt1078Packet[],
  dropped: Set<Jt1078Packet>,
  out: Released[],
  counts: (gapDropped: Jt1078Packet[], kind: number) => number,
): number {
  let late = 0;
  for (const kind of [0, 1]) {
    const isKind = (p: Jt1078Packet): boolean => (p.dataType === 3 ? 1 : 0) === kind;
    // Nothing is released before the first maxDelayMs (or maxPackets), so a kind starts at its first packet
    // sent even when a later one arrives first: with shuffles this short, no packet is late at the start.
    const first = packets.find((p) => isKind(p) && !dropped.has(p));
    const early = (p: Jt1078Packet): boolean => first !== undefined && seqDiff(p.seq, first.seq) > 0 && seqDiff(p.seq, first.seq) < 0x8000;
    late += packets.filter((p) => isKind(p) && !dropped.has(p) && early(p)).length;
    const want = packets.filter((p) => isKind(p) && !dropped.has(p) && !early(p));
    const got = out.filter((o) => isKind(o.p));
    assert.equal(got.length, want.length, `kind ${kind}: released count`);
    for (let i = 0; i < want.length; i++) {
      assert.equal(got[i].p, want[i], `kind ${kind}: packet ${i} out of order`);
    }
    // loss reports: dropped packets between the previous released one of this kind and this one
    let prev: Jt1078Packet | undefined;
    for (const o of got) {
      if (prev) {
        const gap = [...dropped].filter((d) => seqDiff(prev!.seq, d.seq) > 0 && seqDiff(prev!.seq, d.seq) < seqDiff(prev!.seq, o.p.seq));
        assert.equal(o.lost, counts(gap, kind), `kind ${kind}: lostBefore of seq ${o.p.seq}`);
      }
      prev = o.p;
    }
  }
  return late;
}

describe('jt1078 reorder buffer', () => {
  it('puts a shuffled video stream with 1% loss back in order and reports exactly the losses', () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 3000);
    const { sent, dropped } = shuffleAndDrop(packets, 11, 16, 0.01);
    assert.ok(dropped.size >= 15, `dropped ${dropped.size}`);
    const { r, out, clock } = makeReorderer();
    for (const p of sent) {
      r.push(p);
      clock.t += 1;
      assert.ok(r.buffered <= 65);
    }
    r.flush();
    assert.equal(
      checkRelease(packets, sent, dropped, out, (gap) => gap.length),
      0,
    );
    assert.equal(r.stats.lost, dropped.size);
    assert.equal(r.stats.late, 0);
    assert.equal(r.stats.released, packets.length - dropped.size);
  });

  /** A shared-counter stream shuffled with 2 % loss, through a reorderer: checks what it released and returns it. */
  function replaySharedCounter(packets: Jt1078Packet[], seed: number): Jt1078Reorderer {
    const { sent, dropped } = shuffleAndDrop(packets, seed, 12, 0.02);
    assert.ok(dropped.size >= 5);
    const { r, out, clock } = makeReorderer();
    for (const p of sent) {
      r.push(p);
      clock.t += 2;
    }
    r.flush();
    // With one counter a lost packet cannot be told apart from a lost packet of the other kind, so each
    // kind reports every dropped number in its gaps; nothing else counts as lost.
    const late = checkRelease(packets, sent, dropped, out, (gap) => gap.length);
    assert.equal(r.stats.late, late);
    assert.equal(r.countersSeparate, false);
    return r;
  }

  it('handles audio and video sharing one counter (gojt808): the other kind fills the holes', () => {
    replaySharedCounter(capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin'), 5);
  });

  it('handles audio and video with their own counters, overlapping or far apart', () => {
    const base = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
    for (const audioStart of [0, 30000]) {
      let v = 0;
      let a = audioStart;
      const packets = base.map((p) => ({ ...p, seq: p.dataType === 3 ? a++ & 0xffff : v++ }));
      // Two counters that both start at 0 together look like one shared counter until a few packets
      // have carried the same number in both kinds; until then a hole in one kind may be taken for the
      // other kind's number. So the first 100 packets (about 2 s) arrive in order and complete here.
      const { sent, dropped } = shuffleAndDrop(packets, 99 + audioStart, 10, 0.02, audioStart === 0 ? 100 : 1);
      const { r, out, clock } = makeReorderer();
      for (const p of sent) {
        r.push(p);
        clock.t += 2;
      }
      r.flush();
      const late = checkRelease(packets, sent, dropped, out, (gap, kind) => gap.filter((d) => (d.dataType === 3 ? 1 : 0) === kind).length);
      assert.equal(r.stats.late, late);
      if (audioStart === 0) assert.equal(r.countersSeparate, true);
    }
  });

  it('wraps around at 65535', () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin')
      .slice(0, 400)
      .map((p, i) => ({ ...p, seq: (65400 + i) & 0xffff }));
    const { sent, dropped } = shuffleAndDrop(packets, 3, 20, 0.01);
    const { r, out, clock } = makeReorderer();
    for (const p of sent) {
      r.push(p);
      clock.t += 1;
    }
    r.flush();
    assert.equal(
      checkRelease(packets, sent, dropped, out, (gap) => gap.length),
      0,
    );
    assert.equal(r.stats.resets, 0);
  });

  it('wraps around at 65535 with audio and video sharing one counter: the other kind still fills the holes', () => {
    const base = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
    // the counter passes 65535 a third of the way in
    const start = 65536 - Math.floor(base.length / 3);
    const packets = base.map((p, i) => ({ ...p, seq: (start + i) & 0xffff }));
    assert.ok(packets.length > 300);
    assert.equal(replaySharedCounter(packets, 17).stats.resets, 0);
  });

  it('waits maxDelayMs for a missing packet, then gives up on it', () => {
    const p0 = capturePackets('jt1078/glaciall-cif-h264-2013.bin')[0];
    const at = (seq: number): Jt1078Packet => ({ ...p0, seq });
    const { r, out, clock } = makeReorderer({ maxDelayMs: 200 });
    r.push(at(100));
    r.push(at(102));
    clock.t = 50;
    r.push(at(103));
    // (the first packets wait too: an earlier number may still be on its way, see the start tests)
    assert.deepEqual(
      out.map((o) => o.p.seq),
      [],
    );
    assert.equal(r.nextDeadline(), 200);
    clock.t = 199;
    r.poll();
    assert.equal(out.length, 0);
    clock.t = 200;
    r.poll();
    assert.deepEqual(
      out.map((o) => [o.p.seq, o.lost]),
      [
        [100, 0],
        [102, 1],
        [103, 0],
      ],
    );
    assert.equal(r.nextDeadline(), Infinity);
    // too late now, and a repeat of a released one
    r.push(at(101));
    r.push(at(103));
    assert.equal(out.length, 3);
    assert.equal(r.stats.late, 2);
    // duplicates while held
    r.push(at(106));
    r.push(at(106));
    assert.equal(r.stats.duplicates, 1);
    assert.equal(r.buffered, 1);
  });

  it('starts at the earliest number of the first packets, whichever arrives first (a swap at the start costs nothing)', () => {
    const p0 = capturePackets('jt1078/glaciall-cif-h264-2013.bin')[0];
    const at = (seq: number): Jt1078Packet => ({ ...p0, seq });
    const { r, out, clock } = makeReorderer({ maxDelayMs: 200 });
    for (const s of [6, 4, 7, 0, 5, 1, 3, 2]) {
      r.push(at(s));
      clock.t += 1;
    }
    assert.equal(out.length, 0, 'held while an earlier number may come');
    r.push(at(65000)); // far before the start (more than maxPackets back): late, not a new start
    clock.t = 200;
    r.poll();
    assert.deepEqual(
      out.map((o) => [o.p.seq, o.lost]),
      [0, 1, 2, 3, 4, 5, 6, 7].map((s) => [s, 0]),
    );
    assert.deepEqual([r.stats.late, r.stats.lost], [1, 0]);
    // started: from here on an in-order packet leaves at once, and an earlier number is late
    r.push(at(8));
    assert.equal(out.length, 9);
    r.push(at(3));
    assert.equal(r.stats.late, 2);
  });

  it('gives up on a missing packet when more than maxPackets wait behind it', () => {
    const p0 = capturePackets('jt1078/glaciall-cif-h264-2013.bin')[0];
    const { r, out } = makeReorderer({ maxPackets: 8, maxDelayMs: 1e9 });
    r.push({ ...p0, seq: 0 });
    for (let s = 2; s <= 9; s++) r.push({ ...p0, seq: s });
    assert.equal(out.length, 1);
    assert.equal(r.buffered, 8);
    r.push({ ...p0, seq: 10 });
    assert.deepEqual(
      out.map((o) => [o.p.seq, o.lost]),
      [[0, 0], [2, 1], ...[3, 4, 5, 6, 7, 8, 9, 10].map((s) => [s, 0])],
    );
  });

  it('treats a big jump or a restart of the counter as a reset, not as thousands of losses', () => {
    const p0 = capturePackets('jt1078/glaciall-cif-h264-2013.bin')[0];
    const { r, out } = makeReorderer();
    for (const s of [10, 11, 12, 20000, 20001, 5, 6]) r.push({ ...p0, seq: s });
    // the discontinuity is reported once (lostBefore 1) so a frame in progress is not continued
    assert.deepEqual(
      out.map((o) => [o.p.seq, o.lost]),
      [
        [10, 0],
        [11, 0],
        [12, 0],
        [20000, 1],
        [20001, 0],
        [5, 1],
        [6, 0],
      ],
    );
    assert.equal(r.stats.resets, 2);
  });

  describe('in-order transport (maxPackets 0, TCP)', () => {
    it('releases at once and reports nothing lost for a clean shared-counter stream', () => {
      const packets = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
      const { r, out } = makeReorderer({ maxPackets: 0 });
      for (const p of packets) {
        const before = out.length;
        r.push(p);
        assert.equal(out.length, before + 1);
      }
      assert.equal(r.stats.lost, 0);
      assert.ok(out.every((o) => o.lost === 0));
    });

    it('reports the hole a missing packet leaves', () => {
      const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 100);
      const { r, out } = makeReorderer({ maxPackets: 0 });
      for (const p of packets) if (p.seq !== 40 && p.seq !== 41) r.push(p);
      assert.equal(out.find((o) => o.p.seq === 42)?.lost, 2);
      assert.equal(
        out.reduce((n, o) => n + o.lost, 0),
        2,
      );
    });
  });
});
