import * as http from 'node:http';
import * as https from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import type { NoticePayload } from '../src/payload';

/** A pino logger at trace level writing into memory, to read what would have been logged. */
export function memoryLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (s: string) => void lines.push(s) });
  return { logger, lines };
}

export interface Arrival {
  path: string;
  authorization?: string;
  contentType?: string;
  body: NoticePayload;
  /** the status answered, or 'hang' */
  answered: number | 'hang';
  /** came over TLS */
  encrypted: boolean;
  /** Date.now() when the whole body had arrived */
  at: number;
}

export type Answer = number | { status: number; headers?: Record<string, string>; delayMs?: number } | 'hang';

/**
 * A callback receiver on loopback. `answer(body, index)` decides each reply: a status, a status with headers and an
 * optional delay, or 'hang' (read the request, never reply). With `tlsOptions` (key, cert) it is an HTTPS server.
 */
export class Receiver {
  readonly arrivals: Arrival[] = [];
  /** requests being handled at this moment, and the most seen at once */
  open = 0;
  maxOpen = 0;
  private readonly server: http.Server | https.Server;
  private readonly waiters: Array<{ n: number; resolve: () => void }> = [];
  port = 0;

  constructor(
    private readonly answer: (body: NoticePayload, index: number) => Answer = () => 200,
    tlsOptions?: https.ServerOptions,
  ) {
    const handler: http.RequestListener = (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as NoticePayload;
        const a = this.answer(body, this.arrivals.length);
        const arrival: Arrival = {
          path: req.url ?? '',
          authorization: req.headers.authorization,
          contentType: req.headers['content-type'],
          body,
          answered: a === 'hang' ? 'hang' : typeof a === 'number' ? a : a.status,
          encrypted: (req.socket as TLSSocket).encrypted === true,
          at: Date.now(),
        };
        this.arrivals.push(arrival);
        this.open++;
        this.maxOpen = Math.max(this.maxOpen, this.open);
        res.on('close', () => this.open--);
        this.wake();
        if (a === 'hang') return;
        const reply = typeof a === 'number' ? { status: a } : a;
        const send = () => res.writeHead(reply.status, reply.headers).end();
        if (reply.delayMs) setTimeout(send, reply.delayMs);
        else send();
      });
    };
    this.server = tlsOptions ? https.createServer(tlsOptions, handler) : http.createServer(handler);
  }

  /** `port` 0 takes a free one; a given port brings a receiver back where an earlier one listened (an outage's end). */
  async start(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => (this.server.off('error', reject), resolve()));
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Resolves once `n` requests have arrived; rejects after `ms` so a broken test fails instead of hanging. */
  waitForArrivals(n: number, ms = 10_000): Promise<void> {
    if (this.arrivals.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${this.arrivals.length} of ${n} callbacks arrived within ${ms} ms`)), ms);
      this.waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) {
      if (this.arrivals.length >= w.n) w.resolve();
      else this.waiters.push(w);
    }
  }
}

/** A promise that rejects after `ms`, for bounding waits on the code under test. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
    }),
  ]);
}

export function notice(reqId: string, act: NoticePayload['act'], extra: Partial<NoticePayload> = {}): NoticePayload {
  return { instId: 'gw-test', act, reqId, typ: 'live', simNo: '13800001111', chan: 1, mediaTyp: 'av', ...extra };
}

/** Polls `cond` until it holds; rejects after `ms`. */
export async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
