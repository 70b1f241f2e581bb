/**
 * The RTSP 1.0 byte stream (RFC 2326), both directions, for servers (rtsp-out) and clients (rtsp-source) alike:
 * requests, responses and, on the same connection, `$`-framed interleaved data (10.12). Protocol only: no sessions,
 * no media, no I/O, no state beyond the bytes of one unfinished message, which is why it is a library both plugins
 * import and not a service one of them provides (a site that only pulls cameras runs no RTSP server).
 *
 * Two ways to meet bad bytes, because the two sides owe different things to their peer:
 * - 'strict' (a server reading clients): the first malformed message is an error to answer (400, 413, 505) before
 *   closing; nothing after it is read. Limits are small: a client's requests are short.
 * - 'resync' (a client reading a camera): bytes that are neither a message nor a frame are skipped up to the next
 *   `$` or `RTSP/` and reported; a camera's broken output costs a resync, never the connection.
 * Memory is bounded either way: at most one header block, one body or one interleaved frame (64 KiB) is held.
 */

/** Header fields by lower-case name; a repeated field keeps every value in order (WWW-Authenticate). */
export class RtspHeaders {
  private readonly m = new Map<string, string[]>();

  /** the first value */
  get(name: string): string | undefined {
    return this.m.get(name.toLowerCase())?.[0];
  }
  all(name: string): string[] {
    return this.m.get(name.toLowerCase()) ?? [];
  }
  has(name: string): boolean {
    return this.m.has(name.toLowerCase());
  }
  append(name: string, value: string): void {
    const k = name.toLowerCase();
    const list = this.m.get(k);
    if (list) list.push(value);
    else this.m.set(k, [value]);
  }
  /** continues the last value of `name` (obsolete line folding) */
  fold(name: string, more: string): void {
    const list = this.m.get(name);
    if (list?.length) list[list.length - 1] = `${list[list.length - 1]} ${more}`;
  }
  get size(): number {
    return this.m.size;
  }
}

export interface RtspRequest {
  method: string;
  uri: string;
  /** e.g. 'RTSP/1.0' */
  version: string;
  headers: RtspHeaders;
  body: Buffer;
}

export interface RtspResponse {
  status: number;
  reason: string;
  version: string;
  headers: RtspHeaders;
  body: Buffer;
}

export type RtspItem =
  | { kind: 'request'; request: RtspRequest }
  | { kind: 'response'; response: RtspResponse }
  /** `$` channel length data: RTP/RTCP over the RTSP connection */
  | { kind: 'interleaved'; channel: number; data: Buffer }
  /** strict: the stream cannot be read on; answer `status` (with the CSeq if one was read) and close */
  | { kind: 'error'; status: number; reason: string; cseq?: string }
  /** resync: bytes skipped to find the next message or frame */
  | { kind: 'skipped'; what: string };

export interface RtspReaderOptions {
  mode: 'strict' | 'resync';
  /** strict: a response where a request belongs is an error (a server reading its clients) */
  requestsOnly?: boolean;
  /** start line and headers, CRLFs included */
  maxHeaderBytes?: number;
  maxBodyBytes?: number;
  maxHeaders?: number;
}

const DEFAULTS = {
  strict: { maxHeaderBytes: 8192, maxBodyBytes: 4096, maxHeaders: 64 },
  // an SDP with many tracks, a camera's chatty headers
  resync: { maxHeaderBytes: 64 * 1024, maxBodyBytes: 1024 * 1024, maxHeaders: 256 },
};

const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const RTSP_PREFIX = Buffer.from('RTSP/', 'latin1');
/** RFC 2326 method / header token characters (RFC 2616 token) */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const VERSION = /^RTSP\/\d\.\d$/;
const STATUS_LINE = /^(RTSP\/\d\.\d) (\d{3})(?: (.*))?$/;
const STATUS_LINE_START = /RTSP\/\d\.\d \d{3}/;

type Head =
  | { t: 'request'; request: Omit<RtspRequest, 'body'> }
  | { t: 'response'; response: Omit<RtspResponse, 'body'> }
  | { t: 'bad'; status: number; reason: string; cseq?: string };

export class RtspReader {
  private pending: Buffer = Buffer.alloc(0);
  private failed = false;
  private readonly o: Required<RtspReaderOptions>;

  constructor(o: RtspReaderOptions) {
    this.o = { requestsOnly: false, ...DEFAULTS[o.mode], ...o } as Required<RtspReaderOptions>;
  }

  /** bytes held waiting for the rest of a message */
  get buffered(): number {
    return this.pending.length;
  }

  push(chunk: Buffer): RtspItem[] {
    if (this.failed) return [];
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: RtspItem[] = [];
    for (;;) {
      const item = this.next();
      if (!item) break;
      out.push(item);
      if (item.kind === 'error') {
        this.failed = true;
        this.pending = Buffer.alloc(0);
        break;
      }
    }
    // a view into a large socket chunk would pin it: keep a copy of what waits
    if (this.pending.length && this.pending.byteOffset !== 0) this.pending = Buffer.from(this.pending);
    return out;
  }

