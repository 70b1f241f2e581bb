/**
 * How a player's bytes reach it. HTTP/1.1: our own chunk framing written straight to the socket, one chunk per unit
 * whose size line all players share; HTTP/1.0: the bare stream on the socket; a pipelined request, whose response
 * has no socket yet: through the response, which frames each write itself; WebSocket: one binary message per unit,
 * its header shared too, written straight to the socket. A player in step with its stream (nothing of it waiting in
 * node) gets each unit laid out whole with its framing in one write; otherwise its socket is corked for the rest of
 * the tick and the unit goes in pieces that refer to the unit's own memory.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { WebSocket } from 'ws';
import type { FlvFrame } from './flv-format';
import { BARE, CHUNKED, CRLF, WS_MESSAGE, chunkSizeLine, wsHeader, type WholeFraming } from './framing';
import type { Corked, TickFlush } from './tick';
import { DirectWriter, WireScratch, WritableAccount, copyBytes } from '../../../plugin-sdk';

/** one for the process: a unit is laid out and written in one synchronous run, so no two players' overlap */
const scratch = new WireScratch();

/**
 * A player is writable while its transport holds less than this (or its high-water mark, if larger: past that a
 * write has returned false, so a 'drain' will come to resume it). Kept small: what a slow player cannot take waits
 * on the bus, by reference and bounded, where skipping to the next keyframe drops it; bytes already in a socket's
 * buffer would have to be sent, stale, before the player could skip.
 */
export const WRITABLE_BELOW = 64 * 1024;

export abstract class Transport implements Corked {
  abstract readonly protocol: 'http-flv' | 'ws-flv';
  /** writable() holds below this backlog */
  readonly writableBelow: number;
  private corked = false;
  /**
   * How a unit laid out whole is framed; undefined: always in pieces. Not over TLS, where a write completes only once
   * its ciphertext is out, so node would hold every one and no scratch memory could be reused.
   */
  private readonly whole: WholeFraming | undefined;
  /** a unit laid out whole goes to the socket's handle past node's Writable (see plugin-sdk/direct-writes.ts) */
  private readonly direct: DirectWriter | undefined;
  private drainCb: (() => void) | undefined;
  constructor(
    private readonly tick: TickFlush,
    private readonly sock: Socket | null,
    highWaterMark: number,
    whole?: WholeFraming,
    /**
     * Where this transport is the socket's only writer: what it has in node's Writable, so that a player in step,
     * its start included, reads none of node's stream state (WritableAccount says why that matters).
     */
    private readonly account?: WritableAccount,
  ) {
    this.writableBelow = Math.max(WRITABLE_BELOW, highWaterMark);
    this.whole = sock !== null && !(sock instanceof TLSSocket) ? whole : undefined;
    this.direct = this.whole !== undefined ? new DirectWriter(sock!, () => this.drainCb?.()) : undefined;
  }

  /** bytes in the socket's Writable (with an account, read only while some of ours may be there) */
  protected heldByNode(): number {
    const s = this.sock;
    if (s === null) return 0;
    return this.account !== undefined ? this.account.held() : s.writableLength;
  }

  /** One Buffer through node's Writable: counted by the account where there is one (write, begin, finish use it). */
  protected toNode(b: Buffer): void {
    if (this.account !== undefined) this.account.write(b);
    else this.sock!.write(b);
  }

  /** bytes of direct writes the kernel has not taken yet (not in the socket's writableLength) */
  protected directBacklog(): number {
    return this.direct === undefined ? 0 : this.direct.pending;
  }

  /** cb when the backlog has drained (after writable() turned false) */
  onDrain(cb: () => void): void {
    this.drainCb = cb;
    this.onSocketDrain(cb);
  }

  /** false once the peer is gone or the stream to it has ended */
  abstract get open(): boolean;
  /** bytes written but not yet taken by the kernel */
  abstract backlog(): number;
  /**
   * backlog() counts every byte node still holds for this player (its socket's Writable buffer, corked or in flight),
   * so 0 means node holds none of the units' memory: what MediaReader.holdsPayloads needs. Not so for a pipelined
   * response, which buffers in the HTTP layer until its turn.
   */
  abstract readonly backlogCoversAll: boolean;
  /** ends the stream gracefully (what is written still goes) */
  abstract end(): void;
  abstract destroy(): void;
  /** cb on the socket's (or response's) own 'drain' */
  protected abstract onSocketDrain(cb: () => void): void;
  /** cb once, when the connection is gone */
  abstract onGone(cb: () => void): void;
  /** one Buffer, as is */
  protected abstract write(b: Buffer): void;
  /** the framing in front of a piece of n bytes; `f` when the piece is that whole unit (its framing is shared) */
  protected abstract begin(n: number, f: FlvFrame | undefined): void;
  /** the framing after a piece */
  protected finish(): void {
    /* nothing but for HTTP chunks */
  }

