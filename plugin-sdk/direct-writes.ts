/**
 * Writes to a socket's handle directly, past node's Writable, for a writer that owns the socket's output and writes
 * one Buffer at a time while nothing of it is waiting in node.
 *
 * Why: a socket.write() of a player's unit runs node's Writable (its state, a write request object and a callback
 * each, the tick's after-write callbacks) around the one handle call that matters, which tries the kernel at once.
 * At 500 players those layers were ~3 % of the gateway's samples (perf, 2026-11-30), for writes that nearly always
 * complete inside that call. Here a write is the handle call alone, with one request object reused for as long as
 * writes complete at once (libuv touches it only when it has to queue a write).
 *
 * When the kernel does not take a write whole, libuv queues the rest and reports it later; this counts those bytes as
 * pending until then, keeps the Buffer alive, and tells its owner when none are left. libuv writes a stream's queued
 * requests in order, the Writable's own after ours, so the owner may go back to socket.write() at any time; it only
 * has to add `pending` to the socket's writableLength wherever it measures its backlog.
 *
 * Where this Node lacks the binding, or the socket is TLS (whose handle encrypts, and completes a write only once its
 * ciphertext is out), `DirectWriter.write` returns false and the owner writes as before.
 */
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { getSystemErrorName } from 'node:util';
import { streamBinding } from './stream-binding';

interface StreamWrap {
  WriteWrap: new () => WriteReq;
  streamBaseState: Int32Array;
  kLastWriteWasAsync: number;
}

/** node's write request: libuv's callback calls `oncomplete` with the status; the rest are ours */
interface WriteReq {
  oncomplete: (this: WriteReq, status: number) => void;
  bytes: number;
  buffer: Buffer | null;
  writer: DirectWriter | null;
}

interface Handle {
  writeBuffer?: (req: WriteReq, b: Buffer) => number;
}

let wrap: StreamWrap | null | undefined;
/** the binding's write state and the index of its "last write was queued" flag, read once */
let writeState: Int32Array = new Int32Array(1);
let lastWriteWasAsync = 0;

/** node's stream_wrap binding, if this Node gives what a DirectWriter needs of it (null if not) */
function streamWrap(): StreamWrap | null {
  if (wrap !== undefined) return wrap;
  wrap = null;
  const b = streamBinding();
  if (b !== null && typeof b.WriteWrap === 'function' && b.streamBaseState instanceof Int32Array && typeof b.kLastWriteWasAsync === 'number') {
    wrap = b as StreamWrap;
    writeState = wrap.streamBaseState;
    lastWriteWasAsync = wrap.kLastWriteWasAsync;
  }
  return wrap;
}

/** whether this Node lets a DirectWriter write past the Writable */
export function directWritesActive(): boolean {
  return streamWrap() !== null;
}

function onComplete(this: WriteReq, status: number): void {
  const w = this.writer;
  this.writer = null;
  this.buffer = null;
  if (w !== null) w.completed(this.bytes, status);
}

export class DirectWriter {
  /** bytes handed to libuv that it has not sent yet */
  pending = 0;
  /** a request object no write holds (libuv keeps one only for a write it had to queue) */
  private req: WriteReq | null = null;
  private readonly w: StreamWrap | null;
  /**
   * The socket's handle, read once. Why kept: `socket._handle` is a getter reading a symbol of the socket, whose classes
   * are many (what each socket went through), so each read was a megamorphic keyed load (0.3-0.5 % of the gateway's
   * samples at 500 terminals, all in flv-out's sendWhole). Let go at the socket's 'close', which node emits from the
   * handle's own close callback, while the handle is still alive: between a destroy and that, a write goes to a
   * closed handle, which libuv refuses (EPIPE), and the socket, destroyed already, stays so. So a writer serves one
   * connection of its socket: after the 'close', everything goes through `socket.write` (`send`), as for TLS.
   */
  private handle: Handle | null = null;
  private gone = false;
  /** `settled` runs when pending drops back to 0. A TLS socket is always written through its Writable. */
  constructor(
    private readonly socket: Socket,
    private readonly settled: () => void,
  ) {
    this.w = socket instanceof TLSSocket ? null : streamWrap();
    if (this.w !== null)
      socket.once('close', () => {
        this.gone = true;
        this.handle = null;
      });
  }

