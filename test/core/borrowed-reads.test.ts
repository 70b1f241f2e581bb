import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { borrowedReadsActive, readBorrowed } from '../../core/net/borrowed-reads';
import { prng } from '../support/prng';

interface Accepted {
  fast: boolean;
  got: Buffer[];
  arrayBuffers: Set<ArrayBufferLike>;
  events: string[];
  closed: Promise<void>;
}

/** A server whose one connection is read with readBorrowed (after `before` ran on it); each chunk copied out. */
async function serveOnce(before?: (s: net.Socket) => void): Promise<{ port: number; accepted: Promise<Accepted>; close(): void }> {
  let done!: (a: Accepted) => void;
  const accepted = new Promise<Accepted>((r) => {
    done = r;
  });
  const srv = net.createServer({ pauseOnConnect: true }, (s) => {
    before?.(s);
    const a: Accepted = { fast: false, got: [], arrayBuffers: new Set(), events: [], closed: once(s, 'close').then(() => undefined) };
    a.fast = readBorrowed(s, (chunk) => {
      a.arrayBuffers.add(chunk.buffer);
      a.got.push(Buffer.from(chunk));
    });
    s.on('end', () => a.events.push('end'));
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
});
