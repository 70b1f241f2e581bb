/**
 * Parked fetches on their own (parking.ts), on a ManualClock: released after the change that makes them ready (once
 * the segmenter's work is done: a microtask), in the order they came; answered at their deadline by one timer for all; forgotten when their client leaves; one change
 * listener per segmenter with parked fetches and none once its list is empty; everything answered at stop.
 */
import assert from 'node:assert/strict';
import { ManualClock, type Cancel, type Clock } from '../../../plugin-sdk';
import { Parking, type Parked } from '../src/parking';
import type { Segmenter } from '../src/segmenter';

/** the part of a segmenter parking uses: its change listeners, counted */
class FakeSegmenter {
  readonly listeners = new Set<() => void>();
  have = 0;
  onChange(cb: () => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }
  change(have: number): void {
    this.have = have;
    for (const cb of [...this.listeners]) cb();
  }
}

interface Req extends Parked {
  name: string;
  /** ready once its segmenter has this */
  wants: number;
  /** what to park after its release (an early player's blocking reload) */
  then?: Req;
}

/** a ManualClock whose pending timers are counted */
class CountingClock implements Clock {
  pending = 0;
  constructor(readonly inner = new ManualClock(0)) {}
  now(): number {
    return this.inner.now();
  }
  setTimeout(fn: () => void, ms: number): Cancel {
    this.pending++;
    let live = true;
    const cancel = this.inner.setTimeout(() => {
      live = false;
      this.pending--;
      fn();
    }, ms);
    return () => {
      if (live) this.pending--;
      live = false;
      cancel();
    };
  }
  setInterval(fn: () => void, ms: number): Cancel {
    return this.inner.setInterval(fn, ms);
  }
}

/** the checks queued by changes have run */
const settled = (): Promise<void> => new Promise((r) => setImmediate(r));

function setup(): {
  clock: CountingClock;
  parking: Parking<Req>;
  out: string[];
  /** ready() calls */
  checks: () => number;
  req: (name: string, seg: FakeSegmenter, wants: number, deadline: number) => Req;
} {
  const clock = new CountingClock();
  const out: string[] = [];
  let checks = 0;
  const parking: Parking<Req> = new Parking<Req>(
    clock,
    (r) => {
      checks++;
      return (r.seg as unknown as FakeSegmenter).have >= r.wants;
    },
    (r, ok) => {
      out.push(`${r.name}:${ok ? 'ok' : 'late'}`);
      if (r.then) parking.park(r.then);
    },
  );
  const req = (name: string, seg: FakeSegmenter, wants: number, deadline: number): Req => ({
    name,
    seg: seg as unknown as Segmenter,
    wants,
    deadline,
    parked: false,
  });
  return { clock, parking, out, checks: () => checks, req };
}

describe('hls-out: parked fetches', () => {
  it('a change releases the ready ones in the order they came, together, once the change is over; the others stay', async () => {
    const { parking, out, checks, req } = setup();
    const seg = new FakeSegmenter();
    for (const [name, wants] of [
      ['a', 2],
      ['b', 1],
      ['c', 2],
      ['d', 3],
    ] as const)
      parking.park(req(name, seg, wants, 1000));
    assert.equal(parking.size, 4);
    assert.equal(seg.listeners.size, 1, 'one listener for all of them');
    // a unit that ends a part and a segment: two changes, one check of each parked fetch, after both
    seg.change(1);
    seg.change(2);
    assert.deepEqual(out, [], 'not from inside the change');
    await settled();
    assert.deepEqual(out, ['a:ok', 'b:ok', 'c:ok']);
    assert.equal(checks(), 4);
    assert.equal(parking.size, 1);
    seg.change(3);
    await settled();
    assert.deepEqual(out.slice(3), ['d:ok']);
    assert.equal(parking.size, 0);
    assert.equal(seg.listeners.size, 0, 'no listener once nothing is parked');
  });

  it('one timer, at the earliest deadline: each is answered at its own, not before', async () => {
    const { clock, parking, out, req } = setup();
    const s1 = new FakeSegmenter();
    const s2 = new FakeSegmenter();
    parking.park(req('late', s1, 1, 300));
    parking.park(req('early', s2, 1, 100));
    parking.park(req('middle', s1, 1, 200));
    parking.park(req('answered', s2, 1, 150));
    assert.equal(clock.pending, 1, 'one timer');
    s2.change(0);
    await settled();
    clock.inner.advance(99);
    assert.deepEqual(out, []);
    clock.inner.advance(1);
    assert.deepEqual(out, ['early:late']);
    s2.change(1);
    await settled();
    assert.deepEqual(out.slice(1), ['answered:ok']);
    clock.inner.advance(99);
    assert.deepEqual(out.slice(2), []);
    clock.inner.advance(1);
    assert.deepEqual(out.slice(2), ['middle:late']);
    assert.equal(clock.pending, 1);
    clock.inner.advance(100);
    assert.deepEqual(out.slice(3), ['late:late']);
    assert.equal(parking.size, 0);
    assert.equal(clock.pending, 0, 'no timer once nothing is parked');
    assert.equal(s1.listeners.size + s2.listeners.size, 0);
  });

  it('a fetch whose client left is forgotten: not answered, no listener or list left behind', async () => {
    const { clock, parking, out, req } = setup();
    const seg = new FakeSegmenter();
    const a = req('a', seg, 1, 100);
    const b = req('b', seg, 1, 100);
    parking.park(a);
    parking.park(b);
    parking.remove(a);
    assert.equal(parking.size, 1);
    parking.remove(a);
    assert.equal(parking.size, 1, 'removing twice counts once');
    parking.remove(b);
    assert.equal(parking.size, 0);
    assert.equal(parking.segmenters, 0);
    assert.equal(seg.listeners.size, 0);
    seg.change(1);
    await settled();
    clock.inner.advance(1000);
    assert.deepEqual(out, []);
  });

  it('a release may park again (an early player then blocking): it is kept and answered in turn', async () => {
    const { clock, parking, out, req } = setup();
    const seg = new FakeSegmenter();
    const early = req('early', seg, 1, 100);
    early.then = req('reload', seg, 2, 500);
    parking.park(early);
    parking.park(req('other', seg, 3, 500));
    seg.change(1);
    await settled();
    assert.deepEqual(out, ['early:ok']);
    assert.equal(parking.size, 2);
    seg.change(2);
    await settled();
    assert.deepEqual(out.slice(1), ['reload:ok']);
    clock.inner.advance(500);
    assert.deepEqual(out.slice(2), ['other:late']);
    assert.equal(parking.size, 0);
  });

  it('stop answers every parked fetch with what there is, and later ones at once', () => {
    const { clock, parking, out, req } = setup();
    const seg = new FakeSegmenter();
    seg.have = 1;
    parking.park(req('ready-at-stop', seg, 1, 100));
    parking.park(req('not-ready', seg, 2, 100));
    parking.stop();
    assert.deepEqual(out, ['ready-at-stop:ok', 'not-ready:late']);
    assert.equal(parking.size, 0);
    assert.equal(seg.listeners.size, 0);
    assert.equal(clock.pending, 0);
    parking.park(req('after', seg, 2, 100));
    assert.deepEqual(out.slice(2), ['after:late']);
    assert.equal(parking.size, 0);
  });
});
