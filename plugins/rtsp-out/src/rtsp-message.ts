/**
 * RTSP 1.0 messages (RFC 2326): an incremental, bounded request parser for a server connection (requests and the
 * `$`-framed interleaved data a client may send on the same connection), response serialisation, and the Transport
 * header. Protocol only: no sessions, no media, no I/O, so that an RTSP client (rtsp-source) or another server could
 * share it later as a service.
 */

export interface RtspRequest {
  method: string;
  uri: string;
  /** e.g. 'RTSP/1.0' */
  version: string;
  /** header names in lower case; a repeated header keeps its last value */
  headers: Map<string, string>;
  body: Buffer;
}

export type ParsedItem =
  | { kind: 'request'; request: RtspRequest }
  /** `$` channel length data: RTCP receiver reports of a client playing over TCP */
  | { kind: 'interleaved'; channel: number; data: Buffer }
  /** the stream cannot be read on: answer `status` (with the CSeq if one was read) and close */
  | { kind: 'error'; status: number; reason: string; cseq?: string };

export interface ParserLimits {
  /** request line and headers, CRLFs included */
  maxHeaderBytes: number;
  /** a request body (GET_PARAMETER, SET_PARAMETER) */
  maxBodyBytes: number;
  maxHeaders: number;
}

export const DEFAULT_LIMITS: ParserLimits = { maxHeaderBytes: 8192, maxBodyBytes: 4096, maxHeaders: 64 };

const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
/** RFC 2326 method / header token characters (RFC 2616 token) */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const VERSION = /^RTSP\/\d\.\d$/;

/**
 * Reads a connection's bytes as RTSP requests and interleaved frames. Memory is bounded: at most one header block
 * (maxHeaderBytes), one body (maxBodyBytes) or one interleaved frame (64 KiB) is held. After an error the parser
 * reads nothing more (the connection should be closed once the error is answered).
 */
export class RtspParser {
  private pending: Buffer = Buffer.alloc(0);
  private failed = false;

  constructor(private readonly limits: ParserLimits = DEFAULT_LIMITS) {}

  /** bytes held waiting for the rest of a message */
  get buffered(): number {
    return this.pending.length;
  }

