import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ApiForwarder } from '../http/api-server';
import { keyOfTarget } from './shard';
import type { WorkerLink } from './worker-link';

/** marks a request one worker passed to another, so the owner serves it instead of passing it on */
export const FORWARDED_HEADER = 'x-gw-forwarded';
const REMOTE_HEADER = 'x-gw-remote';

/** the folder of a cluster's internal sockets (the primary's pid names the cluster) */
function internalSocketDir(clusterId: string): string {
  return path.join(os.tmpdir(), `gw-${clusterId}`);
}

/** where worker `index` takes forwarded requests for `listener` (short: a Unix socket path has ~100 bytes) */
export function internalSocketPath(clusterId: string, index: number, listener: string): string {
  return path.join(internalSocketDir(clusterId), `${index}-${listener.replace(/[^a-zA-Z0-9.-]/g, '_')}.sock`);
}

/**
 * The primary, as it exits (or whoever killed it): its workers' internal sockets go, folder and all. A worker's
 * socket file outlives a worker that was killed, and the folder every worker: without this each run of a node left
 * one in the temporary folder.
 */
export function removeInternalSockets(clusterId: string): void {
  try {
    fs.rmSync(internalSocketDir(clusterId), { recursive: true, force: true });
  } catch {
    // (nothing to do about it as the process exits: the folder is the temporary one)
  }
}

/**
 * Requests on an HTTP listener reach the worker that owns their stream even when their connection landed elsewhere:
 * a keep-alive connection that moves to another stream, TLS (whose first bytes name no path), a STOMP talk socket
 * (its URL names a request id, not a stream). The worker that got such a request passes it, unchanged, over a Unix
 * socket to the owner's internal listener for the same port and relays the answer; a WebSocket upgrade is piped both
 * ways. Session API calls are not forwarded this way: they are calls between workers (api-routes.ts).
 */
export class ClusterForwarder implements ApiForwarder {
  constructor(
    private readonly link: WorkerLink,
    private readonly clusterId: string,
    private readonly listener: string,
    private readonly secret: string,
    private readonly log: Logger,
    private readonly counted: (kind: 'request' | 'upgrade') => void = () => undefined,
  ) {}

  /** the worker that should serve this request, when it is not this one */
  private async ownerOf(req: http.IncomingMessage): Promise<number | undefined> {
    if (req.headers[FORWARDED_HEADER] !== undefined) return undefined;
    const url = req.url ?? '/';
    if (url.startsWith('/strm/')) return undefined;
    let owner: number | undefined;
    const key = keyOfTarget(url);
    if (key) owner = this.link.ownerOf(key);
    else if (url.startsWith('/talk-stomp')) {
      const reqId = new URLSearchParams(url.slice(url.indexOf('?') + 1)).get('reqId');
      if (reqId) {
        const [w] = await this.link.lookup([reqId]).catch(() => [-1]);
        if (w >= 0) owner = w;
      }
    }
    return owner !== undefined && owner !== this.link.index ? owner : undefined;
  }

  private headersFor(req: http.IncomingMessage): http.OutgoingHttpHeaders {
    return { ...req.headers, [FORWARDED_HEADER]: this.secret, [REMOTE_HEADER]: req.socket.remoteAddress ?? '' };
  }

