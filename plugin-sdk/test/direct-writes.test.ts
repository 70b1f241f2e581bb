import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { DirectWriter, WritableAccount, directWritesActive } from '../direct-writes';
import { prng, randomBytes } from '../../test/support/prng';
import { until } from '../../test/support/until';

interface Pair {
  /** our side: the accepted socket, written with a DirectWriter */
  ours: net.Socket;
  /** the peer, paused until a test reads it */
  peer: net.Socket;
  got: Buffer[];
  errors: string[];
  close(): void;
}

/** A loopback connection whose accepted side is ours; the peer collects what it reads once resumed. */
async function connected(): Promise<Pair> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const accepted = once(srv, 'connection') as Promise<[net.Socket]>;
  const peer = net.connect((srv.address() as net.AddressInfo).port, '127.0.0.1');
  const [ours] = await accepted;
  await once(peer, 'connect');
  const got: Buffer[] = [];
  const errors: string[] = [];
  peer.pause();
  peer.on('data', (b: Buffer) => got.push(b));
  ours.on('error', (e) => errors.push(String((e as NodeJS.ErrnoException).code)));
  return {
    ours,
    peer,
    got,
    errors,
    close: () => {
      ours.destroy();
      peer.destroy();
      srv.close();
    },
  };
}

/** n bytes of seed `seed`'s sequence */
const seeded = (n: number, seed: number): Buffer => randomBytes(prng(seed), n);

/** the waits here are for loopback sockets: seconds are plenty */
const WAIT_MS = 5000;

describe('plugin-sdk DirectWriter (writes past the Writable, to the socket handle)', () => {
  it('is active on this Node: stream_wrap gives WriteWrap and the write state (a Node upgrade that moves them fails here)', () => {
    assert.equal(directWritesActive(), true);
  });

  it('hands writes the kernel takes whole to it at once: nothing pending, nothing in the Writable, counted in bytesWritten', async () => {
    const p = await connected();
    let settled = 0;
    const w = new DirectWriter(p.ours, () => settled++);
    const sent: Buffer[] = [];
    for (let i = 0; i < 20; i++) {
      const b = seeded(1000 + i * 37, i);
      sent.push(b);
      assert.equal(w.write(b), true);
      assert.equal(w.pending, 0, `write ${i} was queued`);
      assert.equal(p.ours.writableLength, 0);
    }
    const total = sent.reduce((n, b) => n + b.length, 0);
    assert.equal(p.ours.bytesWritten, total);
    p.peer.resume();
    await until(() => Buffer.concat(p.got).length === total, 'the peer to read every byte', WAIT_MS);
    assert.ok(Buffer.concat(p.got).equals(Buffer.concat(sent)), 'bytes differ');
    assert.equal(settled, 0, 'nothing was ever pending, so nothing settled');
    assert.deepEqual(p.errors, []);
    p.close();
  });

  it('counts what the kernel could not take as pending, keeps order with socket.write after it, and says when it is sent', async () => {
    const p = await connected();
    let settled = 0;
    const w = new DirectWriter(p.ours, () => settled++);
    const sent: Buffer[] = [];
    // the peer does not read: once both sides' buffers are full a write is only partly taken and libuv queues the rest
    let i = 0;
    while (w.pending === 0 && i < 5000) {
      const b = seeded(48 * 1024, i++);
      sent.push(b);
      assert.equal(w.write(b), true);
    }
    assert.ok(w.pending > 0, `the kernel took ${i} writes of 48 KiB whole`);
    assert.equal(p.ours.writableLength, 0, 'the Writable holds none of it');
    // more direct writes queue behind it; then the Writable's own, which must come after them on the wire
    const queued = seeded(10_000, 9001);
    sent.push(queued);
    assert.equal(w.write(queued), true);
    const viaWritable = seeded(30_000, 9002);
    sent.push(viaWritable);
    p.ours.write(viaWritable);
    // the Writable now holds bytes: a direct write would jump them, so it is refused, and send() goes behind them
    assert.equal(w.write(Buffer.alloc(10)), false);
    const sentBehind = seeded(5_000, 9003);
    sent.push(sentBehind);
    w.send(sentBehind);
    assert.equal(w.backlog, p.ours.writableLength + w.pending);
    assert.ok(p.ours.writableLength >= viaWritable.length + sentBehind.length, 'both went through the Writable');
    assert.equal(settled, 0);
    const total = sent.reduce((n, b) => n + b.length, 0);
    p.peer.resume();
    await until(() => Buffer.concat(p.got).length === total, 'the peer to read every byte', WAIT_MS);
    assert.ok(Buffer.concat(p.got).equals(Buffer.concat(sent)), 'bytes differ or came out of order');
    assert.equal(w.pending, 0);
    assert.equal(settled, 1, 'settled once, when the last queued direct write was sent');
    assert.deepEqual(p.errors, []);
    p.close();
  });

  it('refuses while the socket is corked or ended, so the caller writes through the Writable', async () => {
    const p = await connected();
    const w = new DirectWriter(p.ours, () => undefined);
    p.ours.cork();
    assert.equal(w.write(Buffer.from('a')), false);
    p.ours.uncork();
    assert.equal(w.write(Buffer.from('b')), true);
    p.ours.end();
    assert.equal(w.write(Buffer.from('c')), false);
    p.peer.resume();
    await once(p.peer, 'end');
    assert.equal(Buffer.concat(p.got).toString(), 'b');
    p.close();
  });

  it('destroys the socket with the write error when the peer is gone, as socket.write does, and never throws', async () => {
    const p = await connected();
    const w = new DirectWriter(p.ours, () => undefined);
    // the peer resets the connection: the next writes fail with EPIPE or ECONNRESET
    p.peer.resetAndDestroy();
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 5 && !p.ours.destroyed; i++) w.write(Buffer.alloc(1000));
    await until(() => p.ours.destroyed, 'our socket to be destroyed', WAIT_MS);
    await until(() => p.errors.length > 0, "the socket's error", WAIT_MS);
    assert.ok(['EPIPE', 'ECONNRESET'].includes(p.errors[0]!), p.errors[0]);
    assert.equal(w.write(Buffer.alloc(10)), false, 'a destroyed socket takes no direct write');
    p.close();
  });

  it("sends nothing once a socket is destroyed, and takes no write with `clear` after its 'close'", async () => {
    // The writer keeps the handle it read (each read of socket._handle is a megamorphic load) until the socket's
    // 'close', which node emits from the handle's close callback while the handle is alive. Between a destroy and
    // that, a write reaches a closed handle: refused, nothing sent, no error event, nothing thrown.
    const p = await connected();
    p.peer.resume();
    const w = new DirectWriter(p.ours, () => undefined);
    for (let i = 0; i < 10; i++) assert.equal(w.write(seeded(1000, i), true), true);
    p.ours.destroy();
    w.write(Buffer.alloc(10, 0xee), true);
    await once(p.ours, 'close');
    // (node has freed the handle's native side by now: a write to it would be a write to freed memory)
    await new Promise((r) => setImmediate(r));
    assert.equal(w.write(Buffer.alloc(10, 0xee), true), false, 'after its close: not written');
    assert.equal(w.pending, 0);
    assert.deepEqual(p.errors, []);
    await once(p.peer, 'end');
    const sent = Buffer.concat(Array.from({ length: 10 }, (_, i) => seeded(1000, i)));
    assert.ok(Buffer.concat(p.got).equals(sent), 'the ten writes before the destroy, and nothing after');
    p.close();
  });

  it('settles the bytes still pending when the socket is destroyed under them', async () => {
    const p = await connected();
    let settled = 0;
    const w = new DirectWriter(p.ours, () => settled++);
    for (let i = 0; w.pending === 0 && i < 5000; i++) w.write(Buffer.alloc(48 * 1024, i));
    assert.ok(w.pending > 0);
    p.ours.destroy();
    await once(p.ours, 'close');
    await until(() => w.pending === 0, 'the cancelled write to be reported', WAIT_MS);
    assert.equal(settled, 1);
    assert.deepEqual(p.errors, [], 'a write cancelled by our own destroy is no error');
    p.close();
  });
});

