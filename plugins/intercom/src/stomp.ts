/**
 * STOMP 1.2 frames (https://stomp.github.io/stomp-specification-1.2.html), server side, over WebSocket messages.
 *
 * A frame may span messages (some clients split large frames), and one message may hold several frames and
 * heart-beats (lone EOLs), so the reader is a stream parser over the messages' bytes. It is bounded: headers
 * over `maxHeaderBytes` or a body over `maxBodyBytes` is an error, never a growing buffer.
 */

export const CLIENT_COMMANDS = ['CONNECT', 'STOMP', 'SEND', 'SUBSCRIBE', 'UNSUBSCRIBE', 'ACK', 'NACK', 'BEGIN', 'COMMIT', 'ABORT', 'DISCONNECT'] as const;
export type ClientCommand = (typeof CLIENT_COMMANDS)[number];

export interface StompFrame {
  command: ClientCommand;
  /** header names as sent; a repeated header keeps its first value (STOMP 1.2 2.x "Repeated Header Entries") */
  headers: Map<string, string>;
  body: Buffer;
}

export type StompEvent = { type: 'frame'; frame: StompFrame } | { type: 'heartbeat' };

export class StompSyntaxError extends Error {}

export interface StompReaderOptions {
  maxHeaderBytes: number;
  maxBodyBytes: number;
}

const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;

export class StompReader {
  private buf: Buffer = Buffer.alloc(0);

  constructor(private readonly opts: StompReaderOptions) {}

  /** bytes held for a frame not complete yet */
  get pending(): number {
    return this.buf.length;
  }

  /** The frames and heart-beats complete after these bytes; throws StompSyntaxError on a malformed frame. */
  push(chunk: Buffer): StompEvent[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: StompEvent[] = [];
    let off = 0;
    for (;;) {
      // heart-beats: EOLs between frames
      while (off < this.buf.length) {
        if (this.buf[off] === LF) {
          out.push({ type: 'heartbeat' });
          off++;
          continue;
        }
        if (this.buf[off] === CR && off + 1 < this.buf.length && this.buf[off + 1] === LF) {
          out.push({ type: 'heartbeat' });
          off += 2;
          continue;
        }
        break;
      }
      if (off >= this.buf.length) break;
      const r = this.frameAt(off);
      if (!r) break;
      out.push({ type: 'frame', frame: r.frame });
      off = r.next;
    }
    this.buf = off >= this.buf.length ? Buffer.alloc(0) : Buffer.from(this.buf.subarray(off));
    return out;
  }

