/**
 * The bench's late player (support/late-joiner.ts): it must read a live stream for the time given and then let go of
 * it (a player left open would count in the window), and say 0 when nothing answers rather than throw.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { joinMidGop } from './support/late-joiner';

describe('bench late joiner', () => {
  it('reads a stream for the time given, then closes it', async () => {
    let closedAt = 0;
    const srv = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'video/x-flv' });
      const t = setInterval(() => res.write(Buffer.alloc(1000)), 20);
      res.on('close', () => {
        clearInterval(t);
        closedAt = performance.now();
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    try {
      const started = performance.now();
      const got = await joinMidGop(`http://127.0.0.1:${(srv.address() as AddressInfo).port}/live/x.flv`, 300);
      assert.ok(got >= 5000 && got <= 20000, `read ${got} bytes in 300 ms of 1000 bytes every 20 ms`);
      for (let i = 0; i < 50 && closedAt === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(closedAt > started, 'the server never saw the late player go');
    } finally {
      srv.close();
    }
  });

  it('says 0 when nothing answers', async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    assert.equal(await joinMidGop(`http://127.0.0.1:${port}/live/x.flv`, 200), 0);
  });
});