  /** A unit as one piece of the stream: its config tags if `withConfig` (else a player starts here), then its media. */
  send(f: FlvFrame, withConfig: boolean): void {
    if (this.inStep() && this.sendWhole(this.whole!, f, withConfig)) return;
    this.cork();
    this.begin(withConfig ? f.bytes : f.mediaBytes, withConfig ? f : undefined);
    if (withConfig && f.config !== undefined) for (const c of f.config) this.write(c);
    f.pieces(this.writePiece);
    this.finish();
  }

  /**
   * A player's start: the FLV file header (`header`, its first start only), the stream's configuration (`config`, when
   * it changed since the player last had it), then the unit's media tags. Returns the bytes sent. Laid out whole like
   * any unit, so a player's start, too, goes past node's Writable (WritableAccount).
   */
  start(f: FlvFrame, header: Buffer | undefined, config: Buffer | undefined): number {
    const pre = (header?.length ?? 0) + (config?.length ?? 0);
    if (pre === 0) {
      this.send(f, false);
      return f.mediaBytes;
    }
    if (!this.inStep() || !this.startWhole(this.whole!, f, header, config, pre + f.mediaBytes)) {
      // (an empty piece would end a chunked response)
      if (header !== undefined && header.length > 0) this.sendOne(header);
      if (config !== undefined && config.length > 0) this.sendOne(config);
      this.send(f, false);
    }
    return pre + f.mediaBytes;
  }

  /** whether a unit can go whole, past node: nothing of this player is corked, in node or queued in libuv */
  private inStep(): boolean {
    return this.whole !== undefined && !this.corked && this.sock !== null && this.heldByNode() === 0 && this.directBacklog() === 0;
  }

  private readonly writePiece = (b: Buffer): void => this.write(b);

  /**
   * The unit laid out with its framing in scratch memory and written as one Buffer, straight to the socket
   * (nothing of this player is waiting in node): one call to the socket's handle, past node's Writable, instead of
   * five writes through a corked socket. false: too big for the scratch, written in pieces instead.
   */
  private sendWhole(w: WholeFraming, f: FlvFrame, withConfig: boolean): boolean {
    const kind = w.key + (withConfig ? 1 : 0);
    let view = scratch.cached(f, kind);
    if (view === undefined) {
      const n = withConfig ? f.bytes : f.mediaBytes;
      const total = w.headLength(n) + n + w.tailLength;
      if (total > WireScratch.MAX) return false;
      const b = scratch.take(total);
      let at = w.head(n, b, 0);
      if (withConfig) at = f.copyConfig(b, at);
      at = f.copyMedia(b, at);
      at = w.tail(b, at);
      view = at === total ? b : b.subarray(0, at);
      scratch.keep(f, kind, view);
    }
    scratch.send(this.direct!, view, this.account ?? false);
    return true;
  }

  /** sendWhole for a player's start: not kept for the unit's other players, whose starts differ */
  private startWhole(w: WholeFraming, f: FlvFrame, header: Buffer | undefined, config: Buffer | undefined, n: number): boolean {
    const total = w.headLength(n) + n + w.tailLength;
    if (total > WireScratch.MAX) return false;
    const b = scratch.take(total);
    let at = w.head(n, b, 0);
    if (header !== undefined) at += copyBytes(header, 0, header.length, b, at);
    if (config !== undefined) at += copyBytes(config, 0, config.length, b, at);
    at = f.copyMedia(b, at);
    at = w.tail(b, at);
    scratch.send(this.direct!, at === total ? b : b.subarray(0, at), this.account ?? false);
    return true;
  }

  /** One Buffer as a piece of the stream. */
  private sendOne(b: Buffer): void {
    this.cork();
    this.begin(b.length, undefined);
    this.write(b);
    this.finish();
  }

  private cork(): void {
    const s = this.sock;
    if (this.corked || s === null) return;
    this.corked = true;
    s.cork();
    this.tick.cork(this);
  }