  private frameAt(start: number): { frame: StompFrame; next: number } | undefined {
    const b = this.buf;
    // the blank line that ends the headers: LF LF or LF CR LF
    let hdrEnd = -1;
    let bodyStart = -1;
    for (let i = start; i < b.length; i++) {
      if (b[i] !== LF) continue;
      if (i + 1 < b.length && b[i + 1] === LF) {
        hdrEnd = i;
        bodyStart = i + 2;
        break;
      }
      if (i + 2 < b.length && b[i + 1] === CR && b[i + 2] === LF) {
        hdrEnd = i;
        bodyStart = i + 3;
        break;
      }
    }
    if (hdrEnd < 0) {
      if (b.length - start > this.opts.maxHeaderBytes) throw new StompSyntaxError(`frame headers over ${this.opts.maxHeaderBytes} bytes`);
      if (b.indexOf(NUL, start) >= 0) throw new StompSyntaxError('frame ended (NUL) before the blank line after its headers');
      return undefined;
    }
    if (hdrEnd - start > this.opts.maxHeaderBytes) throw new StompSyntaxError(`frame headers over ${this.opts.maxHeaderBytes} bytes`);
    const head = b.subarray(start, hdrEnd).toString('utf8');
    const lines = head.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
    const command = lines[0];
    if (!(CLIENT_COMMANDS as readonly string[]).includes(command)) {
      throw new StompSyntaxError(`unknown command '${command.slice(0, 32)}'`);
    }
    // CONNECT and CONNECTED headers are not escaped (1.2, "Value Encoding")
    const escaped = command !== 'CONNECT' && command !== 'STOMP';
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(':');
      if (colon <= 0) throw new StompSyntaxError(`header line '${line.slice(0, 64)}' has no name and colon`);
      const name = escaped ? unescapeHeader(line.slice(0, colon)) : line.slice(0, colon);
      const value = escaped ? unescapeHeader(line.slice(colon + 1)) : line.slice(colon + 1);
      if (!headers.has(name)) headers.set(name, value);
    }
    const cl = headers.get('content-length');
    let bodyEnd: number;
    if (cl !== undefined) {
      if (!/^[0-9]{1,10}$/.test(cl)) throw new StompSyntaxError(`content-length '${cl.slice(0, 16)}' is not a byte count`);
      const n = Number(cl);
      if (n > this.opts.maxBodyBytes) throw new StompSyntaxError(`body of ${n} bytes is over the limit of ${this.opts.maxBodyBytes}`);
      if (b.length < bodyStart + n + 1) return undefined;
      bodyEnd = bodyStart + n;
      if (b[bodyEnd] !== NUL) throw new StompSyntaxError(`no NUL after the ${n} bytes content-length says`);
    } else {
      bodyEnd = b.indexOf(NUL, bodyStart);
      if (bodyEnd < 0) {
        if (b.length - bodyStart > this.opts.maxBodyBytes) throw new StompSyntaxError(`body over ${this.opts.maxBodyBytes} bytes`);
        return undefined;
      }
    }
    const frame: StompFrame = { command: command as ClientCommand, headers, body: Buffer.from(b.subarray(bodyStart, bodyEnd)) };
    return { frame, next: bodyEnd + 1 };
  }
}

function unescapeHeader(s: string): string {
  if (!s.includes('\\')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c !== '\\') {
      out += c;
      continue;
    }
    const n = s[++i];
    if (n === 'n') out += '\n';
    else if (n === 'r') out += '\r';
    else if (n === 'c') out += ':';
    else if (n === '\\') out += '\\';
    else throw new StompSyntaxError(`undefined escape '\\${n ?? ''}' in a header`);
  }
  return out;
}

function escapeHeader(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\r/g, '\\r').replace(/\n/g, '\\n').replace(/:/g, '\\c');
}

/** A server frame (CONNECTED, RECEIPT, ERROR, MESSAGE); a body gets its content-length. */
export function serializeFrame(command: string, headers: Record<string, string>, body?: Buffer | string): Buffer {
  const b = body === undefined ? Buffer.alloc(0) : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const escape = command !== 'CONNECTED';
  let head = command + '\n';
  for (const [k, v] of Object.entries(headers)) head += `${escape ? escapeHeader(k) : k}:${escape ? escapeHeader(v) : v}\n`;
  if (b.length > 0) head += `content-length:${b.length}\n`;
  head += '\n';
  return Buffer.concat([Buffer.from(head, 'utf8'), b, Buffer.from([NUL])]);
}

/**
 * Heart-beat negotiation (1.2, "Heart-beating"): the client says `cx,cy` (it can send every cx ms, wants one every
 * cy ms), we say `sx,sy`. Then the client sends every max(cx, sy) ms (0: never) and we every max(sx, cy).
 */
export function negotiateHeartBeat(
  clientHeader: string | undefined,
  serverMs: number,
): { header: string; sendEveryMs: number; expectEveryMs: number } | string {
  let cx = 0;
  let cy = 0;
  if (clientHeader !== undefined) {
    const m = /^\s*([0-9]{1,9})\s*,\s*([0-9]{1,9})\s*$/.exec(clientHeader);
    if (!m) return `heart-beat '${clientHeader.slice(0, 32)}' is not two numbers of ms`;
    cx = Number(m[1]);
    cy = Number(m[2]);
  }
  const sx = serverMs;
  const sy = serverMs;
  return {
    header: `${sx},${sy}`,
    sendEveryMs: sx === 0 || cy === 0 ? 0 : Math.max(sx, cy),
    expectEveryMs: cx === 0 || sy === 0 ? 0 : Math.max(cx, sy),
  };
}