  private next(): RtspItem | undefined {
    let b = this.pending;
    // empty lines between messages are allowed (RFC 2616 4.1)
    let start = 0;
    while (start < b.length && (b[start] === 0x0d || b[start] === 0x0a)) start++;
    if (start > 0) b = this.pending = b.subarray(start);
    if (b.length === 0) return undefined;
    if (b[0] === 0x24) {
      // '$', channel, 16-bit length, data
      if (b.length < 4) return undefined;
      const len = b.readUInt16BE(2);
      if (b.length < 4 + len) return undefined;
      this.pending = b.subarray(4 + len);
      return { kind: 'interleaved', channel: b[1], data: b.subarray(4, 4 + len) };
    }
    const resync = this.o.mode === 'resync';
    // a message starts with a method name or RTSP/: both upper-case letters
    if (resync && !(b[0] >= 0x41 && b[0] <= 0x5a)) return this.skip(1, 'bytes between messages');
    const end = b.indexOf(CRLFCRLF);
    if (end < 0) {
      if (b.length <= this.o.maxHeaderBytes) return undefined;
      return resync ? this.skip(1, 'header too long') : { kind: 'error', status: 400, reason: `header over ${this.o.maxHeaderBytes} bytes` };
    }
    if (end + 4 > this.o.maxHeaderBytes) {
      return resync ? this.skip(1, 'header too long') : { kind: 'error', status: 400, reason: `header over ${this.o.maxHeaderBytes} bytes` };
    }
    const head = this.parseHead(b.toString('latin1', 0, end));
    if (head.t === 'bad') {
      if (!resync) return { kind: 'error', status: head.status, reason: head.reason, cseq: head.cseq };
      // junk glued to a response ("…garbageRTSP/1.0 200 OK"): resume at its status line; else after the bad block
      // (an RTSP/ ending a request line inside it is no message start)
      const inside = STATUS_LINE_START.exec(b.toString('latin1', 1, end));
      return this.skip(inside ? 1 + inside.index : end + 4, head.reason, true);
    }
    const headers = head.t === 'request' ? head.request.headers : head.response.headers;
    const cseq = headers.get('cseq');
    const lenText = headers.get('content-length');
    let bodyLen = 0;
    if (lenText !== undefined) {
      if (!/^\d{1,9}$/.test(lenText.trim()))
        return resync ? this.skip(end + 4, 'bad Content-Length', true) : { kind: 'error', status: 400, reason: 'bad Content-Length', cseq };
      bodyLen = Number(lenText.trim());
      if (bodyLen > this.o.maxBodyBytes) {
        return resync ? this.skip(end + 4, 'body too long', true) : { kind: 'error', status: 413, reason: `body over ${this.o.maxBodyBytes} bytes`, cseq };
      }
    }
    if (b.length < end + 4 + bodyLen) return undefined;
    const body = Buffer.from(b.subarray(end + 4, end + 4 + bodyLen));
    this.pending = b.subarray(end + 4 + bodyLen);
    return head.t === 'request' ? { kind: 'request', request: { ...head.request, body } } : { kind: 'response', response: { ...head.response, body } };
  }

  /** resync: drops `from` bytes, then up to the next `$` or `RTSP/`, or a method name at a line start */
  private skip(from: number, what: string, afterBlock = false): RtspItem {
    const b = this.pending;
    // what follows a delimited bad block may itself be a start (only then: resuming at any capital letter would make
    // a long run of them quadratic)
    if (afterBlock && from < b.length && (b[from] === 0x24 || (b[from] >= 0x41 && b[from] <= 0x5a))) {
      this.pending = b.subarray(from);
      return { kind: 'skipped', what };
    }
    const cands = [b.indexOf(0x24, from), b.indexOf(RTSP_PREFIX, from)];
    const line = b.indexOf('\r\n', from);
    if (line >= 0 && line + 2 < b.length && b[line + 2] >= 0x41 && b[line + 2] <= 0x5a) cands.push(line + 2);
    const next = cands.filter((x) => x >= 0);
    this.pending = b.subarray(next.length ? Math.min(...next) : b.length);
    return { kind: 'skipped', what };
  }

  private parseHead(text: string): Head {
    const lines = text.split('\r\n');
    const headers = new RtspHeaders();
    let last: string | undefined;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      if (line.startsWith(' ') || line.startsWith('\t')) {
        if (last === undefined) {
          if (this.o.mode === 'strict') return { t: 'bad', status: 400, reason: 'header continuation without a header' };
          continue;
        }
        headers.fold(last, line.trim());
        continue;
      }
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon).trim().toLowerCase() : '';
      if (!TOKEN.test(name)) {
        if (this.o.mode === 'strict') return { t: 'bad', status: 400, reason: 'malformed header line', cseq: headers.get('cseq') };
        continue;
      }
      if (headers.size >= this.o.maxHeaders && !headers.has(name))
        return { t: 'bad', status: 400, reason: `more than ${this.o.maxHeaders} headers`, cseq: headers.get('cseq') };
      headers.append(name, line.slice(colon + 1).trim());
      last = name;
    }
    const cseq = headers.get('cseq');
    const status = STATUS_LINE.exec(lines[0]);
    if (status) {
      if (this.o.requestsOnly) return { t: 'bad', status: 400, reason: 'a response where a request belongs', cseq };
      return { t: 'response', response: { status: Number(status[2]), reason: status[3] ?? '', version: status[1], headers } };
    }
    const parts = lines[0].split(' ');
    if (parts.length !== 3 || !TOKEN.test(parts[0]) || parts[1].length === 0) return { t: 'bad', status: 400, reason: 'malformed request line', cseq };
    if (!VERSION.test(parts[2])) {
      // an HTTP client on the RTSP port (or RTSP over HTTP tunnelling, which is not done here)
      return { t: 'bad', status: parts[2].startsWith('HTTP/') ? 505 : 400, reason: `unsupported protocol version '${parts[2].slice(0, 16)}'`, cseq };
    }
    return { t: 'request', request: { method: parts[0], uri: parts[1], version: parts[2], headers } };
  }
}
