/**
 * Socket reads into one buffer shared by every socket that opts in, instead of a new Buffer per read.
 *
 * Why: for each read Node mallocs 64 KiB, shrinks it to what came (realloc), wraps it in an ArrayBuffer and a
 * Buffer, and runs the Readable machinery to emit 'data'; the ArrayBuffer is freed only when a GC finds it. A
 * terminal sends a read's worth every frame and, with audio, every 20 ms: at 500 terminals that is 20-40
 * thousand reads and ~60 MB of short-lived external memory a second, which is what drives the gateway's
 * mark-compacts (see test/bench/README.md). Node has the fast path for sockets it connects itself
 * (`net.connect({ onread })`); an accepted socket carries the same fields, set here.
 *
 * The chunk handed to `onChunk` is a view of the shared buffer: valid only during the call. Whoever keeps any
 * of it (a packet straddling two reads, a frame's earlier packets) copies it before returning.
 *
 * Where the fast path cannot be used (a TLS socket, a Node whose internals differ), chunks come from 'data' as
 * usual, and are equally treated as borrowed; `borrowedReadsActive()` says which one this Node gives.
 */
import * as net from 'node:net';
import * as tls from 'node:tls';
import { getSystemErrorName } from 'node:util';
import { streamBinding } from '../../plugin-sdk/stream-binding';
import { Buffer } from 'node:buffer';

/** one read's worth: libuv's own suggestion for a TCP read */
const SHARED_BYTES = 64 * 1024;

interface OnreadSymbols {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}

let shared: Buffer | undefined;
/** shared's memory (its own: offset 0) */
let sharedMem: ArrayBuffer | undefined;
let symbols: OnreadSymbols | null | undefined;
/** the binding's read state and the index of a read's size (or error) in it; undefined: not on this Node */
let readState: Int32Array | undefined;
let readBytesAt = 0;

/** The symbols net.Socket keeps its `onread` option under, found on a socket made with one (null if absent). */
function onreadSymbols(): OnreadSymbols | null {
  if (symbols !== undefined) return symbols;
  // (the option is documented for net.connect; @types/node lists it only there)
  const probe = new net.Socket({ onread: { buffer: Buffer.alloc(1), callback: () => undefined } } as net.SocketConstructorOpts);
  const find = (name: string) => Object.getOwnPropertySymbols(probe).find((s) => s.description === name);
  const buffer = find('kBuffer');
  const callback = find('kBufferCb');
  const generator = find('kBufferGen');
  symbols = buffer && callback && generator ? { buffer, callback, generator } : null;
  probe.destroy();
  return symbols;
}

interface Handle {
  useUserBuffer?: (b: Buffer) => void;
  /** what libuv's read callback calls, with the read's size in the binding's state: node's onStreamRead */
  onread?: (this: Handle, ab: ArrayBuffer | undefined) => unknown;
  /** node's own record of whether libuv reads it (net.Socket's pause and resume keep it) */
  reading?: boolean;
  readStart?: () => number;
  readStop?: () => number;
}

type Fields = Record<symbol, unknown> & { _handle?: Handle | null };

/** whether this Node lets an accepted socket read into the shared buffer */
export function borrowedReadsActive(): boolean {
  return onreadSymbols() !== null;
}

/** whether a read on the shared-buffer path also skips node's onStreamRead (readDirect below) */
export function directReadsActive(): boolean {
  return bindReadState();
}

/**
 * Delivers the socket's bytes to `onChunk` as borrowed views (see above), from now on; bytes already waiting in the
 * socket (e.g. put back with unshift) come first. Returns true on the shared-buffer path, false on 'data' events.
 * 'end', 'close', 'error' and timeouts behave as for any socket.
 */