  push(chunk: Buffer): ParsedItem[] {
    if (this.failed) return [];
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: ParsedItem[] = [];
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

  private next(): ParsedItem | undefined {
    const b = this.pending;
    if (b.length === 0) return undefined;
    if (b[0] === 0x24) {
      // '$', channel, 16-bit length, data (RFC 2326 10.12)
      if (b.length < 4) return undefined;
      const len = b.readUInt16BE(2);
      if (b.length < 4 + len) return undefined;
      const item: ParsedItem = { kind: 'interleaved', channel: b[1], data: b.subarray(4, 4 + len) };
      this.pending = b.subarray(4 + len);
      return item;
    }
    // clients may send empty lines between messages (RFC 2616 4.1)
    let start = 0;
    while (start < b.length && (b[start] === 0x0d || b[start] === 0x0a)) start++;
    if (start > 0) {
      this.pending = b.subarray(start);
      return this.next();
    }
    const end = b.indexOf(CRLFCRLF);
    if (end < 0) {
      if (b.length > this.limits.maxHeaderBytes) return { kind: 'error', status: 400, reason: `request header over ${this.limits.maxHeaderBytes} bytes` };
      return undefined;
    }
    if (end + 4 > this.limits.maxHeaderBytes) return { kind: 'error', status: 400, reason: `request header over ${this.limits.maxHeaderBytes} bytes` };
    const head = parseHead(b.toString('latin1', 0, end), this.limits.maxHeaders);
    if ('status' in head) return { kind: 'error', ...head };
    const lenText = head.headers.get('content-length');
    let bodyLen = 0;
    if (lenText !== undefined) {
      if (!/^\d{1,9}$/.test(lenText.trim())) return { kind: 'error', status: 400, reason: 'bad Content-Length', cseq: head.headers.get('cseq') };
      bodyLen = Number(lenText.trim());
      if (bodyLen > this.limits.maxBodyBytes) return { kind: 'error', status: 413, reason: `body over ${this.limits.maxBodyBytes} bytes`, cseq: head.headers.get('cseq') };
    }
    if (b.length < end + 4 + bodyLen) return undefined;
    const body = Buffer.from(b.subarray(end + 4, end + 4 + bodyLen));
    this.pending = b.subarray(end + 4 + bodyLen);
    return { kind: 'request', request: { ...head, body } };
  }
}

function parseHead(text: string, maxHeaders: number): Omit<RtspRequest, 'body'> | { status: number; reason: string; cseq?: string } {
  const lines = text.split('\r\n');
  const parts = lines[0].split(' ');
  const headers = new Map<string, string>();
  let last: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith(' ') || line.startsWith('\t')) {
      // obsolete line folding: part of the previous header
      if (last === undefined) return { status: 400, reason: 'header continuation without a header' };
      headers.set(last, `${headers.get(last)} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).trim().toLowerCase() : '';
    if (!TOKEN.test(name)) return { status: 400, reason: 'malformed header line', cseq: headers.get('cseq') };
    if (headers.size >= maxHeaders && !headers.has(name)) return { status: 400, reason: `more than ${maxHeaders} headers`, cseq: headers.get('cseq') };
    headers.set(name, line.slice(colon + 1).trim());
    last = name;
  }
  const cseq = headers.get('cseq');
  if (parts.length !== 3 || !TOKEN.test(parts[0]) || parts[1].length === 0) return { status: 400, reason: 'malformed request line', cseq };
  if (!VERSION.test(parts[2])) {
    // an HTTP client on the RTSP port (or RTSP over HTTP tunnelling, which this server does not do)
    return { status: parts[2].startsWith('HTTP/') ? 505 : 400, reason: `unsupported protocol version '${parts[2].slice(0, 16)}'`, cseq };
  }
  return { method: parts[0], uri: parts[1], version: parts[2], headers };
}

export const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  413: 'Request Entity Too Large',
  415: 'Unsupported Media Type',
  451: 'Parameter Not Understood',
  453: 'Not Enough Bandwidth',
  454: 'Session Not Found',
  455: 'Method Not Valid in This State',
  459: 'Aggregate Operation Not Allowed',
  461: 'Unsupported Transport',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
  505: 'RTSP Version Not Supported',
};

/** A response: status line, CSeq first (when known), the headers, Content-Length when there is a body. */
export function serializeResponse(status: number, headers: Array<[string, string]>, body?: string | Buffer): Buffer {
  const lines = [`RTSP/1.0 ${status} ${STATUS_TEXT[status] ?? 'Unknown'}`];
  for (const [k, v] of headers) {
    // a value comes from our own code, but one carrying a CR or LF would split the response: never write it
    if (/[\r\n]/.test(v)) continue;
    lines.push(`${k}: ${v}`);
  }
  const b = body === undefined ? undefined : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  if (b && b.length) lines.push(`Content-Length: ${b.length}`);
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1');
  return b && b.length ? Buffer.concat([head, b]) : head;
}

/** One transport of a Transport header (RFC 2326 12.39). */
export interface TransportSpec {
  /** RTP/AVP/TCP */
  lower: 'tcp' | 'udp';
  multicast: boolean;
  /** interleaved=a-b */
  interleaved?: [number, number];
  /** client_port=a-b (b defaults to a+1) */
  clientPort?: [number, number];
  /** mode=record asks to publish, which this server does not take */
  record: boolean;
}

/** The transports a client offers, in its order of preference; malformed ones are left out. */
export function parseTransports(header: string): TransportSpec[] {
  const out: TransportSpec[] = [];
  for (const spec of header.split(',')) {
    const params = spec.trim().split(';').map((p) => p.trim());
    const proto = params[0].toUpperCase();
    let lower: 'tcp' | 'udp';
    if (proto === 'RTP/AVP' || proto === 'RTP/AVP/UDP') lower = 'udp';
    else if (proto === 'RTP/AVP/TCP') lower = 'tcp';
    else continue;
    const t: TransportSpec = { lower, multicast: false, record: false };
    let ok = true;
    for (const p of params.slice(1)) {
      const eq = p.indexOf('=');
      const key = (eq < 0 ? p : p.slice(0, eq)).toLowerCase();
      const value = eq < 0 ? '' : p.slice(eq + 1).replace(/^"|"$/g, '');
      if (key === 'multicast') t.multicast = true;
      else if (key === 'interleaved' || key === 'client_port') {
        const range = parseRange(value, key === 'interleaved' ? 255 : 65535);
        if (!range) ok = false;
        else if (key === 'interleaved') t.interleaved = range;
        else t.clientPort = range;
      } else if (key === 'mode') t.record = /record/i.test(value);
    }
    if (ok) out.push(t);
  }
  return out;
}

function parseRange(v: string, max: number): [number, number] | undefined {
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(v);
  if (!m) return undefined;
  const a = Number(m[1]);
  const b = m[2] === undefined ? a + 1 : Number(m[2]);
  if (a > max || b > max || (max === 65535 && a === 0)) return undefined;
  return [a, b];
}

/** The CSeq to echo: digits only (anything else is not echoed, so a header value can never inject lines). */
export function cseqOf(req: { headers: Map<string, string> }): string | undefined {
  const v = req.headers.get('cseq')?.trim();
  return v !== undefined && /^\d{1,10}$/.test(v) ? v : undefined;
}

/** The session id of a Session header (`id;timeout=..`). */
export function sessionIdOf(req: { headers: Map<string, string> }): string | undefined {
  const v = req.headers.get('session');
  if (v === undefined) return undefined;
  const id = v.split(';')[0].trim();
  return id.length ? id : undefined;
}
