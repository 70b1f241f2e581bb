/** RTSP 1.0 header fields and message serialisation (RFC 2326), shared by rtsp-out and rtsp-source. */
import type { RtspHeaders } from './wire';

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

function headLines(first: string, headers: Array<[string, string]>, body: Buffer | undefined): Buffer {
  const lines = [first];
  for (const [k, v] of headers) {
    // a value carrying a CR or LF would split the message (a peer's CSeq echoed, a URL): never write it
    if (/[\r\n]/.test(v) || /[\r\n]/.test(k)) continue;
    lines.push(`${k}: ${v}`);
  }
  if (body && body.length) lines.push(`Content-Length: ${body.length}`);
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1');
  return body && body.length ? Buffer.concat([head, body]) : head;
}

/** A response: status line, the headers in order (CSeq first, by convention), Content-Length when there is a body. */
export function serializeResponse(status: number, headers: Array<[string, string]>, body?: string | Buffer): Buffer {
  const b = body === undefined ? undefined : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return headLines(`RTSP/1.0 ${status} ${STATUS_TEXT[status] ?? 'Unknown'}`, headers, b);
}

/** A request; a URI with a space or line break is refused (it would be a different request line). */
export function serializeRequest(method: string, uri: string, headers: Array<[string, string]>, body?: string | Buffer): Buffer {
  if (/[\s]/.test(uri)) throw new Error('RTSP request URI with whitespace');
  const b = body === undefined ? undefined : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return headLines(`${method} ${uri} RTSP/1.0`, headers, b);
}

/** The CSeq to echo: digits only (anything else is not echoed, so a header value can never inject lines). */
export function cseqOf(m: { headers: RtspHeaders }): string | undefined {
  const v = m.headers.get('cseq')?.trim();
  return v !== undefined && /^\d{1,10}$/.test(v) ? v : undefined;
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

/** The session id of a message's Session header. */
export function sessionIdOf(m: { headers: RtspHeaders }): string | undefined {
  return parseSessionHeader(m.headers.get('session'))?.id;
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
  /** server_port=a-b, in a server's answer */
  serverPort?: [number, number];
  /** mode=record asks to publish */
  record: boolean;
}

/** The transports of a Transport header, in order of preference; malformed ones are left out. */
export function parseTransports(header: string): TransportSpec[] {
  const out: TransportSpec[] = [];
  for (const spec of header.split(',')) {
    const params = spec
      .trim()
      .split(';')
      .map((p) => p.trim());
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
      else if (key === 'interleaved' || key === 'client_port' || key === 'server_port') {
        const range = parseRange(value, key === 'interleaved' ? 255 : 65535);
        if (!range) ok = false;
        else if (key === 'interleaved') t.interleaved = range;
        else if (key === 'client_port') t.clientPort = range;
        else t.serverPort = range;
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
