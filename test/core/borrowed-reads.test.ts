import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { borrowedReadsActive, directReadsActive, pauseBorrowed, readBorrowed, resumeBorrowed } from '../../core/net/borrowed-reads';
import { prng } from '../support/prng';

interface Accepted {
  fast: boolean;
  got: Buffer[];
  arrayBuffers: Set<ArrayBufferLike>;
  events: string[];
  closed: Promise<void>;
  /** socket.bytesRead when 'end' came */
  bytesRead: number;
}

/** A server whose one connection is read with readBorrowed (after `before` ran on it); each chunk copied out. */
async function serveOnce(before?: (s: net.Socket) => void): Promise<{ port: number; accepted: Promise<Accepted>; close(): void }> {
  let done!: (a: Accepted) => void;
  const accepted = new Promise<Accepted>((r) => {
    done = r;
  });
  const srv = net.createServer({ pauseOnConnect: true }, (s) => {
    before?.(s);
    const a: Accepted = { fast: false, got: [], arrayBuffers: new Set(), events: [], closed: once(s, 'close').then(() => undefined), bytesRead: -1 };
    a.fast = readBorrowed(s, (chunk) => {
      a.arrayBuffers.add(chunk.buffer);
      a.got.push(Buffer.from(chunk));
    });
    s.on('end', () => {
      a.events.push('end');
      a.bytesRead = s.bytesRead;
    });
    s.on('error', (e) => a.events.push(`error ${(e as NodeJS.ErrnoException).code}`));
    s.on('close', () => a.events.push('close'));
    done(a);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { port: (srv.address() as net.AddressInfo).port, accepted, close: () => srv.close() };
}

describe('plugin-sdk readBorrowed (socket reads into one shared buffer)', () => {
  it('is active on this Node: an accepted socket takes the onread fields net.connect uses (a Node upgrade that moves them fails here)', () => {
    assert.equal(borrowedReadsActive(), true);
    assert.equal(directReadsActive(), true, "reads would go through node's onStreamRead: the binding's read state moved");
  });

  it('delivers every byte in order through one reused buffer, then end and close', async () => {
    const srv = await serveOnce();
    const rnd = prng(42);
    const sent = Buffer.alloc(600_000);
    for (let i = 0; i < sent.length; i++) sent[i] = Math.floor(rnd() * 256);
    const c = net.connect(srv.port, '127.0.0.1');
    for (let at = 0; at < sent.length; at += 7001) c.write(sent.subarray(at, at + 7001));
    c.end();
    const a = await srv.accepted;
    await a.closed;
    srv.close();
    assert.equal(a.fast, true);
    assert.ok(Buffer.concat(a.got).equals(sent), 'bytes differ');
    assert.ok(a.got.length > 1, 'expected several reads');
    // no Buffer per read: every chunk is a view of the same memory
    assert.equal(a.arrayBuffers.size, 1);
    assert.deepEqual(a.events, ['end', 'close']);
    // the handle counts what it read, past node's onStreamRead as through it
    assert.equal(a.bytesRead, sent.length);
  });

  it('a socket with a timeout set keeps it refreshed by every read, and times out once the reads stop', async () => {
    const timeouts: number[] = [];
    const t0 = Date.now();
    const srv = await serveOnce((s) => {
      s.setTimeout(150, () => timeouts.push(Date.now() - t0));
    });
    const c = net.connect(srv.port, '127.0.0.1');
    await once(c, 'connect');
    // a write every 40 ms for 600 ms: four times the timeout, and never 150 ms without a read
    for (let i = 0; i < 15; i++) {
      c.write(Buffer.alloc(100, i));
      await new Promise((r) => setTimeout(r, 40));
    }
    const a = await srv.accepted;
    assert.deepEqual(timeouts, [], `timed out while reading, at ${timeouts.join(', ')} ms`);
    const quiet = Date.now();
    while (timeouts.length === 0 && Date.now() - quiet < 2000) await new Promise((r) => setTimeout(r, 20));
    c.destroy();
    await a.closed;
    srv.close();
    assert.equal(timeouts.length, 1, 'no timeout once the reads stopped');
    assert.equal(Buffer.concat(a.got).length, 1500);
  });

  it("bytes already put back on the socket (a cluster hand-over's first bytes) come first", async () => {
    const srv = await serveOnce((s) => s.unshift(Buffer.from('HEAD:')));
    const c = net.connect(srv.port, '127.0.0.1', () => c.end('rest of it'));
    const a = await srv.accepted;
    await a.closed;
    srv.close();
    assert.equal(Buffer.concat(a.got).toString(), 'HEAD:rest of it');
  });

  it('a peer that resets the connection ends in close, not a hang', async () => {
    const srv = await serveOnce();
    const c = net.connect(srv.port, '127.0.0.1', () => c.write('abc', () => c.resetAndDestroy()));
    const a = await srv.accepted;
    await a.closed;
    srv.close();
    assert.equal(a.events.at(-1), 'close');
    assert.ok(a.events.includes('error ECONNRESET') || a.events.includes('end'), a.events.join(','));
  });

  it('pauseBorrowed stops the reads (TCP pushes back on the sender), resumeBorrowed restarts them: every byte, then end and close', async () => {
    let sock!: net.Socket;
    const srv = await serveOnce((s) => {
      sock = s;
    });
    const sent = Buffer.alloc(8 * 1024 * 1024, 0x5a);
    const c = net.connect(srv.port, '127.0.0.1');
    await once(c, 'connect');
    const a = await srv.accepted;
    c.write(sent.subarray(0, 1000));
    for (let i = 0; i < 200 && a.got.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(Buffer.concat(a.got).length, 1000);
    pauseBorrowed(sock);
    pauseBorrowed(sock); // twice is once
    let flushed = false;
    c.end(sent.subarray(1000), () => {
      flushed = true;
    });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(Buffer.concat(a.got).length, 1000, 'nothing read while paused');
    assert.equal(flushed, false, "the sender is held back: 8 MiB do not fit in the sockets' buffers");
    assert.equal(sock.isPaused(), false, 'the Readable stays flowing');
    resumeBorrowed(sock);
    resumeBorrowed(sock);
    await a.closed;
    srv.close();
    assert.ok(Buffer.concat(a.got).equals(sent), 'bytes differ');
    assert.equal(flushed, true);
    assert.deepEqual(a.events, ['end', 'close']);
  });

  it('pauseBorrowed and resumeBorrowed on a destroyed socket do nothing', async () => {
    let sock!: net.Socket;
    const srv = await serveOnce((s) => {
      sock = s;
    });
    const c = net.connect(srv.port, '127.0.0.1');
    const a = await srv.accepted;
    sock.destroy();
    pauseBorrowed(sock);
    resumeBorrowed(sock);
    await a.closed;
    c.destroy();
    srv.close();
    assert.deepEqual(a.events, ['close']);
  });
});
