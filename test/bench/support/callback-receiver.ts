/**
 * A real HTTP callback receiver on loopback for the soak: takes `POST <base>/strm_notif` from the gateway's
 * callback-notifier, answers 204 and hands each notice on. It can go down and come back on the same port:
 *
 * - 'refuse': the listening socket is closed (new connections are refused), idle keep-alive connections are closed,
 *   and a request arriving on a connection that was already open is cut off unanswered (socket destroyed). A notice
 *   is recorded only when it is answered 2xx, so nothing the gateway counts as failed was seen here: a duplicate
 *   seen later is the gateway's, not an artefact of the outage;
 * - '503': the port stays open and every request is answered 503 (retried by the notifier), unrecorded.
 */
import { once } from 'node:events';
import * as http from 'node:http';
import type * as net from 'node:net';
import type { ReceivedNotice } from './notice-ledger';

export type OutageMode = 'refuse' | '503';

const MAX_BODY = 64 * 1024;

export class CallbackReceiver {
  private server: http.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private down: OutageMode | undefined;
  port = 0;
  /** POSTs answered 2xx (= notices recorded) */
  accepted = 0;
  /** requests refused while down (cut off or answered 503) */
  refused = 0;
  /** requests that were not a notice POST (wrong path or method, bad JSON) */
  rejected = 0;
  /** connections the gateway opened to us */
  connections = 0;

  constructor(private readonly onNotice: (n: ReceivedNotice, path: string) => void) {}

  get isDown(): boolean {
    return this.down !== undefined;
  }

  /** open connections from the gateway (each holds one of its descriptors) */
  get openConnections(): number {
    return this.sockets.size;
  }

  async start(port = 0): Promise<number> {
    const server = http.createServer((req, res) => this.handle(req, res));
    // the notifier pools its connections: keep them as long as it wants
    server.keepAliveTimeout = 60_000;
    server.on('connection', (s: net.Socket) => {
      this.connections++;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    this.server = server;
    this.port = (server.address() as net.AddressInfo).port;
    return this.port;
  }

  /** The receiver goes down (see the file comment). */
  async goDown(mode: OutageMode): Promise<void> {
    this.down = mode;
    if (mode === '503') return;
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    const closed = new Promise<void>((r) => s.close(() => r()));
    s.closeIdleConnections();
    await closed.catch(() => undefined);
  }

  /** Back up, on the same port (a few tries: the port was free a moment ago, nobody else on loopback wants it). */
  async comeBack(): Promise<void> {
    const mode = this.down;
    this.down = undefined;
    if (mode !== 'refuse') return;
    for (let i = 0; ; i++) {
      try {
        await this.start(this.port);
        return;
      } catch (err) {
        if (i >= 20) throw new Error(`callback receiver cannot listen on ${this.port} again: ${(err as Error).message}`, { cause: err });
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** Closes keep-alive connections that are idle (e.g. before counting the gateway's descriptors). */
  closeIdle(): void {
    this.server?.closeIdleConnections();
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const sock of this.sockets) sock.destroy();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.down === 'refuse') {
      // a connection from before the outage: cut it off unanswered, as a host that went away would
      this.refused++;
      req.socket.destroy();
      return;
    }
    if (this.down === '503') {
      this.refused++;
      req.resume();
      res.writeHead(503, { 'Content-Type': 'text/plain', 'Content-Length': '4' }).end('down');
      return;
    }
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST' || !path.endsWith('/strm_notif')) {
      this.rejected++;
      req.resume();
      res.writeHead(404, { 'Content-Length': '0' }).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => {
      // it may have gone down while the body was arriving: then this one is cut off too
      if (this.down === 'refuse') {
        this.refused++;
        req.socket.destroy();
        return;
      }
      let doc: { reqId?: unknown; act?: unknown; closeCause?: unknown };
      try {
        doc = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof doc;
      } catch {
        doc = {};
      }
      if (size > MAX_BODY || typeof doc.reqId !== 'string' || typeof doc.act !== 'string') {
        this.rejected++;
        res.writeHead(400, { 'Content-Length': '0' }).end();
        return;
      }
      this.accepted++;
      this.onNotice(
        { reqId: doc.reqId, act: doc.act, closeCause: typeof doc.closeCause === 'number' ? doc.closeCause : undefined, at: performance.now() },
        path,
      );
      res.writeHead(204).end();
    });
    req.on('error', () => undefined);
  }
}
