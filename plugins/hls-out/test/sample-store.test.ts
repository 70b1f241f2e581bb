/**
 * The sample store's reuse of its chunks: never while a part in the window, a response being written or a unit
 * waiting for its part reads one (tests run with GW_POISON_PAYLOADS=1: a chunk given back is overwritten, so a
 * read after it shows 0xee), and the segmenter's window stays byte-identical to one whose store never reuses.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import type { AccessUnit } from '../../../plugin-sdk';
import { SampleStore, joinAdjacent } from '../src/sample-store';
import { Segmenter, type SegmenterOptions } from '../src/segmenter';
import { fixtureClip } from '../../../test/support/fixture-clip';

const CHUNK = 1024;

/** `n` bytes of `v` taken from the store */
function filled(store: SampleStore, n: number, v: number): Buffer {
  const b = store.take(n);
  b.fill(v);
  return b;
}

describe('hls-out: the sample store', () => {
  it('reuses a chunk only once its parts and responses let go, and poisons it first', () => {
    assert.equal(process.env.GW_POISON_PAYLOADS, '1', 'the tests poison what is given back');
    const store = new SampleStore(() => false, CHUNK);
    const a = filled(store, 200, 1);
    const b = filled(store, 200, 2);
    const part = store.holdPart(joinAdjacent([Buffer.from('moof'), a, b]));
    assert.equal(joinAdjacent([a, b]).length, 1, 'neighbours in memory are one slice');
    for (let i = 0; i < 2; i++) filled(store, 250, 3); // 900 of 1024 used
    const first = a.buffer;
    const c = filled(store, 250, 3); // does not fit: the first chunk is sealed, a part still holds it
    assert.equal(store.made, 2);
    assert.notEqual(c.buffer, first);
    const send = store.holdSend([a]);
    part.release();
    assert.equal(a[0], 1, 'a response still writes it');
    send.release();
    send.release(); // (twice is once)
    assert.equal(a[0], 0xee, 'given back, and poisoned');
    assert.equal(b[0], 0xee);
    for (let i = 0; i < 3; i++) filled(store, 250, 4); // fills the second chunk
    const d = filled(store, 250, 5); // seals it: nothing held it, so it is reused at once, as is the first later
    assert.equal(store.made, 2, 'no new memory');
    assert.equal(d[0], 5);
  });

  it('never reuses a chunk a waiting unit reads, nor memory of its own (large takes)', () => {
    let waiting: Buffer | undefined;
    const store = new SampleStore((m) => waiting?.buffer === m, CHUNK);
    waiting = filled(store, 200, 7);
    for (let i = 0; i < 4; i++) filled(store, 250, 8); // seals the chunk with the waiting unit in it
    for (let i = 0; i < 5; i++) filled(store, 250, 9); // and the next
    assert.equal(waiting[0], 7, 'not given back while a unit waits in it');
    assert.equal(store.made, 2, 'the second chunk, which nothing read when sealed, was reused at once; the first was not');
    const big = store.take(CHUNK); // past a quarter of a chunk: its own memory
    assert.notEqual(big.buffer, waiting.buffer);
    assert.equal(store.made, 2, 'memory of its own is not a chunk');
    store.holdPart([big]).release(); // holding it is a no-op
  });
});

describe('hls-out: the segmenter over a reusing store', () => {
  const clip = fixtureClip({ seconds: 2 });
  const options = (): SegmenterOptions => ({
    container: 'fmp4',
    targetDurationSec: 2,
    partTargetSec: 0.333,
    windowSegments: 6,
    windowSec: 0,
    maxStreamBytes: 16 * 1024 * 1024,
    audioWaitMs: 0,
    wantsAudioWithVideo: false,
    wallClock: () => undefined,
    sourceHasAudio: () => false,
    log: pino({ level: 'silent' }),
    stats: { parts: () => undefined, segments: () => undefined, memoryDrops: () => undefined, unitsLeftOut: () => undefined },
  });
  const looped = (passes: number): AccessUnit[] =>
    Array.from({ length: passes }, (_x, p) =>
      clip.units.map((u) => ({
        ...u,
        dts: u.dts + p * clip.durationMs,
        pts: u.pts + p * clip.durationMs,
        dtsTicks: u.dtsTicks + Math.round((p * clip.durationMs * u.timescale) / 1000),
        ptsTicks: u.ptsTicks + Math.round((p * clip.durationMs * u.timescale) / 1000),
      })),
    ).flat();
  const windowBytes = (seg: Segmenter) => Buffer.concat(seg.segments.flatMap((s) => s.parts.flatMap((p) => p.data)));

  it('keeps the window byte-identical while it reuses chunks, and stops making new ones once the window is full', () => {
    const units = looped(30);
    const seg = new Segmenter(options());
    seg.tracks([clip.video]);
    // a response still writing the first listed segment holds it past its eviction
    let slow: { release(): void } | undefined;
    let madeAt10 = 0;
    for (const [i, u] of units.entries()) {
      seg.write(u);
      if (i === Math.floor(units.length / 3) && seg.segments.length > 0) slow = seg.store.holdSend(seg.segments[0].parts.flatMap((p) => p.data));
      if (i === Math.floor(units.length / 2)) madeAt10 = seg.store.made;
    }
    const made = seg.store.made;
    assert.ok(made - madeAt10 <= 2, `chunks made in the second half: ${made - madeAt10} (of ${made})`);
    // the same units through a store that never reuses
    const reference = new Segmenter(options());
    (reference as unknown as { store: SampleStore }).store = new SampleStore(() => true);
    reference.tracks([clip.video]);
    for (const u of units) reference.write(u);
    assert.equal(seg.segments.length, reference.segments.length);
    assert.ok(windowBytes(seg).equals(windowBytes(reference)), 'no byte of the window was overwritten by a reuse');
    assert.ok(slow, 'a slow response was taken');
    slow.release();
  });
});