  /**
   * Hands `b` to the socket's handle. false: not written, because the socket has bytes waiting in its Writable (they
   * must go first), is not open for writing, or this Node has no direct path; the caller uses socket.write().
   * After true, `b` must not change until pending is 0 again if pending grew.
   *
   * `clear`: the caller writes to this socket alone and knows its Writable holds nothing, is not corked and was not
   * ended by it, so the Writable's state is not read; a socket destroyed since is not written (see `handle`).
   * Why: that state is read on every unit otherwise, and node 20.20's Writable state takes a class by which of its
   * lazily added fields a socket has used, so the code reading it learns several classes, some of which no socket
   * has by the first memory-reducing collection: that code is then thrown away (test/bench/README.md).
   */
  write(b: Buffer, clear = false): boolean {
    const w = this.w;
    const s = this.socket;
    if (w === null) return false;
    if (!clear && (s.writableLength !== 0 || s.writableCorked !== 0 || !s.writable || s.destroyed)) return false;
    const h = this.liveHandle();
    if (h === null || h.writeBuffer === undefined) return false;
    const req = this.req ?? this.newReq();
    const err = h.writeBuffer(req, b);
    if (err !== 0) {
      // as node's own write does: the socket is destroyed with the error, and its owner learns of it by 'close'
      s.destroy(writeError(err));
      return true;
    }
    if (writeState[lastWriteWasAsync] === 0) return true;
    // libuv queued the rest and holds this request until it is sent
    this.req = null;
    req.bytes = b.length;
    req.buffer = b;
    req.writer = this;
    this.pending += b.length;
    return true;
  }

  /**
   * `b` to the socket: past the Writable when write() can (true), else through it (false). `clear` as for write(), or
   * the socket's only writer's account (WritableAccount), which says whether it is clear and counts `b` when it goes
   * through node: a write this writer cannot make (no handle, a Node without the direct path) is then still in the
   * account, so the writer's backpressure sees it.
   */
  send(b: Buffer, clear: boolean | WritableAccount = false): boolean {
    if (typeof clear === 'boolean') {
      if (this.write(b, clear)) return true;
      this.socket.write(b);
      return false;
    }
    if (this.write(b, clear.clear)) return true;
    clear.write(b);
    return false;
  }

  /** bytes written that the kernel has not taken yet: the Writable's and the direct writes' */
  get backlog(): number {
    return this.socket.writableLength + this.pending;
  }

  /** called by a queued write's request when libuv is done with it */
  completed(bytes: number, status: number): void {
    this.pending -= bytes;
    if (status < 0 && !this.socket.destroyed) this.socket.destroy(writeError(status));
    if (this.pending === 0) this.settled();
  }

  /** the socket's handle; null before it has one and after its 'close' (see `handle`) */
  private liveHandle(): Handle | null {
    const h = this.handle;
    if (h !== null || this.gone) return h;
    const now = (this.socket as unknown as { _handle?: Handle | null })._handle ?? null;
    this.handle = now;
    return now;
  }

  private newReq(): WriteReq {
    const req = new this.w!.WriteWrap();
    req.oncomplete = onComplete;
    req.bytes = 0;
    req.buffer = null;
    req.writer = null;
    this.req = req;
    return req;
  }
}

/**
 * What a socket's only writer (nothing else writes to it: not an HTTP layer, not a WebSocket library) has handed node's
 * Writable and node has not called back for, so that writing past the Writable (`DirectWriter.write`'s `clear`) needs
 * no read of node's state while nothing is there.
 *
 * Why: node 20.20's Writable state takes a class by which of its lazily added fields a socket has used, so a unit's
 * path that reads it learns the classes a socket's state has only while its player starts; a memory-reducing
 * collection, finding no socket of them, then throws that code away, a stall for every player (test/bench/README.md).
 * Here the state is read only while the writer's own bytes may be in the Writable, and once where the account is made.
 */
export class WritableAccount {
  /** this account's writes through the Writable whose callback has not come */
  private inNode = 0;
  /** nothing of this writer's is in node's Writable: DirectWriter.write's `clear` */
  clear: boolean;

  /** Made where the writer takes the socket over: clear if node holds nothing of it then (read once, here). */
  constructor(private readonly socket: Socket) {
    this.clear = socket.writableLength === 0 && socket.writableCorked === 0;
  }

  /** `b` through node's Writable (after what the writer put there before), counted until node calls back */
  write(b: Buffer): void {
    this.inNode++;
    this.clear = false;
    this.socket.write(b, this.done);
  }

  /** bytes in node's Writable (0, unread, while clear) */
  held(): number {
    if (this.clear) return 0;
    const n = this.socket.writableLength;
    // bytes node held when the account was made, and none of the writer's own since
    if (n === 0 && this.inNode === 0 && this.socket.writableCorked === 0) this.clear = true;
    return n;
  }

  /** node's callback of each write: the last one clears the account (node calls them in order, errors included) */
  private readonly done = (): void => {
    if (--this.inNode === 0) this.clear = true;
  };
}

function writeError(code: number): Error {
  const name = getSystemErrorName(code);
  return Object.assign(new Error(`write ${name}`), { code: name, errno: code, syscall: 'write' });
}
