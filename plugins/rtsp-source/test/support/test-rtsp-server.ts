/**
 * A small RTSP server for the tests, in the manner of a media relay (MediaMTX): a publisher (ffmpeg with
 * `-f rtsp`) ANNOUNCEs its SDP and RECORDs RTP over TCP; cameras' clients (the gateway) DESCRIBE, SETUP (TCP
 * interleaved or UDP) and PLAY, and get the publisher's packets as they come. So the RTP the gateway depacketises is
 * ffmpeg's own (its H.264/H.265 aggregation and fragmentation, its RFC 3640 AAC), not a packetiser of ours.
 *
 * Readers may have to authenticate (Basic or Digest, checked here the RFC 2617 way); the server counts connections
 * and PLAYs, can drop every reader (a camera reboot) and can send readers garbage (malformed RTSP and RTP).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import * as tls from 'node:tls';

export interface TestServerOptions {
  /** the path readers DESCRIBE (others get 404); default /cam */
  path?: string;
  auth?: { scheme: 'basic' | 'digest'; user: string; pwd: string; realm?: string };
  /** moves the NTP time of the publisher's RTCP sender reports by this many seconds (a camera whose clock is off) */
  ntpShiftSec?: number;
  /** also serve readers over TLS (rtsps://) on `tlsPort` */
  tls?: { key: string; cert: string };
}

interface Msg {
  method: string;
  uri: string;
  headers: Map<string, string>;
  body: Buffer;
}

interface Reader {
  socket: net.Socket;
  /** publisher stream index -> where its RTP/RTCP goes */
  routes: Map<number, { tcp?: [number, number]; udp?: [number, number] }>;
  playing: boolean;
}

export class TestRtspServer {
  readonly stats = { connections: 0, describes: 0, plays: 0, authFailures: 0, teardowns: 0, publishers: 0, keepAlives: 0, tcpSetups: 0, udpSetups: 0 };
  port = 0;
  tlsPort = 0;
  private server: net.Server;
  private tlsServer: tls.Server | undefined;
  private sdp: string | undefined;
  private readers = new Set<Reader>();
  private sockets = new Set<net.Socket>();
  private udpOut = dgram.createSocket('udp4');
  private nonce = randomBytes(8).toString('hex');
  private readonly path: string;
  private publisherReady: Promise<void>;
  private markReady!: () => void;