describe("plugin-sdk WritableAccount (a sole writer's account of what it has in node's Writable)", () => {
  it('is clear while nothing of its writes is in node, and keeps order between them and direct writes', async () => {
    const p = await connected();
    const a = new WritableAccount(p.ours);
    const w = new DirectWriter(p.ours, () => undefined);
    assert.equal(a.clear, true, 'a socket nothing was written to');
    assert.equal(a.held(), 0);
    // more than loopback's buffers take while the peer reads nothing: some stays in node
    const big = seeded(16 * 1024 * 1024, 1);
    a.write(big);
    assert.equal(a.clear, false);
    assert.ok(a.held() > 0, 'bytes held by node');
    const after = seeded(1000, 2);
    // not clear: the writer reads node's state, finds bytes there, and goes through node after them, counted
    assert.equal(w.send(after, a), false, 'through node');
    p.peer.resume();
    await until(() => a.clear, 'the account to clear once node has called back for both writes', WAIT_MS);
    assert.equal(a.held(), 0);
    const last = seeded(1000, 3);
    assert.equal(w.send(last, a), true, 'clear: past the Writable');
    const all = Buffer.concat([big, after, last]);
    await until(() => Buffer.concat(p.got).length >= all.length, 'every byte', WAIT_MS);
    assert.ok(Buffer.concat(p.got).equals(all), 'in the order written');
    assert.deepEqual(p.errors, []);
    p.close();
  });

  it('is not clear when made on a socket node holds bytes of, until it reads the Writable empty', async () => {
    const p = await connected();
    p.peer.resume();
    p.ours.cork();
    p.ours.write('someone else');
    const a = new WritableAccount(p.ours);
    assert.equal(a.clear, false);
    assert.equal(a.held(), 12);
    p.ours.uncork();
    await until(() => a.held() === 0, 'node to hand the bytes on', WAIT_MS);
    assert.equal(a.clear, true);
    p.close();
  });

  it('counts a send the writer cannot make past the Writable (its socket closed) until node calls back', async () => {
    // DirectWriter.send with an account: what cannot go past node (no handle, TLS, a Node without the direct path)
    // goes through node and into the account, so a writer's backpressure never misses it
    const p = await connected();
    const a = new WritableAccount(p.ours);
    const w = new DirectWriter(p.ours, () => undefined);
    p.ours.destroy();
    await once(p.ours, 'close');
    assert.equal(w.send(Buffer.alloc(10), a), false);
    assert.equal(a.clear, false, 'the write is in the account');
    // node calls a destroyed socket's write back with its error, a tick later
    await until(() => a.clear, 'the account to clear once node has called back', WAIT_MS);
    p.close();
  });
});
