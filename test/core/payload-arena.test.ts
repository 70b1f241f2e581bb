import assert from 'node:assert/strict';
import pino from 'pino';
import { CoreMediaBus, type BusStream } from '../../core/bus/media-bus';
import { PayloadArena } from '../../core/bus/payload-arena';
import { ChunkPool, isPoisoned } from '../../core/bus/chunk-pool';
import type { MediaReader, Publisher, StageContext, StageDefinition, StageRef } from '../../plugin-sdk/bus';
import { videoUnit, type AccessUnit } from '../../plugin-sdk/media';

const KB = 1024;
const quiet = pino({ level: 'silent' });
const tick = () => new Promise<void>((r) => setImmediate(r));

/** a bus with one stream and its publisher */
function newStream(reusePayloads = true): { bus: CoreMediaBus; s: BusStream; pub: Publisher } {
  const bus = new CoreMediaBus(
    { maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB, readerDropAfterMs: 60_000, reusePayloads },
    quiet,
    () => 0,
  );
  const s = bus.create('arena', 'test');
  return { bus, s, pub: s.attachPublisher() };
}

/**
 * a deterministic byte pattern per unit number and stream (`tag`), so a payload overwritten by a later one, or by
 * another stream's, shows
 */
function fill(b: Buffer, n: number, tag = 0): Buffer {
  for (let i = 0; i < b.length; i++) b[i] = (n * 31 + tag * 101 + i * 7) & 0xff;
  return b;
}

function intact(b: Buffer, n: number, tag = 0): boolean {
  for (let i = 0; i < b.length; i++) if (b[i] !== ((n * 31 + tag * 101 + i * 7) & 0xff)) return false;
  return true;
}

/** pushes unit number n (keyframe every `gop`), its payload from the publisher's alloc */
function pushUnit(pub: Publisher, n: number, size: number, gop: number, tag = 0): void {
  pub.push(videoUnit({ codec: 'h264', dts: n * 40, keyframe: n % gop === 0, payload: fill(pub.alloc(size), n, tag) }));
}

const stagesStarted: StageContext[] = [];

/**
 * A stage that passes video (StageDefinition.passes) and reads audio it holds nothing of, as the AAC stage does;
 * `k` makes distinct instances.
 */
const passVideo: StageDefinition = {
  name: 'pass-video',
  passes: ['video'],
  params: (p) => ({ k: p.k ?? 0 }),
  start(ctx) {
    stagesStarted.push(ctx);
    const sub = ctx.input.subscribe({ write: () => undefined, holdsPayloads: () => false }, { media: 'a' });
    return { stop: () => sub.close() };
  },
};

/** the number pushUnit gave a unit */
const numberOf = (u: AccessUnit): number => u.dts / 40;

/** whether a unit pushed by pushUnit still has the bytes it was pushed with */
const unitIntact = (u: AccessUnit): boolean => intact(u.payload, numberOf(u));

/**
 * A reader that gives back (`fast`) and, once reuse runs, one that cannot say when it is done (`keeper`), each on
 * the stream or through a stage: nothing is reused while the keeper is attached, reuse resumes once it left, and what
 * it was given stays as pushed. Returns the scene and the next unit's number.
 */
async function keeperStopsReuse(fast?: StageRef, keeper?: StageRef): Promise<{ bus: CoreMediaBus; s: BusStream; pub: Publisher; n: number }> {
  const { bus, s, pub } = newStream();
  if (fast || keeper) bus.registerStage(passVideo, 'test', quiet);
  s.subscribe({ write: () => undefined, holdsPayloads: () => false }, { via: fast });
  await tick();
  let n = 0;
  for (; n < 30; n++) pushUnit(pub, n, 10 * KB, 5);
  const reusedBefore = bus.chunks.counts.reused;
  assert.ok(reusedBefore > 0);
  const kept: AccessUnit[] = [];
  const sub = s.subscribe({ write: (u) => kept.push(u) }, { via: keeper });
  await tick();
  for (; n < 80; n++) pushUnit(pub, n, 10 * KB, 5);
  assert.equal(bus.chunks.counts.reused, reusedBefore, 'nothing reused while it is attached');
  sub.close();
  for (; n < 200; n++) pushUnit(pub, n, 10 * KB, 5);
  assert.ok(bus.chunks.counts.reused > reusedBefore, 'reuse resumes once it left');
  // everything it was given is still as pushed, long after
  for (const u of kept) assert.ok(unitIntact(u), `kept unit ${numberOf(u)} intact`);
  return { bus, s, pub, n };
}

