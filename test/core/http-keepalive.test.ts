/**
 * gateway.httpKeepAliveSec: how long an idle HTTP connection stays open between requests, on the API port and on
 * plugins' HTTP listeners. Node's own 5 s closed connections that platforms' clients (Go 90 s, OkHttp 5 min, load
 * balancers 60 s) still held, and the request they sent on one at that moment failed with ECONNRESET (seen in the
 * soak: `POST /strm/open`, `socket hang up`). Real sockets on loopback: a raw client sends keep-alive requests and
 * watches when the gateway closes.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';

/** a raw keep-alive client: one connection, requests one after another, and when the server closed it */
class RawClient {
  private readonly sock: net.Socket;
  private buf = '';
  closedAt: number | undefined;

  constructor(port: number) {
    this.sock = net.connect(port, '127.0.0.1');
    this.sock.setEncoding('latin1');
    this.sock.on('data', (d: string) => {
      this.buf += d;
    });
    this.sock.on('close', () => {
      this.closedAt = Date.now();
    });
    this.sock.on('error', () => undefined);
  }

  async ready(): Promise<void> {
    await once(this.sock, 'connect');
  }

  /** one GET; the reply's head (status line and headers, lower-cased names) */
  async get(path: string): Promise<Record<string, string>> {
    this.buf = '';
    this.sock.write(`GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\n\r\n`);
    const deadline = Date.now() + 5000;
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head: Record<string, string> = {};
        const [status, ...lines] = this.buf.slice(0, end).split('\r\n');
        head[':status'] = status;
        for (const l of lines) {
          const i = l.indexOf(':');
          head[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
        }
        const len = Number(head['content-length'] ?? 0);
        if (this.buf.length >= end + 4 + len) return head;
      }
      if (this.closedAt !== undefined) throw new Error('the gateway closed the connection before replying');
      if (Date.now() > deadline) throw new Error(`no whole reply in 5 s: ${JSON.stringify(this.buf.slice(0, 200))}`);
      await sleep(5);
    }
  }

  destroy(): void {
    this.sock.destroy();
  }
}

describe('HTTP keep-alive (gateway.httpKeepAliveSec)', function () {
  this.timeout(30_000);
  let gw: TestGateway | undefined;
  const clients: RawClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await gw?.stop();
    gw = undefined;
  });

  async function client(port: number): Promise<RawClient> {
    const c = new RawClient(port);
    clients.push(c);
    await c.ready();
    return c;
  }

  it("keeps idle connections 65 s by default and says so, on the API port and a plugin's HTTP port", async () => {
    gw = await startTestGateway({ plugins: [{ name: 'flv-out' }] });
    for (const port of [gw.ports['gateway.httpPort'], gw.ports['flv-out.port']]) {
      const c = await client(port);
      const head = await c.get('/healthz');
      assert.match(head[':status'], /^HTTP\/1\.1 (200|404)/);
      assert.equal(head['keep-alive'], 'timeout=65', `port ${port}`);
      assert.equal(head.connection, 'keep-alive');
    }
  });

  it('closes a connection idle past the configured time, and not before; a connection in use stays', async () => {
    gw = await startTestGateway({ plugins: [], gateway: { httpKeepAliveSec: 1 } });
    const port = gw.ports['gateway.httpPort'];
    const idle = await client(port);
    const busy = await client(port);
    assert.equal((await idle.get('/healthz'))['keep-alive'], 'timeout=1');
    const repliedAt = Date.now();
    // the busy one asks every 300 ms, each time well inside the idle limit
    for (let i = 0; i < 8; i++) {
      await sleep(300);
      assert.equal((await busy.get('/healthz'))[':status'].slice(9, 12), '200');
    }
    // (a loaded machine's timers run late: the bound above is Node's own 5 s, which the key must have replaced)
    while (idle.closedAt === undefined && Date.now() - repliedAt < 4000) await sleep(20);
    assert.notEqual(idle.closedAt, undefined, 'the idle connection was closed within 4 s');
    const after = idle.closedAt! - repliedAt;
    assert.ok(after >= 900 && after < 4000, `closed ${after} ms after its last reply (limit 1 s)`);
    assert.equal(busy.closedAt, undefined, 'the connection in use was kept');
  });

  it('refuses a key out of range at start, naming it', async () => {
    await assert.rejects(startTestGateway({ plugins: [], gateway: { httpKeepAliveSec: 0 } }), /httpKeepAliveSec/);
  });
});