  uncork(): void {
    this.corked = false;
    // (after res.end() node has fully uncorked the socket already: this does nothing then)
    this.sock?.uncork();
  }
}

/** HTTP-FLV on a response that owns its socket: headers are out, our bytes follow on the socket itself. */
export class SocketHttp extends Transport {
  readonly protocol = 'http-flv';
  readonly backlogCoversAll = true;
  /** HTTP/1.1: chunks of our own; HTTP/1.0: the bare stream */
  private readonly chunked: boolean;
  /**
   * Ended or destroyed by us, or the socket closed. Kept here so that a unit's path reads no node stream state
   * (WritableAccount); between a destroy by node (a reset) and its 'close', a direct write reaches a closed handle,
   * which libuv refuses (DirectWriter).
   */
  private ended: boolean;

  constructor(
    tick: TickFlush,
    private readonly res: ServerResponse,
    private readonly s: Socket,
  ) {
    // the account is made after the response's headers were flushed: it reads the Writable once, here
    super(tick, s, s.writableHighWaterMark, res.chunkedEncoding ? CHUNKED : BARE, new WritableAccount(s));
    this.chunked = res.chunkedEncoding;
    this.ended = !s.writable || res.writableEnded;
    s.once('close', () => {
      this.ended = true;
    });
  }

  get open(): boolean {
    return !this.ended;
  }

  protected write(b: Buffer): void {
    this.toNode(b);
  }

  protected begin(n: number, f: FlvFrame | undefined): void {
    if (this.chunked) this.toNode(f ? f.sizeLine() : chunkSizeLine(n));
  }

  protected override finish(): void {
    if (this.chunked) this.toNode(CRLF);
  }

  backlog(): number {
    return this.heldByNode() + this.directBacklog();
  }

  end(): void {
    this.ended = true;
    this.res.end();
  }

  destroy(): void {
    this.ended = true;
    this.res.destroy();
  }

  protected onSocketDrain(cb: () => void): void {
    this.s.on('drain', cb);
  }

  onGone(cb: () => void): void {
    this.res.once('close', cb);
  }
}

/** HTTP-FLV through the response, which frames each write as a chunk of its own: a pipelined request. */
export class ResponseHttp extends Transport {
  readonly protocol = 'http-flv';
  readonly backlogCoversAll = false;

  constructor(
    tick: TickFlush,
    private readonly res: ServerResponse,
  ) {
    super(tick, null, res.writableHighWaterMark);
  }

  get open(): boolean {
    return !this.res.writableEnded && !this.res.destroyed;
  }

  protected write(b: Buffer): void {
    this.res.write(b);
  }

  protected begin(): void {
    /* the response frames its writes */
  }

  backlog(): number {
    return this.res.writableLength;
  }

  end(): void {
    this.res.end();
  }

  destroy(): void {
    this.res.destroy();
  }

  protected onSocketDrain(cb: () => void): void {
    this.res.on('drain', cb);
  }

  onGone(cb: () => void): void {
    this.res.once('close', cb);
  }
}

/**
 * WS-FLV: each unit one binary message (mpegts.js and flv.js read the messages as one byte stream), framed here and
 * written to the socket under `ws`, whose sender never queues (no compression): a whole frame goes out in one
 * synchronous run, so nothing `ws` writes (a pong, the close frame) can land inside one.
 */
export class WsTransport extends Transport {
  readonly protocol = 'ws-flv';
  readonly backlogCoversAll = true;

  constructor(
    tick: TickFlush,
    private readonly ws: WebSocket,
    private readonly s: Socket,
  ) {
    super(tick, s, s.writableHighWaterMark, WS_MESSAGE);
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN && this.s.writable;
  }

  protected write(b: Buffer): void {
    this.toNode(b);
  }

  protected begin(n: number, f: FlvFrame | undefined): void {
    this.toNode(f ? f.wsHeader() : wsHeader(n));
  }

  backlog(): number {
    return this.ws.bufferedAmount + this.directBacklog();
  }

  end(): void {
    this.ws.close(1000, 'stream closed');
  }

  destroy(): void {
    this.ws.terminate();
  }

  protected onSocketDrain(cb: () => void): void {
    this.s.on('drain', cb);
  }

  onGone(cb: () => void): void {
    this.ws.once('close', cb);
  }
}