describe('payload arena (Publisher.alloc)', () => {
  it('reuses a chunk only once its holders are done, never one with a slice not pushed', () => {
    let done = false;
    const pool = new ChunkPool(() => 0, 1024, 4096);
    const c = pool.counts;
    const a = new PayloadArena(() => done, pool);
    const first = a.alloc(400);
    a.pushed(first, 0);
    a.alloc(400); // the same chunk, never pushed
    assert.equal(c.allocated, 1);
    const second = a.alloc(400); // no room: a second chunk, the first is not done
    assert.equal(c.allocated, 2);
    assert.notEqual(second.buffer, first.buffer);
    a.pushed(second, 1);
    a.pushed(a.alloc(400), 2);
    done = true;
    // switch: the first chunk is done but has a slice never pushed (forgotten); the second is done: reused
    const third = a.alloc(400);
    assert.equal(c.escaped, 1);
    assert.equal(c.reused, 1);
    assert.equal(third.buffer, second.buffer);
    a.pushed(third, 3);
    done = false;
    a.pushed(a.alloc(400), 4);
    const fourth = a.alloc(400); // switch: not done, so a new chunk
    assert.equal(c.reused, 1);
    assert.equal(c.allocated, 3);
    assert.notEqual(fourth.buffer, second.buffer);
    // more than the pool's largest chunk: memory of its own, not tracked
    const huge = a.alloc(5000);
    assert.equal(c.allocated, 3);
    assert.equal(huge.length, 5000);
    assert.equal(pool.bytes.held, 2 * 1024, 'the pool counts what the arena holds');
    a.forgetAll(true);
    assert.deepEqual(pool.bytes, { held: 0, free: 0 });
    assert.equal(c.escaped, 3);
  });

  it('a slice discarded (no unit will carry it) no longer holds its chunk, and the last one carved is carved again', () => {
    const pool = new ChunkPool(() => 0, 1024, 4096);
    const a = new PayloadArena(() => true, pool);
    const dropped = a.alloc(300);
    a.discard(dropped);
    const again = a.alloc(200);
    assert.equal(again.byteOffset, dropped.byteOffset, 'the room of the last slice is carved again');
    // made anew: the original is given back after the new one was carved
    const remade = a.alloc(300);
    a.pushed(remade, 0);
    a.discard(again);
    // the chunk is full: the first, done with nothing pending, goes back to the pool and is taken again at once
    const next = a.alloc(900);
    assert.equal(pool.counts.escaped, 0);
    assert.equal(pool.counts.reused, 1);
    assert.equal(next.buffer, dropped.buffer);
    a.discard(Buffer.alloc(10)); // not the arena's: ignored
  });

  it('a discarded slice that is not the last carved leaves the carving where it is', () => {
    const pool = new ChunkPool(() => 0, 1024, 4096);
    const a = new PayloadArena(() => true, pool);
    const first = a.alloc(100);
    const second = a.alloc(100);
    a.discard(first);
    const third = a.alloc(100);
    assert.equal(third.buffer, second.buffer);
    assert.equal(third.byteOffset, second.byteOffset + 104, 'after the second (8-byte steps), not over it');
    a.discard(third);
    assert.equal(a.alloc(50).byteOffset, third.byteOffset, 'the last one is carved again');
  });

  it("a key frame gives the last GOP's chunks back at once, not when the stream next needs a chunk", async () => {
    const { bus, s, pub } = newStream();
    s.subscribe({ write: () => undefined, holdsPayloads: () => false });
    await tick();
    // GOPs of 10 units of 8 KiB: 80 KiB, three chunks a GOP and a bit
    for (let n = 0; n < 10; n++) pushUnit(pub, n, 8 * KB, 10);
    const before = bus.chunks.bytes;
    // the next key frame lets the whole first GOP go; it fits the rest of the chunk being carved, so no new one is needed
    pushUnit(pub, 10, 2 * KB, 10);
    const after = bus.chunks.bytes;
    assert.ok(after.free - before.free >= 64 * KB, `the first GOP's whole chunks are free at once: ${before.free} -> ${after.free}`);
    assert.ok(after.held <= 32 * KB, `the stream holds only the chunk it carves from: ${after.held}`);
    // what is still cached reads as pushed after more units take the freed chunks
    const got: AccessUnit[] = [];
    s.subscribe({ write: (u) => got.push(u), holdsPayloads: () => false });
    for (let n = 11; n < 20; n++) pushUnit(pub, n, 8 * KB, 10);
    await tick();
    assert.deepEqual(got.map(numberOf), [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
    assert.ok(got.every(unitIntact));
  });

  it('a frame larger than a unit gets a chunk of its size rounded up, and the frames after it fill the rest', () => {
    const done = true;
    const pool = new ChunkPool(() => 0, 1024, 4096);
    const a = new PayloadArena(() => done, pool);
    const key = a.alloc(2500);
    a.pushed(key, 0);
    assert.equal(key.buffer.byteLength, 3 * 1024);
    const p = a.alloc(400); // fits what the key frame left (at 2504, 8-byte aligned)
    a.pushed(p, 1);
    assert.equal(p.buffer, key.buffer);
    assert.equal(p.byteOffset - key.byteOffset, 2504);
    assert.equal(pool.counts.allocated, 1);
    // the next frame does not fit: the 3-unit chunk is done, back in the pool, and taken again for a 1-unit need
    // (the smallest free chunk that holds it)
    const next = a.alloc(400);
    assert.equal(next.buffer, key.buffer);
    assert.equal(pool.counts.reused, 1);
  });

  it('the pool hands out the smallest free chunk that holds a frame, and lets go of what no stream took for a whole window', () => {
    const pool = new ChunkPool(() => 0, 1024, 8192, 10_000);
    const held = Array.from({ length: 64 }, (_, i) => pool.take(i % 4 === 0 ? 3000 : 1000));
    assert.equal(pool.counts.allocated, 64);
    assert.equal(pool.bytes.held, 48 * 1024 + 16 * 3 * 1024);
    // four 1-unit chunks and one 3-unit chunk back
    const small = held.splice(1, 3).concat(held.splice(2, 1));
    const big = held.shift()!;
    for (const c of [...small, big]) pool.give(c);
    assert.equal(pool.bytes.free, 7 * 1024);
    assert.equal(pool.take(2000).buf, big.buf, 'a 2-unit need takes the 3-unit chunk (no 2-unit one is free)');
    const one = pool.take(100);
    assert.ok(small.includes(one), 'a 1-unit need takes a 1-unit chunk');
    assert.throws(() => new ChunkPool(() => 0, 1000, 4096), /multiple/);

    // what streams give back at the end of their GOPs and take again within one is never let go; the 5 chunks no
    // stream took during a whole window are
    let now = 0;
    const p = new ChunkPool(() => now, 1024, 8192, 10_000);
    const streams = Array.from({ length: 40 }, () => p.take(1000));
    for (const c of streams.splice(0, 5)) p.give(c);
    for (let gop = 0; gop < 15; gop++) {
      now += 2_000;
      for (const c of streams.splice(0, 20)) p.give(c);
      for (let i = 0; i < 20; i++) streams.push(p.take(1000));
    }
    assert.equal(p.counts.released, 5);
    assert.equal(p.counts.allocated, 40, 'the swings were served from the pool');
    // every stream closed: with nothing held, every free chunk goes
    for (const c of streams) p.give(c);
    p.settle();
    assert.deepEqual(p.bytes, { free: 0, held: 0 });
    assert.equal(p.counts.released, 40);
  });

  it('free chunks no stream takes are let go at the end of their window even when no stream takes any more', async () => {
    const pool = new ChunkPool(() => performance.now(), 1024, 8192, 40);
    const held = Array.from({ length: 6 }, () => pool.take(1000));
    for (const c of held.splice(0, 4)) pool.give(c);
    assert.equal(pool.bytes.free, 4 * 1024);
    // the two streams still holding chunks take nothing: the first window closes with its low-water mark at 0 (the
    // pool was empty when it began), the next one lets the four go
    for (let waited = 0; pool.counts.released < 4 && waited < 5000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    assert.equal(pool.bytes.free, 0);
    assert.equal(pool.counts.released, 4);
    assert.equal(pool.bytes.held, 2 * 1024);
  });

  it('a holder that never lets go costs the arena no memory: past 128 units of chunks the oldest are forgotten', () => {
    const pool = new ChunkPool(() => 0, 1024, 4096);
    const c = pool.counts;
    const a = new PayloadArena(() => false, pool);
    const firsts: Buffer[] = [];
    for (let n = 0; n < 1000; n++) {
      const b = a.alloc(1000);
      if (n < 3) firsts.push(b);
      a.pushed(b, n);
    }
    assert.equal(c.reused, 0);
    assert.ok(a.chunkCount <= 129, `${a.chunkCount} chunks tracked`);
    assert.equal(c.escaped, 1000 - 129);
    assert.equal(pool.bytes.held, 129 * 1024);
    // forgotten, not reused: still the holder's
    assert.notEqual(firsts[0].buffer, firsts[1].buffer);
  });

  it('waits for the GOP cache, the queues and every sink that holds payloads; what each sink reads is what was pushed', async () => {
    const { bus, s, pub } = newStream();
    let holding = true;
    const got: AccessUnit[] = [];
    let n = 0;
    const sink: MediaReader = { write: (u) => got.push(u), holdsPayloads: () => holding };
    s.subscribe(sink);
    await tick();
    // 40 units of 10 KB in GOPs of 10: 400 KB through 32 KB chunks
    for (; n < 40; n++) pushUnit(pub, n, 10 * KB, 10);
    assert.equal(bus.chunks.counts.reused, 0, 'the sink says it still holds what it got');
    for (const u of got) assert.ok(unitIntact(u), `unit ${numberOf(u)} intact`);
    got.length = 0;
    const whileHeld = bus.chunks.counts.allocated;
    holding = false;
    for (; n < 120; n++) pushUnit(pub, n, 10 * KB, 10);
    assert.ok(bus.chunks.counts.reused > 0, 'chunks of finished GOPs came back');
    // what finished GOPs gave back serves the GOPs after them
    assert.ok(bus.chunks.counts.allocated - whileHeld <= 2, `allocated ${bus.chunks.counts.allocated - whileHeld} after the sink let go`);
    // the cached GOP (units 110..119) is intact: nothing it holds was reused
    const late: AccessUnit[] = [];
    s.subscribe({ write: (u) => late.push(u), holdsPayloads: () => true });
    await tick();
    assert.equal(late.length, 10);
    for (const u of late) assert.ok(unitIntact(u), `cached unit ${numberOf(u)} intact`);
    s.close('test over');
  });

  it('a reader that cannot say when it is done stops all reuse while attached, and keeps what it got for good', async () => {
    const { s } = await keeperStopsReuse();
    s.close('test over');
  });

  it('a reader that leaves with bytes still held keeps them intact; so does a reader held up behind a full queue', async () => {
    const { bus, s, pub } = newStream();
    let writable = true;
    // it takes each unit's bytes when written (as a socket does) and holds nothing after
    const slow: Array<{ n: number; ok: boolean }> = [];
    s.subscribe({ write: (u) => slow.push({ n: numberOf(u), ok: unitIntact(u) }), writable: () => writable, holdsPayloads: () => false });
    const leaving: AccessUnit[] = [];
    const leaver = s.subscribe({ write: (u) => leaving.push(u), holdsPayloads: () => true });
    await tick();
    let n = 0;
    for (; n < 20; n++) pushUnit(pub, n, 10 * KB, 5);
    leaver.close(); // with its socket "still sending" what it got
    writable = false; // the other one stops taking units: they wait in its queue
    for (; n < 60; n++) pushUnit(pub, n, 10 * KB, 5);
    for (const u of leaving) assert.ok(unitIntact(u), `unit ${numberOf(u)} of the reader that left intact`);
    writable = true;
    slow.length = 0;
    for (; n < 140; n++) pushUnit(pub, n, 10 * KB, 5);
    assert.equal(slow[0].n, 20, 'the queued units came first');
    assert.ok(bus.chunks.counts.reused > 0);
    for (const g of slow) assert.ok(g.ok, `unit ${g.n} intact when it was finally written`);
    s.close('test over');
  });

  it("a stage that passes video: its stream's GOP, queues and sinks hold the input's chunks until they are done", async () => {
    const { bus, s, pub } = newStream();
    bus.registerStage(passVideo, 'test', quiet);
    let holding = true;
    const got: AccessUnit[] = [];
    s.subscribe({ write: (u) => got.push(u), holdsPayloads: () => holding }, { via: 'pass-video' });
    await tick();
    let n = 0;
    for (; n < 40; n++) pushUnit(pub, n, 10 * KB, 10);
    assert.equal(got.length, 40, "video passed to the stage's stream");
    assert.equal(bus.chunks.counts.reused, 0, "a sink on the stage's stream says it still holds what it got");
    for (const u of got) assert.ok(unitIntact(u), `unit ${numberOf(u)} intact`);
    const whileHeld = bus.chunks.counts.allocated;
    holding = false;
    for (; n < 120; n++) pushUnit(pub, n, 10 * KB, 10);
    assert.ok(bus.chunks.counts.reused > 0, 'chunks of finished GOPs came back');
    assert.ok(bus.chunks.counts.allocated - whileHeld <= 2, `allocated ${bus.chunks.counts.allocated - whileHeld} after the sink let go`);
    assert.equal(bus.chunks.counts.escaped, 0);
    // the stage's stream caches its own GOP of the input's units: a late joiner there gets them intact
    const late: AccessUnit[] = [];
    s.subscribe({ write: (u) => late.push(u), holdsPayloads: () => true }, { via: 'pass-video' });
    await tick();
    assert.deepEqual(late.map(numberOf), [110, 111, 112, 113, 114, 115, 116, 117, 118, 119]);
    for (const u of late) assert.ok(unitIntact(u), `cached unit ${numberOf(u)} intact`);
    s.close('test over');
  });

  it("a reader that cannot say when it is done, on a stage's stream, stops the input's reuse until its stage stops", async () => {
    // on a stage instance of its own: when it leaves, that stage's stream closes with it
    const { bus, s, pub, n: after } = await keeperStopsReuse({ stage: 'pass-video' }, { stage: 'pass-video', params: { k: 1 } });
    assert.equal(bus.list().length, 2, 'its stage stopped');
    let n = after;

    // a stage that fails closes its stream with such a reader still on it: what it counted is given back
    let ended = '';
    s.subscribe(
      {
        write: () => undefined,
        end: (r) => {
          ended = r;
        },
      },
      { via: { stage: 'pass-video', params: { k: 2 } } },
    );
    await tick();
    const reusedThen = bus.chunks.counts.reused;
    for (; n < 260; n++) pushUnit(pub, n, 10 * KB, 5);
    assert.equal(bus.chunks.counts.reused, reusedThen);
    stagesStarted.find((c) => c.params.k === 2)!.fail('test');
    assert.match(ended, /stage pass-video failed: test/);
    for (; n < 400; n++) pushUnit(pub, n, 10 * KB, 5);
    assert.ok(bus.chunks.counts.reused > reusedThen, 'reuse resumes after the stage failed');
    s.close('test over');
  });

  it('a pool that poisons overwrites each chunk that comes back to it; one that does not leaves its bytes', () => {
    for (const poison of [true, false]) {
      const pool = new ChunkPool(() => 0, 1024, 4096, 10_000, poison);
      const c = pool.take(1000);
      fill(c.buf, 7);
      const view = c.buf.subarray(16, 600);
      pool.give(c);
      assert.equal(isPoisoned(view), poison, `poison ${poison}`);
      assert.equal(intact(c.buf, 7), !poison);
    }
    assert.equal(isPoisoned(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0xde, 0xad])), true);
    assert.equal(isPoisoned(Buffer.from([0xde, 0xad, 0xbe, 0xee])), false);
    assert.equal(isPoisoned(Buffer.alloc(0)), false);
  });

  it("a sink that says it holds nothing while it keeps every unit reads poison, then another stream's frames", async () => {
    const bus = new CoreMediaBus(
      { maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB, readerDropAfterMs: 60_000 },
      quiet,
      () => 0,
      new ChunkPool(() => 0, undefined, undefined, undefined, true),
    );
    const a = bus.create('vehicle-a', 'test');
    const pubA = a.attachPublisher();
    const kept: AccessUnit[] = [];
    // the lie: it keeps every unit it is given and says it holds none
    a.subscribe({ write: (u) => kept.push(u), holdsPayloads: () => false });
    await tick();
    // units of 10 KiB, three to a 32 KiB chunk; unit 10, a key frame, lets the first GOP's chunks (units 0-8) go
    for (let n = 0; n <= 10; n++) pushUnit(pubA, n, 10 * KB, 10);
    assert.deepEqual(kept.filter((u) => isPoisoned(u.payload)).map(numberOf), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    // a reader that checks what it reads later (a socket sending what it kept) fails loudly
    assert.throws(() => {
      for (const u of kept) assert.ok(unitIntact(u), `unit ${numberOf(u)} of vehicle-a intact when read`);
    }, /unit 0 of vehicle-a intact/);
    // what the poison stands in for: once another stream takes the chunks, the kept units are its frames, whole
    const b = bus.create('vehicle-b', 'test');
    const pubB = b.attachPublisher();
    b.subscribe({ write: () => undefined, holdsPayloads: () => false });
    await tick();
    for (let n = 0; n < 9; n++) pushUnit(pubB, n, 10 * KB, 10, 1);
    const shown = kept.slice(0, 9).filter((u) => [...Array(9).keys()].some((m) => intact(u.payload, m, 1)));
    assert.equal(shown.length, 9, "every unit vehicle-a's liar kept now holds a frame of vehicle-b");
    a.close('test over');
    b.close('test over');
  });

  it('gateway.reusePayloads false: alloc hands out fresh memory, nothing is ever reused', async () => {
    const { bus, s, pub } = newStream(false);
    s.subscribe({ write: () => undefined, holdsPayloads: () => false });
    await tick();
    const seen = new Set<ArrayBufferLike>();
    for (let n = 0; n < 200; n++) {
      const b = pub.alloc(10 * KB);
      seen.add(b.buffer);
      pub.push(videoUnit({ codec: 'h264', dts: n * 40, keyframe: n % 5 === 0, payload: fill(b, n) }));
    }
    assert.deepEqual(bus.chunks.counts, { allocated: 0, reused: 0, escaped: 0, released: 0 });
    // fresh memory every time (a per-stream slab, or memory of its own for a slice this large): none handed out twice
    assert.equal(seen.size, 200);
    s.close('test over');
  });

  it('random readers, holds, skips and joins: every unit every reader reads is the bytes pushed', async () => {
    let seed = 12345;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const { bus, s, pub } = newStream();
    bus.registerStage(passVideo, 'test', quiet);
    interface R {
      holding: AccessUnit[];
      writable: boolean;
      close: () => void;
    }
    const readers: R[] = [];
    let checked = 0;
    // on the stream itself, or on one of two stages' streams (which come and go with their readers)
    const where = [undefined, { stage: 'pass-video' }, { stage: 'pass-video', params: { k: 1 } }];
    const join = () => {
      const r: R = { holding: [], writable: true, close: () => undefined };
      const sub = s.subscribe(
        {
          write: (u) => r.holding.push(u),
          writable: () => r.writable,
          holdsPayloads: () => r.holding.length > 0,
        },
        { via: where[Math.floor(rnd() * where.length)] },
      );
      r.close = () => sub.close();
      readers.push(r);
    };
    for (let i = 0; i < 4; i++) join();
    await tick();
    for (let n = 0; n < 3000; n++) {
      pushUnit(pub, n, 1 * KB + Math.floor(rnd() * 20 * KB), 12 + Math.floor(rnd() * 3));
      for (const r of readers) {
        // a reader "sends" some of what it holds: reads it now, as a socket would, and lets go of it
        if (rnd() < 0.5) {
          const k = Math.floor(rnd() * (r.holding.length + 1));
          for (const u of r.holding.splice(0, k)) {
            assert.ok(unitIntact(u), `unit ${numberOf(u)} intact when read`);
            checked++;
          }
        }
        if (rnd() < 0.02) r.writable = !r.writable;
      }
      if (rnd() < 0.01 && readers.length > 1) readers.splice(Math.floor(rnd() * readers.length), 1)[0].close();
      if (rnd() < 0.01 && readers.length < 6) {
        join();
        await tick();
      }
    }
    assert.ok(checked > 5000, `checked ${checked}`);
    assert.ok(bus.chunks.counts.reused > 50, `reused ${bus.chunks.counts.reused}`);
    s.close('test over');
  });

  it("streams of one bus share the pool: every unit every reader of each stream reads is its own stream's bytes", async () => {
    let seed = 777;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const bus = new CoreMediaBus({ maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB, readerDropAfterMs: 60_000 }, quiet, () => 0);
    interface R {
      tag: number;
      holding: AccessUnit[];
      writable: boolean;
      close: () => void;
    }
    const streams = [0, 1, 2].map((tag) => {
      const s = bus.create(`shared${tag}`, 'test');
      return { tag, s, pub: s.attachPublisher(), n: 0, gop: 8 + tag * 3 };
    });
    const readers: R[] = [];
    const join = (st: (typeof streams)[number]) => {
      const r: R = { tag: st.tag, holding: [], writable: true, close: () => undefined };
      const sub = st.s.subscribe({ write: (u) => r.holding.push(u), writable: () => r.writable, holdsPayloads: () => r.holding.length > 0 });
      r.close = () => sub.close();
      readers.push(r);
    };
    for (const st of streams) join(st);
    await tick();
    // which streams each chunk's memory was handed to
    const usedBy = new Map<ArrayBufferLike, Set<number>>();
    let checked = 0;
    for (let step = 0; step < 6000; step++) {
      const st = streams[Math.floor(rnd() * streams.length)];
      const payload = st.pub.alloc(1 * KB + Math.floor(rnd() * (rnd() < 0.1 ? 80 : 12) * KB));
      const users = usedBy.get(payload.buffer) ?? new Set<number>();
      users.add(st.tag);
      usedBy.set(payload.buffer, users);
      st.pub.push(videoUnit({ codec: 'h264', dts: st.n * 40, keyframe: st.n % st.gop === 0, payload: fill(payload, st.n, st.tag) }));
      st.n++;
      for (const r of readers) {
        if (rnd() < 0.4) {
          for (const u of r.holding.splice(0, Math.floor(rnd() * (r.holding.length + 1)))) {
            assert.ok(intact(u.payload, numberOf(u), r.tag), `stream ${r.tag}: unit ${numberOf(u)} is its own, intact`);
            checked++;
          }
        }
        if (rnd() < 0.02) r.writable = !r.writable;
      }
      if (rnd() < 0.005 && readers.length > 3) readers.splice(Math.floor(rnd() * readers.length), 1)[0].close();
      if (rnd() < 0.005 && readers.length < 8) {
        join(streams[Math.floor(rnd() * streams.length)]);
        await tick();
      }
    }
    const shared = [...usedBy.values()].filter((u) => u.size > 1).length;
    assert.ok(checked > 5000, `checked ${checked}`);
    assert.ok(shared > 10, `chunks that served more than one stream: ${shared}`);
    const escaped = bus.chunks.counts.escaped;
    for (const st of streams) st.s.close('test over');
    assert.equal(bus.chunks.bytes.held, 0, 'closed streams hold no chunk');
    assert.equal(bus.chunks.counts.escaped, escaped, 'closing is not escaping');
  });
});
