import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { ReadSlices, type SliceReader } from '../../core/net/read-slices';
import { prng } from '../support/prng';

/** a clock the test moves: each handled read costs `costMs` of it */
class TestClock {
  t = 1000;
  now = () => this.t;
}

const turn = () => new Promise<void>((r) => setImmediate(r));

interface Probe {
  reader: SliceReader;
  got: Buffer[];
  /** the very objects handed to the handler */
  seen: Buffer[];
  pauses: number;
  resumes: number;
  errors: unknown[];
}

function probe(slices: ReadSlices, clock: TestClock, costMs: number, log?: string[], name = ''): Probe {
  const p: Probe = { got: [], seen: [], pauses: 0, resumes: 0, errors: [] } as unknown as Probe;
  p.reader = slices.reader(
    (chunk) => {
      p.seen.push(chunk);
      p.got.push(Buffer.from(chunk));
      log?.push(name);
      clock.t += costMs;
    },
    { pause: () => p.pauses++, resume: () => p.resumes++, onError: (e) => p.errors.push(e) },
  );
  return p;
}

describe('plugin-sdk ReadSlices (media reads in slices of the event loop)', () => {
  it('under the budget hands each read over at once, the very buffer, no copy', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(2, clock.now);
    const a = probe(s, clock, 0.1);
    const chunks = Array.from({ length: 10 }, (_x, i) => Buffer.from([i, i, i]));
    for (const c of chunks) a.reader.deliver(c);
    assert.equal(a.seen.length, 10);
    for (let i = 0; i < 10; i++) assert.equal(a.seen[i], chunks[i]);
    assert.deepEqual({ direct: s.stats.direct, deferred: s.stats.deferred }, { direct: 10, deferred: 0 });
    await turn();
    assert.equal(s.sliceStart, -1, 'the slice closes at the end of the turn');
  });

  it('past the budget copies reads aside and hands them over at the end of the turn, in order per reader and across readers', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(2, clock.now);
    const log: string[] = [];
    const a = probe(s, clock, 1, log, 'a');
    const b = probe(s, clock, 1, log, 'b');
    const c = probe(s, clock, 1, log, 'c');
    const src = Buffer.from('0123456789');
    a.reader.deliver(src.subarray(0, 2)); // t 1000 -> 1001
    b.reader.deliver(src.subarray(2, 4)); // 1001 -> 1002
    c.reader.deliver(src.subarray(4, 6)); // 1002: not past 2 ms yet -> 1003
    b.reader.deliver(src.subarray(6, 7)); // past: set aside (b first)
    a.reader.deliver(src.subarray(7, 8)); // set aside (a second)
    b.reader.deliver(src.subarray(8, 9)); // b's again: after its first, same place in the queue
    c.reader.deliver(src.subarray(9, 10));
    assert.deepEqual(log, ['a', 'b', 'c']);
    src.fill(0x78); // the reads were borrowed: what was set aside is a copy
    await turn();
    // b's two (1 ms each) and a's: past 2 ms, so c's waits for the next turn
    assert.deepEqual(log, ['a', 'b', 'c', 'b', 'b', 'a']);
    await turn();
    assert.deepEqual(log, ['a', 'b', 'c', 'b', 'b', 'a', 'c']);
    assert.equal(Buffer.concat(a.got).toString(), '017');
    assert.equal(Buffer.concat(b.got).toString(), '2368');
    assert.equal(Buffer.concat(c.got).toString(), '459');
    assert.equal(s.stats.deferred, 4);
    assert.equal(s.stats.deferredBytes, 4);
    assert.equal(s.backlogBytes, 0);
  });

  it('hands set-aside reads over one budget a turn: the rest waits for the next turn, after what the loop read meanwhile', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(2, clock.now);
    const log: string[] = [];
    const readers = Array.from({ length: 10 }, (_x, i) => probe(s, clock, 1, log, `r${i}`));
    clock.t += 0; // first read opens the slice
    for (const r of readers) r.reader.deliver(Buffer.from('x'));
    // r0, r1, r2 at once (t 1000..1003), the other 7 set aside
    assert.equal(log.length, 3);
    assert.equal(s.backlog, 7);
    await turn();
    // the drain handles reads until more than 2 ms went: 3 of them
    assert.equal(log.length, 6);
    assert.equal(s.stats.overrun, 1);
    // a read that came in the next poll phase, from a reader with nothing set aside, waits behind the older ones
    const late = probe(s, clock, 1, log, 'late');
    late.reader.deliver(Buffer.from('y'));
    assert.equal(late.got.length, 0, 'the slice is spent: set aside');
    for (let i = 0; i < 5 && log.length < 11; i++) await turn();
    assert.deepEqual(log, ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9', 'late']);
    await turn();
    assert.equal(s.sliceStart, -1);
    assert.equal(s.backlog, 0);
  });

  it('pauses a reader whose set-aside bytes pass its limit, and resumes it once they are handled', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(1, clock.now, 1000, 1 << 20);
    const a = probe(s, clock, 5);
    a.reader.deliver(Buffer.alloc(10)); // opens, costs 5 ms
    for (let i = 0; i < 6; i++) a.reader.deliver(Buffer.alloc(300, i));
    assert.equal(a.pauses, 1, 'paused once past 1000 bytes (at 1200)');
    assert.equal(s.stats.paused, 1);
    assert.equal(a.resumes, 0);
    await turn();
    assert.equal(a.got.length, 7);
    assert.equal(a.resumes, 1);
    assert.deepEqual(
      a.got.slice(1).map((g) => g[0]),
      [0, 1, 2, 3, 4, 5],
    );
  });

  it("pauses each reader that sets a read aside once all readers' set-aside bytes pass the backlog limit", async () => {
    const clock = new TestClock();
    const s = new ReadSlices(1, clock.now, 1 << 20, 2000);
    const first = probe(s, clock, 5);
    first.reader.deliver(Buffer.alloc(1));
    const rs = Array.from({ length: 5 }, () => probe(s, clock, 0));
    for (const r of rs) r.reader.deliver(Buffer.alloc(600));
    assert.deepEqual(
      rs.map((r) => r.pauses),
      [0, 0, 0, 1, 1],
      'past 2000 bytes from the fourth on',
    );
    await turn();
    assert.deepEqual(
      rs.map((r) => r.resumes),
      [0, 0, 0, 1, 1],
    );
    assert.equal(s.backlogBytes, 0);
  });

  it('with every copy slab taken hands reads over at once, after what their reader set aside: memory stays bounded', async () => {
    const clock = new TestClock();
    // no pausing here: only the slabs bound it
    const s = new ReadSlices(1, clock.now, Infinity, Infinity);
    const log: string[] = [];
    const a = probe(s, clock, 5, log, 'a');
    a.reader.deliver(Buffer.from('open'));
    const readers = Array.from({ length: 40 }, (_x, i) => probe(s, clock, 0, log, `r${i}`));
    // 256 KiB each: a slab each; 32 slabs (8 MiB) at most
    for (const r of readers) r.reader.deliver(Buffer.alloc(256 * 1024, 1));
    assert.equal(s.stats.deferred, 32);
    assert.equal(s.stats.full, 8);
    assert.deepEqual(log.slice(1), ['r32', 'r33', 'r34', 'r35', 'r36', 'r37', 'r38', 'r39']);
    // a reader with reads set aside and no room for the next: its older reads first, then the new one
    const x = probe(s, clock, 0, log, 'x');
    const y = probe(s, clock, 0, log, 'y');
    log.length = 0;
    await turn(); // frees the slabs
    x.reader.deliver(Buffer.from('x1')); // a new slice: at once
    clock.t += 10;
    x.reader.deliver(Buffer.from('x2')); // past it: set aside
    for (let i = 0; i < 31; i++) y.reader.deliver(Buffer.alloc(256 * 1024, 2)); // 32 slabs taken (x2 holds one)
    x.reader.deliver(Buffer.alloc(256 * 1024, 3)); // no room: x2 first, then this one, at once
    assert.deepEqual(
      x.got.map((g) => g.length),
      [2, 2, 256 * 1024],
    );
    assert.equal(x.got[1].toString(), 'x2');
    for (let i = 0; i < 40 && s.backlog > 0; i++) await turn();
    assert.equal(y.got.length, 31);
  });

  it('lets go of spare slabs a burst made once 10 s pass without needing them, and keeps those still needed', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(1, clock.now, Infinity, Infinity);
    const a = probe(s, clock, 5);
    const burst = Array.from({ length: 12 }, () => probe(s, clock, 0));
    a.reader.deliver(Buffer.from('open'));
    for (const r of burst) r.reader.deliver(Buffer.alloc(256 * 1024, 1)); // a slab each
    assert.equal(s.slabBytes, 12 * 256 * 1024);
    await turn();
    assert.equal(s.backlog, 0);
    // steady load afterwards: each turn two readers set aside 100 KiB (one slab in use at a time, sometimes two)
    const steady = [probe(s, clock, 0), probe(s, clock, 0)];
    const turnOfLoad = async () => {
      a.reader.deliver(Buffer.from('t')); // opens the slice, costs 5 ms: the rest is set aside
      for (const r of steady) r.reader.deliver(Buffer.alloc(100 * 1024, 2));
      await turn();
    };
    // within 10 s of the burst nothing is let go (a burst that follows finds its slabs)
    for (let i = 0; i < 5; i++) {
      clock.t += 1500;
      await turnOfLoad();
    }
    assert.equal(s.slabBytes, 12 * 256 * 1024, 'kept within the period of the burst');
    // the first trim keeps what the burst's period needed; the next one lets the rest go
    for (let i = 0; i < 20; i++) {
      clock.t += 1500;
      await turnOfLoad();
    }
    const after = s.slabBytes / (256 * 1024);
    assert.ok(after >= 1 && after <= 2, `${after} slabs kept for a load that needs one or two`);
    // and the steady load's reads all arrived whole
    for (const r of steady) assert.ok(r.got.length === 25 && r.got.every((g) => g.length === 100 * 1024 && g[0] === 2));
    // a new burst makes slabs again, as many as it needs
    a.reader.deliver(Buffer.from('open'));
    clock.t += 10;
    for (const r of burst) r.reader.deliver(Buffer.alloc(256 * 1024, 3));
    assert.ok(s.slabBytes >= 12 * 256 * 1024);
    await turn();
    assert.ok(burst.every((r) => r.got.length === 2 && r.got[1][0] === 3));
  });

  it("flush hands a reader's set-aside reads over now, once", async () => {
    const clock = new TestClock();
    const s = new ReadSlices(1, clock.now);
    const a = probe(s, clock, 5);
    a.reader.deliver(Buffer.from('a'));
    a.reader.deliver(Buffer.from('b'));
    a.reader.deliver(Buffer.from('c'));
    assert.equal(a.got.length, 1);
    a.reader.flush();
    assert.equal(Buffer.concat(a.got).toString(), 'abc');
    await turn();
    await turn();
    assert.equal(Buffer.concat(a.got).toString(), 'abc');
  });

  it('a handler that throws on a set-aside read goes to onError; the other reads are still handled', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(1, clock.now);
    const errs: unknown[] = [];
    const got: string[] = [];
    const bad = s.reader(
      (c) => {
        clock.t += 5;
        if (c.toString() === 'boom') throw new Error('boom');
        got.push(c.toString());
      },
      { pause() {}, resume() {}, onError: (e) => errs.push(e) },
    );
    const good = probe(s, clock, 0);
    bad.deliver(Buffer.from('first'));
    bad.deliver(Buffer.from('boom'));
    bad.deliver(Buffer.from('after'));
    good.reader.deliver(Buffer.from('g'));
    await turn();
    await turn();
    assert.equal(errs.length, 1);
    assert.deepEqual(got, ['first', 'after']);
    assert.equal(Buffer.concat(good.got).toString(), 'g');
  });

  it('sets an owned read (a datagram) aside as it is, never pauses for it, and past the limits hands it over at once', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(1, clock.now, 1000, 1 << 20);
    const a = probe(s, clock, 5);
    a.reader.deliver(Buffer.from('open'), true);
    const d = Array.from({ length: 5 }, (_x, i) => Buffer.alloc(300, i));
    for (const x of d) a.reader.deliver(x, true);
    // 3 x 300 fit under 1000; the fourth does not: the three first, then it, at once; the fifth set aside again
    assert.equal(a.pauses, 0);
    assert.equal(a.seen.length, 5);
    assert.equal(a.seen[1], d[0], 'the very buffer, not a copy');
    assert.equal(a.seen[4], d[3]);
    assert.equal(s.stats.full, 1);
    await turn();
    assert.equal(a.seen[5], d[4]);
    assert.deepEqual(
      a.got.slice(1).map((g) => g[0]),
      [0, 1, 2, 3, 4],
    );
    assert.equal(s.backlogBytes, 0);
  });

  it('budget 0 hands every read over at once', async () => {
    const clock = new TestClock();
    const s = new ReadSlices(0, clock.now);
    const a = probe(s, clock, 100);
    for (let i = 0; i < 5; i++) a.reader.deliver(Buffer.from([i]));
    assert.equal(a.got.length, 5);
    assert.equal(s.stats.deferred, 0);
    assert.equal(s.sliceStart, -1, 'no slice opened, nothing scheduled');
  });

  it("keeps every reader's bytes whole and in order through slab reuse over many turns (randomised)", async () => {
    const rnd = prng(7);
    const clock = new TestClock();
    const s = new ReadSlices(2, clock.now, 64 * 1024, 512 * 1024);
    const n = 30;
    const sent: Buffer[][] = Array.from({ length: n }, () => []);
    const readers = Array.from({ length: n }, () => probe(s, clock, 0.3));
    for (let t = 0; t < 300; t++) {
      const reads = Math.floor(rnd() * 40);
      for (let k = 0; k < reads; k++) {
        const i = Math.floor(rnd() * n);
        const len = 1 + Math.floor(rnd() * (rnd() < 0.1 ? 70_000 : 3000));
        const b = Buffer.allocUnsafe(len);
        for (let j = 0; j < len; j += 97) b[j] = Math.floor(rnd() * 256);
        sent[i].push(Buffer.from(b));
        readers[i].reader.deliver(b);
        b.fill(0xee); // borrowed: the caller reuses its buffer
      }
      await turn();
    }
    for (let i = 0; i < 100 && s.backlog > 0; i++) await turn();
    for (let i = 0; i < n; i++) assert.ok(Buffer.concat(readers[i].got).equals(Buffer.concat(sent[i])), `reader ${i}`);
    assert.ok(s.stats.deferred > 100, `the test reached the set-aside path (${s.stats.deferred})`);
    assert.ok(s.stats.overrun > 0);
  });

  it('on real sockets: a paused reader stops the socket (TCP pushes back) and gets every byte once resumed', async () => {
    const clock = new TestClock();
    // every read past the first is set aside, and a reader is paused past 64 KiB
    const s = new ReadSlices(0.0001, clock.now, 64 * 1024, 1 << 30);
    let got = 0;
    const parts: Buffer[] = [];
    let server!: net.Socket;
    const srv = net.createServer((sock) => {
      server = sock;
      // as ctx.net.readSliced reads a terminal
      const r = s.readSocket(
        sock,
        (c) => {
          parts.push(Buffer.from(c));
          got += c.length;
          clock.t += 1;
        },
        () => sock.destroy(),
      );
      sock.on('close', () => r.flush());
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = net.connect((srv.address() as net.AddressInfo).port, '127.0.0.1');
    await once(c, 'connect');
    const rnd = prng(3);
    const sent = Buffer.alloc(4 * 1024 * 1024);
    for (let i = 0; i < sent.length; i += 13) sent[i] = Math.floor(rnd() * 256);
    c.end(sent);
    await once(c, 'close');
    for (let i = 0; i < 200 && got < sent.length; i++) await new Promise((r) => setTimeout(r, 5));
    srv.close();
    assert.ok(s.stats.paused > 0, 'paused at least once');
    assert.equal(got, sent.length);
    assert.ok(Buffer.concat(parts).equals(sent));
    assert.ok(server);
  });
});