  async request(req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> {
    const owner = await this.ownerOf(req);
    if (owner === undefined) return false;
    this.pass(owner, req, res, this.headersFor(req), 'stream', (out) => req.pipe(out));
    return true;
  }

  async requestOfReq(reqId: string, req: http.IncomingMessage, body: Record<string, unknown>, res: http.ServerResponse): Promise<boolean> {
    if (req.headers[FORWARDED_HEADER] !== undefined) return false;
    const [owner] = await this.link.lookup([reqId]).catch(() => [-1]);
    if (owner === undefined || owner < 0 || owner === this.link.index) return false;
    // the body was read here: it goes as JSON of its own length
    const text = JSON.stringify(body);
    const headers = this.headersFor(req);
    delete headers['transfer-encoding'];
    headers['content-length'] = String(Buffer.byteLength(text));
    this.pass(owner, req, res, headers, 'request', (out) => out.end(text));
    return true;
  }

  /** passes a request to worker `owner`'s internal listener and its answer back; `send` writes the request's body */
  private pass(
    owner: number,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    headers: http.OutgoingHttpHeaders,
    what: 'stream' | 'request',
    send: (out: http.ClientRequest) => void,
  ): void {
    this.counted('request');
    const out = http.request(
      {
        socketPath: internalSocketPath(this.clusterId, owner, this.listener),
        method: req.method,
        path: req.url,
        headers,
        agent: false,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.rawHeaders as unknown as http.OutgoingHttpHeaders);
        up.pipe(res);
        up.on('error', () => res.destroy());
      },
    );
    out.on('error', (err) => {
      const whose = what === 'stream' ? 'owns the stream' : 'holds the request';
      this.log.warn({ owner, path: req.url?.split('?')[0], err: err.message }, `forwarding to the worker that ${whose} failed`);
      if (!res.headersSent) {
        res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '1' });
        res.end(
          JSON.stringify({
            errCode: -3,
            message:
              what === 'stream' ? 'The worker that serves this stream is restarting; retry.' : 'The worker that holds this request is restarting; retry.',
          }),
        );
      } else res.destroy();
    });
    res.on('close', () => out.destroy());
    send(out);
  }

  async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<boolean> {
    const owner = await this.ownerOf(req);
    if (owner === undefined) return false;
    this.counted('upgrade');
    const up = net.connect(internalSocketPath(this.clusterId, owner, this.listener));
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      if (name === FORWARDED_HEADER || name === REMOTE_HEADER) continue;
      lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    }
    lines.push(`${FORWARDED_HEADER}: ${this.secret}`, `${REMOTE_HEADER}: ${req.socket.remoteAddress ?? ''}`);
    up.write(lines.join('\r\n') + '\r\n\r\n');
    if (head.length) up.write(head);
    up.pipe(socket);
    socket.pipe(up);
    const end = () => {
      up.destroy();
      socket.destroy();
    };
    up.on('error', end);
    socket.on('error', end);
    up.on('close', end);
    socket.on('close', end);
    return true;
  }
}

/**
 * A worker's internal listener for one port: forwarded requests from other workers, served by the same handlers
 * (plain HTTP: the hop is a local socket). The forwarding worker's secret is checked, and its client's address
 * restored, so logs, caps and login brakes see the real peer.
 */
export function listenInternal(socketPath: string, server: http.Server, secret: string): Promise<net.Server> {
  fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  try {
    fs.unlinkSync(socketPath);
  } catch {
    /* none left over */
  }
  const srv = net.createServer((sock) => {
    // one forwarded request or upgrade per connection (the forwarder uses no agent): its claimed address is read
    // from its first head, and only with the cluster's secret
    sock.once('data', (chunk: Buffer) => {
      sock.pause();
      const text = chunk.toString('latin1', 0, Math.min(chunk.length, 16384));
      const headEnd = text.indexOf('\r\n\r\n');
      const headers = headEnd >= 0 ? text.slice(0, headEnd) : text;
      const has = new RegExp(`\\r\\n${FORWARDED_HEADER}: ${secret}\\r\\n`, 'i').test(headers + '\r\n');
      const remote = has ? /\r\nx-gw-remote: ([^\r\n]*)/i.exec(headers)?.[1] : undefined;
      if (!has) {
        sock.destroy();
        return;
      }
      if (remote !== undefined) Object.defineProperty(sock, 'remoteAddress', { value: remote, configurable: true });
      sock.unshift(chunk);
      server.emit('connection', sock);
      sock.resume();
    });
  });
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(socketPath, () => {
      srv.off('error', reject);
      resolve(srv);
    });
  });
}
