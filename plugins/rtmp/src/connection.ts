/**
 * One RTMP TCP connection: its socket, its protocol (RtmpPeer), and its deadlines. It becomes a player or a
 * publisher once the client asks (the server decides which, if any); until then it may only talk RTMP, for at most
 * handshakeTimeoutSec. A peer that breaks the protocol or a limit is dropped with a log line.
 */
import type { Socket } from 'node:net';
import { BYTE_TOTAL_START, WritableAccount } from '../../../plugin-sdk';
import { ProtocolError } from './guarded-rtmp';
import { RtmpPeer, type PlayOrPublish, type RtmpPeerOwner } from './rtmp-peer';

/** control answers a client has not read past this: it is not reading at all (a player's media is capped on the bus) */
const MAX_UNREAD_CONTROL = 1024 * 1024;
/** what a client sends before it plays or publishes (handshake, connect, createStream): kept to move the connection */
const MAX_BEFORE_ASK = 64 * 1024;

/** thrown through NMS's parser to stop it: the connection went to another worker */
class Moved extends Error {}

export interface ConnectionHost {
  play(c: RtmpConnection, p: PlayOrPublish): void;
  publish(c: RtmpConnection, p: PlayOrPublish): void;
  /** the bytes another worker read from this socket and answered, if it moved it here */
  replayOf(socket: Socket): Buffer | undefined;
  /** whether the connection belongs to another worker's stream (`key`): then it was moved there with `replay` */
  moved(c: RtmpConnection, key: string, replay: Buffer): boolean;
  /** media from a publisher (views valid during the call) */
  media(c: RtmpConnection, type: number, ts: number, body: Buffer): void;
  /** the client ended its stream, or the connection closed */
  gone(c: RtmpConnection): void;
  dropped(c: RtmpConnection, reason: string): void;
  bytesIn(n: number): void;
}

export class RtmpConnection implements RtmpPeerOwner {
  readonly remote: string;
  role: 'play' | 'publish' | undefined;
  private readonly peer: RtmpPeer;
  private deadline: NodeJS.Timeout | undefined;
  private ended = false;
  /** bytes of media and control the client sent */
  bytesIn = BYTE_TOTAL_START;
  /** every byte read until the client plays or publishes (to move it to another worker); then undefined */
  private before: Buffer[] | undefined = [];
  private beforeBytes = 0;
  /** answering nothing: replaying what another worker already answered, up to the play or publish */
  private silent = false;
  private gone = false;
  /**
   * What this connection has in node's Writable: its answers and control messages, and a player's media that could not
   * go past the Writable. The socket's only writer, so a player in step reads none of node's stream state.
   */
  readonly account: WritableAccount;

  constructor(
    readonly id: string,
    readonly socket: Socket,
    private readonly host: ConnectionHost,
    maxMessageBytes: number,
    handshakeTimeoutMs: number,
  ) {
    this.remote = `${socket.remoteAddress}:${socket.remotePort}`;
    this.account = new WritableAccount(socket);
    this.peer = new RtmpPeer(this, maxMessageBytes);
    socket.setNoDelay(true);
    this.deadline = setTimeout(() => this.drop(`no play or publish within ${handshakeTimeoutMs / 1000} s`), handshakeTimeoutMs);
    this.deadline.unref();
    socket.on('data', (b: Buffer) => this.read(b));
    socket.on('error', () => undefined);
    socket.on('close', () => this.close());
    const replay = host.replayOf(socket);
    if (replay) {
      this.silent = true;
      this.read(replay);
    }
  }

  /**
   * Before answering a play or publish of routing key `key`: false when it is served here; true when the connection
   * was moved to the worker that owns the key (the parser is stopped: nothing more happens here).
   */
  moveIfElsewhere(key: string): void {
    const before = this.before;
    if (!before || !this.host.moved(this, key, Buffer.concat(before))) return;
    this.gone = true;
    throw new Moved();
  }

  /** the client's connect said it reads Enhanced RTMP (H.265 as hvc1) */
  get enhanced(): boolean {
    return this.peer.enhanced;
  }

  /** what the client sent so far came through the protocol; with this the client is told yes */
  accept(role: 'play' | 'publish'): void {
    this.role = role;
    this.before = undefined;
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = undefined;
    this.peer.accept();
  }

  /** tells the client why (an onStatus error), then closes */
  refuse(code: string, description: string): void {
    if (this.ended) return;
    this.peer.refuse(code, description);
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  /** closes it at once, with a log line (the host's) */
  drop(reason: string): void {
    if (this.ended || this.socket.destroyed) return;
    this.host.dropped(this, reason);
    this.socket.destroy();
  }

  // --- RtmpPeerOwner --------------------------------------------------------------------------------------------

  output(b: Buffer): void {
    if (this.socket.destroyed || this.silent || this.gone) return;
    if (this.role !== 'play' && this.socket.writableLength > MAX_UNREAD_CONTROL) {
      this.drop('it does not read its answers');
      return;
    }
    this.account.write(b);
  }

  play(p: PlayOrPublish): void {
    // the worker this came from stopped here: from now on the answers are ours
    this.silent = false;
    this.host.play(this, p);
  }

  publish(p: PlayOrPublish): void {
    this.silent = false;
    this.host.publish(this, p);
  }

  message(type: number, ts: number, body: Buffer): void {
    if (this.role === 'publish') this.host.media(this, type, ts, body);
    else if (type !== 18) throw new ProtocolError('media from a client that is not publishing');
  }

  streamClosed(): void {
    if (this.role) this.socket.end();
  }

  private read(b: Buffer): void {
    if (this.gone) return;
    this.bytesIn += b.length;
    this.host.bytesIn(b.length);
    if (this.before) {
      this.beforeBytes += b.length;
      if (this.beforeBytes > MAX_BEFORE_ASK) {
        this.drop(`${this.beforeBytes} bytes before a play or publish`);
        return;
      }
      this.before.push(Buffer.from(b));
    }
    try {
      this.peer.read(b);
    } catch (err) {
      if (err instanceof Moved) return;
      this.drop(err instanceof ProtocolError ? err.message : `unreadable RTMP (${(err as Error).message})`);
    }
  }

  private close(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.deadline) clearTimeout(this.deadline);
    this.host.gone(this);
  }
}
