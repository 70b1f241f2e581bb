/**
 * Publishers and players that misbehave are dropped with a log line, and what they sent costs the gateway nothing
 * that stays: garbage chunks, a 16 MiB chunk size, a message larger than maxMessageBytes, too many chunk streams,
 * silence after the handshake. The gateway's RSS after hundreds of them stays where it was.
 */
import assert from 'node:assert/strict';
import { collector } from '../../../test/support/gc';
import { ffmpegPublish, HOST, KEY, RawRtmp, startRtmpGateway, type RtmpGateway } from './helpers';
import { waitFor } from '../../../test/support/until';

/** an AMF0 string */
const str = (s: string): Buffer => {
  const b = Buffer.alloc(3 + Buffer.byteLength(s));
  b[0] = 2;
  b.writeUInt16BE(Buffer.byteLength(s), 1);
  b.write(s, 3);
  return b;
};
const num = (n: number): Buffer => {
  const b = Buffer.alloc(9);
  b[0] = 0;
  b.writeDoubleBE(n, 1);
  return b;
};
/** an AMF0 object of string properties */
const obj = (o: Record<string, string>): Buffer => {
  const parts: Buffer[] = [Buffer.from([3])];
  for (const [k, v] of Object.entries(o)) {
    const key = Buffer.alloc(2 + k.length);
    key.writeUInt16BE(k.length, 0);
    key.write(k, 2);
    parts.push(key, str(v));
  }
  parts.push(Buffer.from([0, 0, 9]));
  return Buffer.concat(parts);
};

function connectCommand(port: number): Buffer {
  return RawRtmp.message(3, 20, Buffer.concat([str('connect'), num(1), obj({ app: 'push', tcUrl: `rtmp://${HOST}:${port}/push` })]));
}

describe('rtmp: misbehaving peers are dropped, memory stays flat', function () {
  this.timeout(120_000);
  let g: RtmpGateway;

  before(async () => {
    g = await startRtmpGateway({ handshakeTimeoutSec: 2, maxMessageBytes: 1024 * 1024 }, { outputs: false, captureLogs: true });
  });
  after(async () => g?.stop());

  const dropLines = (reason: RegExp) => g.gw.logs.filter((l) => l.msg === 'RTMP connection dropped' && reason.test(String(l.reason)));

  it('drops a peer whose first byte is not RTMP', async () => {
    const before = dropLines(/not RTMP/).length;
    const { connect } = await import('node:net');
    const s = connect(g.port, HOST);
    s.on('error', () => undefined);
    s.write(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
    await waitFor('the close', () => s.destroyed || s.readableEnded, 5000);
    assert.equal(dropLines(/not RTMP/).length, before + 1);
  });

  it('drops a 16 MiB chunk size with a log line', async () => {
    const c = await RawRtmp.connect(g.port);
    const size = Buffer.alloc(4);
    size.writeUInt32BE(16 * 1024 * 1024, 0);
    c.write(RawRtmp.message(2, 1, size));
    assert.equal(await c.waitClosed(), true, 'the gateway kept the connection');
    assert.ok(dropLines(/chunk size 16777216/).length >= 1, JSON.stringify(g.gw.logs.slice(-3)));
  });

  it('drops a message announced larger than maxMessageBytes before reading it', async () => {
    const c = await RawRtmp.connect(g.port);
    c.write(connectCommand(g.port));
    // a video message of 15 MiB on a publish-less connection: its header and a first byte
    c.write(RawRtmp.message(6, 9, Buffer.alloc(1), 1, 15 * 1024 * 1024));
    assert.equal(await c.waitClosed(), true);
    assert.ok(dropLines(/a message of 15728640 bytes/).length >= 1);
  });

  it('drops garbage chunks (random bytes after the handshake)', async () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff;
    let closed = 0;
    for (let i = 0; i < 10; i++) {
      const c = await RawRtmp.connect(g.port);
      const junk = Buffer.alloc(64 * 1024);
      for (let k = 0; k < junk.length; k++) junk[k] = rnd();
      c.write(junk);
      if (await c.waitClosed(5000)) closed++;
      c.destroy();
    }
    // random bytes may by chance form a valid but idle header: the handshake deadline ends those
    assert.equal(closed, 10);
  });

  it('drops a peer that opens more chunk streams than any encoder uses', async () => {
    const c = await RawRtmp.connect(g.port);
    const parts: Buffer[] = [];
    // each the first chunk (128 bytes, the default chunk size) of a message never finished, on chunk streams 3..63
    // and then 2-byte ids
    for (let cid = 3; cid < 64; cid++) parts.push(RawRtmp.message(cid, 9, Buffer.alloc(128), 1, 1000));
    for (let id = 0; id < 40; id++) {
      const h = Buffer.alloc(13);
      h[0] = 0; // fmt 0, 2-byte basic header
      h[1] = id;
      h.writeUIntBE(1000, 5, 3);
      h[8] = 9;
      parts.push(h, Buffer.alloc(128));
    }
    c.write(Buffer.concat(parts));
    assert.equal(await c.waitClosed(), true);
    assert.ok(dropLines(/chunk streams/).length >= 1);
  });

  it('closes a connection that never plays or publishes (handshakeTimeoutSec)', async () => {
    const c = await RawRtmp.connect(g.port);
    c.write(connectCommand(g.port));
    assert.equal(await c.waitClosed(6000), true);
    assert.ok(dropLines(/no play or publish/).length >= 1);
  });

  it('keeps RSS flat across 300 hostile publishers announcing large messages', async () => {
    const round = async () => {
      const batch: RawRtmp[] = [];
      for (let i = 0; i < 30; i++) {
        const c = await RawRtmp.connect(g.port);
        // a message of 1 MiB (the cap) on each of several chunk streams, each half sent: the most a peer may hold
        const body = Buffer.alloc(512 * 1024, 0x55);
        c.write(RawRtmp.message(4, 8, body.subarray(0, 100), 1, 1024 * 1024));
        c.write(RawRtmp.message(5, 9, body.subarray(0, 100), 1, 1024 * 1024));
        c.write(RawRtmp.message(7, 9, body.subarray(0, 100), 1, 1024 * 1024));
        batch.push(c);
      }
      await Promise.all(batch.map((c) => c.waitClosed(10_000)));
      for (const c of batch) c.destroy();
    };
    const gc = collector();
    await round();
    gc();
    const base = process.memoryUsage().rss;
    for (let i = 0; i < 10; i++) await round();
    gc();
    const grown = process.memoryUsage().rss - base;
    // 300 connections each allowed ~3 MiB while alive: what stays afterwards must be far below that
    assert.ok(grown < 64 * 1024 * 1024, `RSS grew ${Math.round(grown / 1048576)} MiB`);
  });

  it('still serves a well-behaved publisher afterwards', async () => {
    const enc = ffmpegPublish(`rtmp://${HOST}:${g.port}/push/calm_2?key=${KEY}`, { seconds: 6, audio: 'none' });
    try {
      await waitFor('the publisher', () => g.rtmp.publisherStats().find((p) => p.stream === 'calm_2_1' && p.units > 10), 20_000);
    } finally {
      enc.kill('SIGKILL');
    }
  });
});
