/**
 * Where a player's bytes go, for `Plays` (plays.ts): a WebSocket from `routes.websocket`, or an HTTP response. Each
 * says how much it holds (for backpressure: the bus queues for a player that is not writable and resumes it on
 * drain) and whether it still holds any payload it was given (MediaReader.holdsPayloads: 0 bytes held means the
 * stream's payload memory can be reused).
 */
import type { ServerResponse } from 'node:http';
import type { WebSocket } from 'ws';
import type { RouteRequest } from './http';
import { Buffer } from 'node:buffer';

/** How a play is refused: HTTP status, or a WebSocket close code 4000 + status (4401, as decisions.md says). */
export type PlayRefusal = 400 | 401 | 404 | 503;

export interface PlayerSocket {
  /** the peer, address:port */
  readonly remote: string;
  /** the play is accepted: an HTTP response writes its head */
  accept(): void;
  /** the play is refused: HTTP status and reason, or WebSocket close 4000 + status */
  refuse(status: PlayRefusal, reason: string): void;
  /** bytes for the player, by reference (the socket holds them until the kernel took them) */
  send(bytes: Buffer): void;
  /** false: the bus queues for this player until `onDrain` */
  writable(): boolean;
  /** whether bytes it was given may still be read (not yet taken by the kernel) */
  holdsPayloads(): boolean;
  onDrain(cb: () => void): void;
  /** once, when the connection is gone */
  onClose(cb: () => void): void;
  /** ends the play gracefully: what was sent still goes */
  end(reason: string): void;
  /** drops the connection at once (a player that stopped reading) */
  destroy(): void;
}

export interface PlayerSocketOptions {
  /** bytes the socket may hold before the bus queues for the player (default 64 KiB) */
  highWaterBytes?: number;
}

/** a WebSocket close reason has room for 123 bytes */
const closeReason = (s: string): string => (Buffer.byteLength(s) <= 123 ? s : `${Buffer.from(s).subarray(0, 120).toString('utf8')}...`);

/**
 * A WebSocket accepted by `routes.websocket`: each `send` is one binary message. `ws` emits no 'drain': a send's
 * completion (its callback, once the kernel took the bytes) is where the socket's backlog (`bufferedAmount`) is
 * checked again, so a player held back resumes as soon as it is below the mark.
 */
export function wsPlayerSocket(ws: WebSocket, req: RouteRequest, opts: PlayerSocketOptions = {}): PlayerSocket {
  const high = opts.highWaterBytes ?? 64 * 1024;
  let held = false;
  let drain: (() => void) | undefined;
  const written = (): void => {
    if (!held || ws.bufferedAmount >= high) return;
    held = false;
    drain?.();
  };
  // a player has nothing to say: what it sends is dropped (and capped by the route's maxPayload)
  ws.on('message', () => undefined);
  return {
    remote: req.remote,
    accept: () => undefined,
    refuse: (status, reason) => ws.close(4000 + status, closeReason(reason)),
    send(bytes) {
      if (ws.readyState === ws.OPEN) ws.send(bytes, { binary: true }, written);
    },
    writable() {
      if (ws.bufferedAmount < high) return true;
      held = true;
      return false;
    },
    holdsPayloads: () => ws.bufferedAmount > 0,
    onDrain(cb) {
      drain = cb;
    },
    onClose: (cb) => void ws.once('close', cb),
    end: (reason) => ws.close(1000, closeReason(reason)),
    destroy: () => ws.terminate(),
  };
}

export interface HttpPlayerSocketOptions extends PlayerSocketOptions {
  /** of the 200 answer, e.g. 'video/h264'; a function is asked when the play is accepted */
  contentType: string | (() => string);
}

/**
 * An HTTP response streamed to a player (`routes.raw`). The response's head goes out at accept; each `send` is a
 * write (a chunk). Node holds a written Buffer only while it counts in `writableLength`; a response that has no
 * socket yet (a pipelined request) counts as holding.
 */
export function httpPlayerSocket(res: ServerResponse, req: RouteRequest, opts: HttpPlayerSocketOptions): PlayerSocket {
  // past the socket's own mark a write returned false, so a 'drain' comes
  const high = Math.max(opts.highWaterBytes ?? 64 * 1024, res.writableHighWaterMark);
  // a player's request body means nothing here
  req.raw.resume();
  return {
    remote: req.remote,
    accept() {
      const type = typeof opts.contentType === 'function' ? opts.contentType() : opts.contentType;
      res.writeHead(200, { 'Content-Type': type, 'Cache-Control': 'no-cache, no-store' });
      res.flushHeaders();
    },
    refuse(status, reason) {
      res.writeHead(status, { 'Content-Type': 'text/plain' }).end(`${reason}\n`);
    },
    send(bytes) {
      if (!res.writableEnded && !res.destroyed) res.write(bytes);
    },
    writable: () => res.writableLength < high,
    holdsPayloads: () => !res.socket || res.writableLength > 0,
    onDrain: (cb) => void res.on('drain', cb),
    onClose: (cb) => void res.once('close', cb),
    end: () => res.end(),
    destroy: () => res.destroy(),
  };
}
