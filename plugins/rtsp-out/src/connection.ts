/**
 * One RTSP client connection: its parser, its requests answered one after another in order (a DESCRIBE may wait for
 * media while the next request waits behind it), and the sessions and DESCRIBE plans it made. What a request means is
 * the server's (server.ts); this is the wire side of it.
 */
import type { Socket } from 'node:net';
import { DirectWriter, WritableAccount } from '../../../plugin-sdk';
import { RtspReader, cseqOf, serializeResponse, type RtspRequest } from '../../../plugin-sdk/rtsp';
import type { Plan, RtspSession } from './session';

const SERVER = 'jt1078-gateway rtsp-out';
/** requests waiting behind one being answered (a DESCRIBE may wait for media); more closes the connection */
const MAX_PIPELINED = 16;

export interface Reply {
  status: number;
  headers?: Array<[string, string]>;
  body?: string;
  /** close the connection once the reply is written */
  close?: boolean;
  /** runs right after the reply is written (PLAY: the held packets follow their answer) */
  after?: () => void;
}

/** What a connection asks of its server. */
export interface ConnectionHost {
  now(): number;
  /** the reply to a well-formed request */
  handle(c: Connection, req: RtspRequest): Promise<Reply>;
  /** malformed input from this connection: counted and logged */
  bad(c: Connection, reason: string): void;
  /** a request's handler threw: answered 500 */
  failed(c: Connection, err: unknown): void;
}

export class Connection {
  readonly parser: RtspReader;
  readonly remote: string;
  readonly ip: string;
  /** answered in order: each request's reply waits for the previous one */
  private chain: Promise<void> = Promise.resolve();
  pending = 0;
  lastActivity: number;
  partialSince = -1;
  closed = false;
  /** a reply closed it: requests behind that one get no answer */
  ending = false;
  /** the client ended its side: node ends ours (no half-open sockets), so nothing more is written */
  peerEnded = false;
  readonly sessions = new Set<RtspSession>();
  /** DESCRIBE's decisions, by stream and reqId, for the SETUPs that follow */
  readonly plans = new Map<string, Plan>();
  /**
   * The TCP sessions' units, each laid out whole, to the socket's handle past node's Writable (RtspSession.send); the
   * socket's one writer of that kind, as its `pending` bytes are the socket's
   */
  readonly out: DirectWriter;
  /**
   * What this connection, its socket's only writer (replies, RTCP, media that cannot go whole), has in node's Writable:
   * its TCP sessions read that and not node's state on each unit (plugin-sdk WritableAccount says why)
   */
  readonly account: WritableAccount;

  constructor(
    readonly socket: Socket,
    maxHeaderBytes: number,
    private readonly host: ConnectionHost,
  ) {
    this.parser = new RtspReader({ mode: 'strict', requestsOnly: true, maxHeaderBytes, maxBodyBytes: 4096, maxHeaders: 64 });
    this.ip = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    this.remote = `${this.ip}:${socket.remotePort}`;
    this.lastActivity = host.now();
    this.out = new DirectWriter(socket, () => this.resumeReaders());
    this.account = new WritableAccount(socket);
  }

  /** no more media goes to the socket: it closed, a reply ended it, or the client ended its side */
  get shut(): boolean {
    return this.closed || this.ending || this.peerEnded;
  }

  /** The socket took what was waiting (its Writable's 'drain', or the last of the direct writes): TCP readers go on. */
  resumeReaders(): void {
    for (const s of this.sessions) if (s.lower === 'tcp') s.sub?.resume();
  }

  onData(chunk: Buffer): void {
    const now = this.host.now();
    this.lastActivity = now;
    for (const item of this.parser.push(chunk)) {
      if (item.kind === 'interleaved') {
        // RTCP receiver reports over TCP: the client is alive (its connection says so already)
        continue;
      }
      if (item.kind === 'error') {
        this.host.bad(this, item.reason);
        const headers: Array<[string, string]> = item.cseq && /^\d{1,10}$/.test(item.cseq) ? [['CSeq', item.cseq]] : [];
        this.enqueue(async () => ({ status: item.status, headers, close: true }));
        return;
      }
      // requestsOnly: 'request' is all that is left; 'response' and 'skipped' come only in other modes
      if (item.kind !== 'request') continue;
      const req = item.request;
      if (++this.pending > MAX_PIPELINED) {
        this.host.bad(this, 'too many pipelined requests');
        this.socket.destroy();
        return;
      }
      this.enqueue(() => this.host.handle(this, req), cseqOf(req));
    }
    this.partialSince = this.parser.buffered > 0 ? (this.partialSince < 0 ? now : this.partialSince) : -1;
  }

  private enqueue(answer: () => Promise<Reply>, cseq?: string): void {
    this.chain = this.chain.then(async () => {
      if (this.shut) return;
      let r: Reply;
      try {
        r = await answer();
      } catch (err) {
        this.host.failed(this, err);
        r = { status: 500 };
      }
      this.pending = Math.max(0, this.pending - 1);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the connection may close, or its client end its side, while the answer is awaited
      if (this.shut) {
        // a UDP session set playing by this reply plays on without its connection: its held packets must go
        r.after?.();
        return;
      }
      const headers: Array<[string, string]> = [];
      if (cseq !== undefined) headers.push(['CSeq', cseq]);
      headers.push(...(r.headers ?? []), ['Server', SERVER]);
      if (r.body !== undefined) headers.push(['Content-Type', 'application/sdp']);
      // past node's Writable while nothing of the connection's is there (a PLAY's answer, then its packets, read none of its state)
      this.out.send(serializeResponse(r.status, headers, r.body), this.account);
      if (r.close) {
        this.ending = true;
        this.socket.end();
      }
      r.after?.();
    });
  }
}
