/**
 * The byte stream of an RTSP connection from the server: responses (and the odd request a server sends, e.g.
 * GET_PARAMETER or ANNOUNCE), and, after SETUP over TCP, interleaved binary frames (`$`, channel, 16-bit length,
 * RTP or RTCP). Bytes that are neither are skipped up to the next plausible start and counted: a camera's broken
 * output costs a resync, never the connection or the process.
 */

export interface RtspMessage {
  /** set for a response */
  status?: number;
  reason?: string;
  /** set for a request from the server */
  method?: string;
  uri?: string;
  /** lower-case names; a repeated header keeps every value */
  headers: Map<string, string[]>;
  body: Buffer;
}

export function header(m: RtspMessage, name: string): string | undefined {
  return m.headers.get(name)?.[0];
}

export interface WireHandler {
  message(m: RtspMessage): void;
  interleaved(channel: number, data: Buffer): void;
  /** bytes skipped to find the next message or frame */
  malformed(what: string): void;
}

/** a header block larger than this is not RTSP */
const MAX_HEAD = 64 * 1024;
const MAX_BODY = 1024 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');
const RTSP_PREFIX = Buffer.from('RTSP/');

export class RtspWireParser {
  private buf: Buffer = Buffer.alloc(0);
  constructor(private readonly h: WireHandler) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let off = 0;
    const b = this.buf;
    for (;;) {
      if (off >= b.length) break;
      const c = b[off];
      if (c === 0x24) {
        if (off + 4 > b.length) break;
        const len = b.readUInt16BE(off + 2);
        if (off + 4 + len > b.length) break;
        this.h.interleaved(b[off + 1], b.subarray(off + 4, off + 4 + len));
        off += 4 + len;
        continue;
      }
      if (!isTokenStart(c)) {
        off = this.resync(b, off + 1, 'bytes between messages');
        continue;
      }
      const end = b.indexOf(HEAD_END, off);
      if (end < 0) {
        if (b.length - off > MAX_HEAD) off = this.resync(b, off + 1, 'header too long');
        break;
      }
      const head = b.toString('latin1', off, end);
      const msg = parseHead(head);
      if (!msg) {
        off = this.resync(b, off + 1, 'bad start line');
        continue;
      }
      const cl = Number(header(msg, 'content-length') ?? 0);
      if (!Number.isInteger(cl) || cl < 0 || cl > MAX_BODY) {
        off = this.resync(b, end + 4, 'bad Content-Length');
        continue;
      }
      if (end + 4 + cl > b.length) break;
      msg.body = Buffer.from(b.subarray(end + 4, end + 4 + cl));
      off = end + 4 + cl;
      this.h.message(msg);
    }
    this.buf = off >= b.length ? Buffer.alloc(0) : off === 0 ? b : Buffer.from(b.subarray(off));
  }

  /** the next `$` or `RTSP/` from `from`; counts one malformed event for the bytes skipped */
  private resync(b: Buffer, from: number, what: string): number {
    this.h.malformed(what);
    const d = b.indexOf(0x24, from);
    const r = b.indexOf(RTSP_PREFIX, from);
    const cands = [d, r].filter((x) => x >= 0);
    return cands.length ? Math.min(...cands) : b.length;
  }
}

/** a response starts with RTSP/, a request with an upper-case method name */
function isTokenStart(c: number): boolean {
  return c >= 0x41 && c <= 0x5a;
}

function parseHead(head: string): RtspMessage | undefined {
  const lines = head.split('\r\n');
  const first = lines[0];
  const msg: RtspMessage = { headers: new Map(), body: Buffer.alloc(0) };
  let m = /^RTSP\/\d\.\d\s+(\d{3})(?:\s+(.*))?$/.exec(first);
  if (m) {
    msg.status = Number(m[1]);
    msg.reason = m[2] ?? '';
  } else {
    m = /^([A-Z_]+)\s+(\S+)\s+RTSP\/\d\.\d$/.exec(first);
    if (!m) return undefined;
    msg.method = m[1];
    msg.uri = m[2];
  }
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    const list = msg.headers.get(name);
    if (list) list.push(value);
    else msg.headers.set(name, [value]);
  }
  return msg;
}

/** `RTP-Info: url=rtsp://…/trackID=0;seq=1;rtptime=123,url=…` -> one entry per stream */
export function parseRtpInfo(v: string | undefined): Array<{ url: string; seq?: number; rtptime?: number }> {
  if (!v) return [];
  const out: Array<{ url: string; seq?: number; rtptime?: number }> = [];
  // entries are separated by commas, but a URL may hold one: split only before "url="
  for (const entry of v.split(/,\s*(?=url=)/i)) {
    const e: { url: string; seq?: number; rtptime?: number } = { url: '' };
    for (const part of entry.split(';')) {
      const eq = part.indexOf('=');
      if (eq < 0) continue;
      const k = part.slice(0, eq).trim().toLowerCase();
      const val = part.slice(eq + 1).trim();
      if (k === 'url') e.url = val;
      else if (k === 'seq' && /^\d+$/.test(val)) e.seq = Number(val);
      else if (k === 'rtptime' && /^\d+$/.test(val)) e.rtptime = Number(val) >>> 0;
    }
    out.push(e);
  }
  return out;
}

/** `Session: 12345678;timeout=60` */
export function parseSessionHeader(v: string | undefined): { id: string; timeoutSec?: number } | undefined {
  if (!v) return undefined;
  const [id, ...rest] = v.split(';');
  if (!id.trim()) return undefined;
  let timeoutSec: number | undefined;
  for (const r of rest) {
    const m = /^\s*timeout\s*=\s*(\d+)/i.exec(r);
    if (m) timeoutSec = Number(m[1]);
  }
  return { id: id.trim(), timeoutSec };
}