  constructor(private readonly o: TestServerOptions = {}) {
    this.path = o.path ?? '/cam';
    this.publisherReady = new Promise((r) => {
      this.markReady = r;
    });
    this.server = net.createServer((s) => this.onConnection(s));
    if (o.tls) this.tlsServer = tls.createServer({ key: o.tls.key, cert: o.tls.cert }, (s) => this.onConnection(s));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => this.udpOut.bind(0, '127.0.0.1', resolve));
    const ts = this.tlsServer;
    if (ts) {
      await new Promise<void>((resolve) => ts.listen(0, '127.0.0.1', resolve));
      this.tlsPort = (ts.address() as net.AddressInfo).port;
    }
  }

  /** where ffmpeg publishes */
  get publishUrl(): string {
    return `rtsp://127.0.0.1:${this.port}/publish`;
  }
  /** what the gateway pulls */
  url(path = this.path): string {
    return `rtsp://127.0.0.1:${this.port}${path}`;
  }
  /** resolves once a publisher RECORDs */
  whenPublishing(): Promise<void> {
    return this.publisherReady;
  }
  get playingReaders(): number {
    return [...this.readers].filter((r) => r.playing).length;
  }

  /** while true, readers get no media but the connection stays and RTSP is answered (a hung encoder) */
  frozen = false;
  /** while true, a SETUP asking for TCP interleaving is answered 461, as VLC's server and many cameras do */
  refuseTcp = false;
  /** while true, UDP SETUPs are accepted and their RTP is never sent: a firewall dropping UDP on the way */
  dropUdp = false;

  /** every reader's connection reset, as a rebooting camera does */
  dropReaders(): void {
    for (const r of this.readers) r.socket.destroy();
    this.readers.clear();
  }

  /** malformed input to every playing reader: junk between messages, a frame on an unknown channel, broken RTP */
  sendGarbage(): void {
    for (const r of this.readers) {
      if (!r.playing) continue;
      const route = r.routes.get(0)?.tcp;
      const parts: Buffer[] = [Buffer.from('garbage that is not RTSP\r\n\r\n'), frame(200, randomBytes(50))];
      if (route) {
        parts.push(frame(route[0], randomBytes(40))); // not RTP at all
        const bad = Buffer.alloc(20);
        bad[0] = 0x80;
        bad[1] = 96;
        bad.writeUInt16BE(1, 2);
        bad[12] = 0x7c;
        bad[13] = 0x40; // FU-A end without a start
        parts.push(frame(route[0], bad));
        const shortFu = Buffer.from([0x80, 96, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0x7c]);
        parts.push(frame(route[0], shortFu));
        parts.push(frame(route[0], Buffer.from([0x80]))); // too short for a header
        parts.push(frame(route[1], randomBytes(30))); // not RTCP
      }
      r.socket.write(Buffer.concat(parts));
    }
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.udpOut.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.tlsServer) await new Promise<void>((resolve) => this.tlsServer!.close(() => resolve()));
  }

  private onConnection(s: net.Socket): void {
    this.stats.connections++;
    this.sockets.add(s);
    let buf = Buffer.alloc(0);
    let publisher = false;
    const reader: Reader = { socket: s, routes: new Map(), playing: false };
    s.on('close', () => {
      this.sockets.delete(s);
      this.readers.delete(reader);
    });
    s.on('error', () => undefined);
    s.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (buf.length === 0) break;
        if (buf[0] === 0x24) {
          if (buf.length < 4) break;
          const len = buf.readUInt16BE(2);
          if (buf.length < 4 + len) break;
          if (publisher) this.relay(buf[1], buf.subarray(4, 4 + len));
          buf = buf.subarray(4 + len);
          continue;
        }
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) break;
        const lines = buf.toString('latin1', 0, end).split('\r\n');
        const [method, uri] = lines[0].split(' ');
        const headers = new Map<string, string>();
        for (const l of lines.slice(1)) {
          const i = l.indexOf(':');
          if (i > 0) headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
        }
        const cl = Number(headers.get('content-length') ?? 0);
        if (buf.length < end + 4 + cl) break;
        const body = buf.subarray(end + 4, end + 4 + cl);
        buf = buf.subarray(end + 4 + cl);
        const msg: Msg = { method, uri, headers, body };
        if (method === 'ANNOUNCE' || method === 'RECORD' || (publisher && method === 'SETUP')) publisher = true;
        if (publisher) this.onPublisher(s, msg);
        else this.onReader(reader, msg);
      }
    });
  }

  private reply(s: net.Socket, m: Msg, status: string, headers: Record<string, string> = {}, body = ''): void {
    const lines = [`RTSP/1.0 ${status}`, `CSeq: ${m.headers.get('cseq') ?? '0'}`];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    if (body) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
    s.write(lines.join('\r\n') + '\r\n\r\n' + body);
  }

  private onPublisher(s: net.Socket, m: Msg): void {
    switch (m.method) {
      case 'ANNOUNCE':
        this.sdp = m.body.toString('utf8');
        this.stats.publishers++;
        return this.reply(s, m, '200 OK');
      case 'SETUP':
        return this.reply(s, m, '200 OK', { Session: 'pub1;timeout=60', Transport: m.headers.get('transport') ?? '' });
      case 'RECORD':
        this.reply(s, m, '200 OK', { Session: 'pub1' });
        this.markReady();
        return;
      default:
        return this.reply(s, m, '200 OK', { Public: 'OPTIONS, ANNOUNCE, SETUP, RECORD, TEARDOWN' });
    }
  }

  private onReader(r: Reader, m: Msg): void {
    const s = r.socket;
    if (m.method === 'OPTIONS') return this.reply(s, m, '200 OK', { Public: 'OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, TEARDOWN' });
    if (m.method !== 'GET_PARAMETER' && m.method !== 'TEARDOWN' && !this.authorised(m)) {
      this.stats.authFailures++;
      const realm = this.o.auth?.realm ?? 'TestCam';
      const challenge = this.o.auth?.scheme === 'digest' ? `Digest realm="${realm}", nonce="${this.nonce}", algorithm="MD5"` : `Basic realm="${realm}"`;
      return this.reply(s, m, '401 Unauthorized', { 'WWW-Authenticate': challenge });
    }
    const path = new URL(m.uri).pathname;
    switch (m.method) {
      case 'DESCRIBE': {
        if (path !== this.path && path !== `${this.path}/`) return this.reply(s, m, '404 Not Found');
        if (!this.sdp) return this.reply(s, m, '503 Service Unavailable');
        this.stats.describes++;
        return this.reply(s, m, '200 OK', { 'Content-Type': 'application/sdp', 'Content-Base': `${m.uri.replace(/\/$/, '')}/` }, this.sdp);
      }
      case 'SETUP': {
        const idx = Number(/streamid=(\d+)/.exec(m.uri)?.[1] ?? -1);
        if (idx < 0) return this.reply(s, m, '404 Not Found');
        const t = m.headers.get('transport') ?? '';
        const il = /interleaved=(\d+)-(\d+)/.exec(t);
        const cp = /client_port=(\d+)-(\d+)/.exec(t);
        if (il) this.stats.tcpSetups++;
        else if (cp) this.stats.udpSetups++;
        if (il && this.refuseTcp) return this.reply(s, m, '461 Unsupported Transport');
        if (il) {
          r.routes.set(idx, { tcp: [Number(il[1]), Number(il[2])] });
        } else if (cp) {
          r.routes.set(idx, { udp: [Number(cp[1]), Number(cp[2])] });
        } else {
          return this.reply(s, m, '461 Unsupported Transport');
        }
        const transport = il ? t : `${t};server_port=${this.udpOut.address().port}-${this.udpOut.address().port + 1}`;
        return this.reply(s, m, '200 OK', { Session: 'rd1;timeout=60', Transport: transport });
      }
      case 'PLAY':
        this.stats.plays++;
        r.playing = true;
        this.readers.add(r);
        return this.reply(s, m, '200 OK', { Session: 'rd1', Range: 'npt=0.000-' });
      case 'GET_PARAMETER':
        this.stats.keepAlives++;
        return this.reply(s, m, '200 OK', { Session: 'rd1' });
      case 'TEARDOWN':
        this.stats.teardowns++;
        this.reply(s, m, '200 OK');
        r.playing = false;
        this.readers.delete(r);
        s.end();
        return;
      default:
        return this.reply(s, m, '501 Not Implemented');
    }
  }

  private authorised(m: Msg): boolean {
    const a = this.o.auth;
    if (!a) return true;
    const h = m.headers.get('authorization') ?? '';
    if (a.scheme === 'basic') return h === `Basic ${Buffer.from(`${a.user}:${a.pwd}`).toString('base64')}`;
    if (!h.startsWith('Digest ')) return false;
    const p: Record<string, string> = {};
    for (const x of h.slice(7).matchAll(/(\w+)=(?:"([^"]*)"|([^,\s]*))/g)) p[x[1]] = x[2] ?? x[3];
    const md5 = (x: string) => createHash('md5').update(x).digest('hex');
    const realm = a.realm ?? 'TestCam';
    if (p.username !== a.user || p.realm !== realm || p.nonce !== this.nonce || p.uri !== m.uri) return false;
    const ha1 = md5(`${a.user}:${realm}:${a.pwd}`);
    const ha2 = md5(`${m.method}:${p.uri}`);
    const want = p.qop ? md5(`${ha1}:${p.nonce}:${p.nc}:${p.cnonce}:${p.qop}:${ha2}`) : md5(`${ha1}:${p.nonce}:${ha2}`);
    return p.response === want;
  }

  /** a publisher's interleaved frame (channel 2i RTP, 2i+1 RTCP of stream i) to every playing reader */
  private relay(channel: number, data: Buffer): void {
    const idx = channel >> 1;
    const rtcp = (channel & 1) === 1;
    if (this.frozen) return;
    if (rtcp && this.o.ntpShiftSec) data = shiftSenderReports(data, this.o.ntpShiftSec);
    for (const r of this.readers) {
      if (!r.playing) continue;
      const route = r.routes.get(idx);
      if (route?.tcp) r.socket.write(frame(route.tcp[rtcp ? 1 : 0], data));
      else if (route?.udp && !this.dropUdp) this.udpOut.send(data, route.udp[rtcp ? 1 : 0], '127.0.0.1');
    }
  }
}

/** a copy of a compound RTCP packet with each sender report's NTP seconds moved */
function shiftSenderReports(data: Buffer, sec: number): Buffer {
  const b = Buffer.from(data);
  for (let off = 0; off + 4 <= b.length;) {
    const len = (b.readUInt16BE(off + 2) + 1) * 4;
    if (b[off + 1] === 200 && off + 16 <= b.length) b.writeUInt32BE((b.readUInt32BE(off + 8) + sec) >>> 0, off + 8);
    off += len;
  }
  return b;
}

function frame(channel: number, data: Buffer): Buffer {
  const h = Buffer.from([0x24, channel, 0, 0]);
  h.writeUInt16BE(data.length, 2);
  return Buffer.concat([h, data]);
}

/** a server that accepts connections and closes them at once (a source that "connects and drops") */
export async function droppingServer(): Promise<{ port: number; close(): Promise<void> }> {
  const srv = net.createServer((s) => s.destroy());
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return { port: (srv.address() as net.AddressInfo).port, close: () => new Promise((resolve) => srv.close(() => resolve())) };
}

/** a port nobody listens on (bound, then closed) */
export async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