export function readBorrowed(socket: net.Socket, onChunk: (chunk: Buffer) => void): boolean {
  const syms = socket instanceof tls.TLSSocket ? null : onreadSymbols();
  const s = socket as unknown as Fields;
  const handle = s._handle;
  if (!syms || !handle || typeof handle.useUserBuffer !== 'function' || s[syms.buffer] !== null || s[syms.callback] !== null) {
    socket.on('data', onChunk);
    return false;
  }
  // what the Readable holds already goes first, in order
  for (let b = socket.read() as Buffer | null; b !== null; b = socket.read() as Buffer | null) onChunk(b);
  if (shared === undefined) {
    shared = Buffer.allocUnsafeSlow(SHARED_BYTES);
    sharedMem = shared.buffer as ArrayBuffer;
  }
  const mem = sharedMem!;
  s[syms.buffer] = shared;
  s[syms.generator] = null;
  // Node reads the next chunk into the same buffer after this returns; returning false would pause the socket
  // a view made from the memory, not buf.subarray: node's subarray reads `.buffer` and `.byteOffset`, generic
  // property loads in optimised code on Node 20 (plugin-sdk/byte-views.ts), on every read
  s[syms.callback] = (nread: number) => {
    onChunk(Buffer.from(mem, 0, nread));
  };
  handle.useUserBuffer(shared);
  readDirect(socket, handle, mem, onChunk);
  // flowing, so end-of-stream is emitted; no bytes pass through the Readable any more
  socket.resume();
  return true;
}

/**
 * A read with bytes goes from libuv's callback to `onChunk` without node's onStreamRead around it.
 *
 * Why: onStreamRead, run for every read, finds the socket from its handle, refreshes its timeout, checks it is not
 * destroyed (a getter over both its states) and loads the three onread fields by symbol before it calls the
 * callback set above: 3.8 % of the gateway's samples at 500 terminals (perf, 2026-11-30), on the half of its reads
 * that carry a frame's packets. Here a read is one load of the binding's state. The rest keeps node's path: an end,
 * an error, a socket with a timeout set (onStreamRead refreshes it), and a handle node has closed (destroy sets its
 * onread to a no-op, and libuv delivers no read on a closed handle).
 */
function readDirect(socket: net.Socket, handle: Handle, mem: ArrayBuffer, onChunk: (chunk: Buffer) => void): void {
  const viaNode = handle.onread;
  if (typeof viaNode !== 'function' || !bindReadState()) return;
  const state = readState!;
  const at = readBytesAt;
  handle.onread = function (this: Handle, ab: ArrayBuffer | undefined): unknown {
    const nread = state[at];
    if (nread > 0 && !socket.timeout) {
      onChunk(Buffer.from(mem, 0, nread));
      return undefined;
    }
    return viaNode.call(this, ab);
  };
}

function bindReadState(): boolean {
  if (readState !== undefined) return true;
  const b = streamBinding();
  if (b === null || !(b.streamBaseState instanceof Int32Array) || typeof b.kReadBytesOrError !== 'number') return false;
  readState = b.streamBaseState;
  readBytesAt = b.kReadBytesOrError;
  return true;
}

/**
 * Stops and restarts reading a socket on the shared-buffer path, on its handle alone.
 *
 * Why: socket.pause() and resume() also switch the Readable between paused and flowing, and resume() restarts it a
 * tick later (a read(0) and a 'resume' event) although no byte passes through the Readable on this path. A loop that
 * has fallen behind pauses each reader at a read it sets aside and resumes it once that read is handled
 * (read-slices.ts), every reader every turn: at 1,000 terminals those Readable layers were 2.4 % of the core (perf),
 * on top of the epoll_ctl calls libuv makes for the handle's stop and start. The Readable stays flowing, so the
 * socket's 'end' is emitted as before; `reading` is kept as net.Socket keeps it, so its own pause and resume agree.
 * Only for a socket `readBorrowed` put on the shared-buffer path (it returned true).
 */
export function pauseBorrowed(socket: net.Socket): void {
  const h = (socket as unknown as Fields)._handle;
  if (!h || !h.reading || typeof h.readStop !== 'function') return;
  h.reading = false;
  if (socket.destroyed) return;
  const err = h.readStop();
  if (err) socket.destroy(readError(err));
}

/** The other half of pauseBorrowed. */
export function resumeBorrowed(socket: net.Socket): void {
  const h = (socket as unknown as Fields)._handle;
  if (!h || h.reading || socket.destroyed || typeof h.readStart !== 'function') return;
  h.reading = true;
  const err = h.readStart();
  if (err) socket.destroy(readError(err));
}

function readError(code: number): Error {
  const name = getSystemErrorName(code);
  return Object.assign(new Error(`read ${name}`), { code: name, errno: code, syscall: 'read' });
}
