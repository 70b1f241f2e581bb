/**
 * One RTSP client session with a camera (RFC 2326): connect (TCP or TLS), OPTIONS, DESCRIBE (answering Basic or
 * Digest challenges), SETUP of each usable track (TCP interleaved, or UDP), PLAY; then keep-alive within the
 * server's session timeout, stall detection, and TEARDOWN on close. It hands RTP and RTCP to its owner, which
 * depacketises; reconnecting is the owner's business (a session is used once).
 */
import type * as dgram from 'node:dgram';
import * as net from 'node:net';
import * as tls from 'node:tls';
import type { Logger } from 'pino';
import type { Cancel, Clock } from '../../../plugin-sdk';
import { SourceError } from './errors';
import { cseqOf, serializeResponse, parseRtpInfo, parseSessionHeader, RtspReader, type RtspItem, type RtspRequest } from '../../../plugin-sdk/rtsp';
import { RequestChannel } from './request-channel';
import { parseSdp, type Sdp, type SdpMedia } from './sdp';
import { setupRefusal, transportHeader, type Transport } from './transport-choice';
import { bindRtpPair } from './udp-pair';
import { redactText, tlsServerName, type SourceUrl } from './url';

export interface SessionOptions {
  source: SourceUrl;
  transport: Transport;
  /** connect, and each request's answer */
  requestTimeoutMs: number;
  /** no RTP for this long while playing ends the session ('stalled') */
  stallTimeoutMs: number;
  /** 0: half the server's session timeout (default 60 s), at least 5 s */
  keepAliveMs: number;
  tlsVerify: boolean;
  clock: Clock;
  log: Logger;
}

export interface SessionHandler {
  rtp(track: number, data: Buffer): void;
  rtcp(track: number, data: Buffer): void;
  /** bytes read from the camera (RTSP and media) */
  bytes(n: number): void;
  malformed(what: 'rtsp' | 'interleaved'): void;
  /** the session ended after PLAY was answered (never called for a failure of start()) */
  ended(err: SourceError): void;
}

export interface PlayingTrack {
  index: number;
  media: SdpMedia;
  /** rtptime of RTP-Info: the timestamp of the PLAY instant in this track's clock, when the server says */
  rtptime?: number;
}

export interface PlayInfo {
  tracks: PlayingTrack[];
  sdp: Sdp;
  /** media in the SDP we cannot take (encoding names) */
  skipped: string[];
  transport: Transport;
}

export class RtspSession {
  private socket: net.Socket | undefined;
  private readonly parser = new RtspReader({ mode: 'resync' });
  private readonly requests: RequestChannel;
  private sessionTimeoutSec: number | undefined;
  private publicMethods = new Set<string>();
  /** interleaved channel -> track and kind */
  private channels = new Map<number, { track: number; rtcp: boolean }>();
  private udp: dgram.Socket[] = [];
  private timers: Cancel[] = [];
  private playing = false;
  private closedWith: SourceError | undefined;
  private connected = false;
  /** the last RTP or RTCP from the camera: keep-alive answers do not count, a camera may answer them and send nothing */
  private lastMediaAt = 0;
  private remoteAddress = '';
  private handler: SessionHandler | undefined;

  constructor(private readonly o: SessionOptions) {
    this.requests = new RequestChannel({
      source: o.source,
      clock: o.clock,
      requestTimeoutMs: o.requestTimeoutMs,
      write: (text) => this.socket?.write(text),
      unusable: () => this.closedWith ?? (this.socket ? undefined : new SourceError('dropped', 'not connected')),
    });
  }

  /** resolves once PLAY is answered 2xx; rejects with a SourceError saying what went wrong */
  async start(handler: SessionHandler): Promise<PlayInfo> {
    this.handler = handler;
    try {
      await this.connect();
      const src = this.o.source;
      const opt = await this.requests.request('OPTIONS', src.requestUrl);
      // OPTIONS failing is no reason to give up: some cameras answer it only after DESCRIBE, or 501
      if (opt.status === 200) for (const m of (opt.headers.get('public') ?? '').split(',')) this.publicMethods.add(m.trim().toUpperCase());
      const desc = await this.requests.request('DESCRIBE', src.requestUrl, { Accept: 'application/sdp' });
      this.requests.expectOk(desc, 'DESCRIBE');
      const base = desc.headers.get('content-base') ?? desc.headers.get('content-location') ?? src.requestUrl;
      const sdp = parseSdp(desc.body.toString('utf8'), stripCredentials(base));
      const usable = sdp.media.filter((m) => m.codec !== undefined);
      const skipped = sdp.media.filter((m) => m.codec === undefined).map((m) => `${m.type} ${m.encoding}`);
      if (usable.length === 0) {
        const offered = sdp.media.map((m) => `${m.type} ${m.encoding}`).join(', ') || 'no media';
        throw new SourceError('unsupported', `it offers ${offered}; supported are H.264, H.265, AAC (mpeg4-generic), PCMA and PCMU`);
      }
      const tracks: PlayingTrack[] = [];
      for (const media of usable) {
        const index = tracks.length;
        await this.setup(index, media);
        tracks.push({ index, media });
      }
      const play = await this.requests.request('PLAY', stripCredentials(base), { Range: 'npt=0.000-' });
      this.requests.expectOk(play, 'PLAY');
      for (const info of parseRtpInfo(play.headers.get('rtp-info'))) {
        const t = tracks.find((x) => sameControl(x.media.control, info.url));
        if (t && info.rtptime !== undefined) t.rtptime = info.rtptime;
      }
      this.playing = true;
      this.lastMediaAt = this.o.clock.now();
      this.startTimers();
      return { tracks, sdp, skipped, transport: this.o.transport };
    } catch (err) {
      const e = err instanceof SourceError ? err : new SourceError('dropped', (err as Error).message);
      this.teardown(e, false);
      throw e;
    }
  }

  /** ends the session (TEARDOWN when playing); idempotent; no `ended` call follows */
  close(): void {
    this.teardown(new SourceError('closed', 'closed'), true);
  }

  get isPlaying(): boolean {
    return this.playing && !this.closedWith;
  }

  // --- connection ------------------------------------------------------------------------------------------

  private connect(): Promise<void> {
    const src = this.o.source;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (e: SourceError) => {
        if (settled) return;
        settled = true;
        cancel();
        reject(e);
      };
      const onConnected = () => {
        if (settled) return;
        settled = true;
        cancel();
        this.connected = true;
        this.remoteAddress = sock.remoteAddress ?? src.host;
        sock.setNoDelay(true);
        resolve();
      };
      const sock: net.Socket = src.tls
        ? tls.connect({ host: src.host, port: src.port, servername: tlsServerName(src.host), rejectUnauthorized: this.o.tlsVerify }, onConnected)
        : net.connect({ host: src.host, port: src.port }, onConnected);
      this.socket = sock;
      const cancel = this.o.clock.setTimeout(() => {
        fail(new SourceError('unreachable', `no connection within ${Math.round(this.o.requestTimeoutMs / 1000)} s`));
        sock.destroy();
      }, this.o.requestTimeoutMs);
      sock.on('data', (chunk: Buffer) => {
        this.handler?.bytes(chunk.length);
        try {
          for (const item of this.parser.push(chunk)) this.onItem(item);
        } catch (err) {
          // a bug of ours on odd input must not take the process down: drop what is buffered, go on
          this.handler?.malformed('rtsp');
          this.o.log.warn({ source: src.redacted, err: (err as Error).message }, 'RTSP input could not be handled');
        }
      });
      sock.on('error', (err: NodeJS.ErrnoException) => {
        const msg = redactText(describeSocketError(err), [src.pwd]);
        if (!this.connected) {
          const tlsFail = src.tls && !/ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|ETIMEDOUT/.test(err.code ?? '');
          fail(new SourceError(tlsFail && err.code !== 'ECONNRESET' ? 'tls' : 'unreachable', msg));
        } else {
          this.teardown(new SourceError('dropped', msg), false);
        }
      });
      sock.on('close', () => {
        if (!this.connected) fail(new SourceError('unreachable', 'the connection closed before it was made'));
        else
          this.teardown(
            new SourceError('dropped', this.playing ? 'the source closed the connection' : 'the source closed the connection before answering'),
            false,
          );
      });
    });
  }

  private async setup(index: number, media: SdpMedia): Promise<void> {
    const tcp = this.o.transport === 'tcp';
    const port = tcp ? 0 : await this.bindUdpPair(index);
    const r = await this.requests.request('SETUP', media.control, { Transport: transportHeader(this.o.transport, index, port) }).catch((err: unknown) => {
      throw err instanceof SourceError && err.kind === 'dropped' ? new SourceError('transport', 'the connection closed at SETUP') : err;
    });
    const refused = setupRefusal(this.o.transport, r, this.o.source.pwd);
    if (refused) throw new SourceError('transport', refused);
    const s = parseSessionHeader(r.headers.get('session'));
    if (s) {
      this.requests.sessionId ??= s.id;
      this.sessionTimeoutSec ??= s.timeoutSec;
    }
    if (tcp) {
      const m = /interleaved=(\d+)(?:-(\d+))?/i.exec(r.headers.get('transport') ?? '');
      const rtp = m ? Number(m[1]) : index * 2;
      const rtcp = m && m[2] !== undefined ? Number(m[2]) : rtp + 1;
      this.channels.set(rtp, { track: index, rtcp: false });
      this.channels.set(rtcp, { track: index, rtcp: true });
    }
  }

  private async bindUdpPair(track: number): Promise<number> {
    const { port, sockets } = await bindRtpPair(net.isIPv6(this.remoteAddress) ? 'udp6' : 'udp4', (rtcp, msg, rinfo) => {
      // only the camera may feed this track; anyone else on the network is ignored
      if (rinfo.address !== this.remoteAddress && rinfo.address !== `::ffff:${this.remoteAddress}`) return;
      this.handler?.bytes(msg.length);
      this.lastMediaAt = this.o.clock.now();
      if (rtcp) this.handler?.rtcp(track, msg);
      else this.handler?.rtp(track, msg);
    });
    this.udp.push(...sockets);
    return port;
  }

  // --- what the connection brings ------------------------------------------------------------------------

  private onItem(item: RtspItem): void {
    switch (item.kind) {
      case 'response':
        this.requests.onResponse(item.response);
        return;
      case 'request':
        this.onServerRequest(item.request);
        return;
      case 'interleaved':
        this.onInterleaved(item.channel, item.data);
        return;
      case 'skipped':
        this.handler?.malformed('rtsp');
        this.o.log.debug({ source: this.o.source.redacted, what: item.what }, 'malformed RTSP from the source: skipped to the next message');
        return;
      case 'error':
        return;
    }
  }

  /** a server's own request (keep-alive probes, ANNOUNCE of a new SDP): answered so it does not wait on us */
  private onServerRequest(m: RtspRequest): void {
    const ok = m.method === 'OPTIONS' || m.method === 'GET_PARAMETER';
    // its CSeq is echoed only when it is digits: a camera's header cannot write lines into our answer
    this.socket?.write(serializeResponse(ok ? 200 : 501, [['CSeq', cseqOf(m) ?? '0']]));
  }

  private onInterleaved(channel: number, data: Buffer): void {
    const c = this.channels.get(channel);
    if (!c) {
      this.handler?.malformed('interleaved');
      return;
    }
    this.lastMediaAt = this.o.clock.now();
    if (c.rtcp) this.handler?.rtcp(c.track, data);
    else this.handler?.rtp(c.track, data);
  }

  // --- while playing -----------------------------------------------------------------------------------------

  private startTimers(): void {
    const every = this.o.keepAliveMs > 0 ? this.o.keepAliveMs : Math.max(5000, ((this.sessionTimeoutSec ?? 60) * 1000) / 2);
    const method = this.publicMethods.has('GET_PARAMETER') ? 'GET_PARAMETER' : 'OPTIONS';
    this.timers.push(
      this.o.clock.setInterval(() => {
        this.requests.request(method, this.o.source.requestUrl).then(
          (r) => {
            // the server forgot the session (454): it will stop sending; start again
            if (r.status === 454) this.teardown(new SourceError('dropped', 'the source ended the session (454 to keep-alive)'), false);
          },
          () => undefined,
        );
      }, every),
    );
    this.timers.push(
      this.o.clock.setInterval(
        () => {
          if (this.o.clock.now() - this.lastMediaAt > this.o.stallTimeoutMs) {
            this.teardown(new SourceError('stalled', `no data for ${Math.round(this.o.stallTimeoutMs / 1000)} s`), false);
          }
        },
        Math.min(1000, this.o.stallTimeoutMs),
      ),
    );
  }

  private teardown(err: SourceError, byUs: boolean): void {
    if (this.closedWith) return;
    this.closedWith = err;
    for (const t of this.timers) t();
    this.timers = [];
    this.requests.failAll(err);
    for (const u of this.udp) {
      try {
        u.close();
      } catch {
        /* already closed */
      }
    }
    this.udp = [];
    const sock = this.socket;
    if (sock && !sock.destroyed) {
      if (byUs && this.playing && this.requests.sessionId) {
        sock.end(this.requests.lastWords('TEARDOWN', this.o.source.requestUrl));
        const c = this.o.clock.setTimeout(() => sock.destroy(), 1000);
        sock.once('close', () => c());
      } else {
        sock.destroy();
      }
    }
    const wasPlaying = this.playing;
    this.playing = false;
    if (wasPlaying && !byUs) this.handler?.ended(err);
  }
}

function describeSocketError(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host name not found';
    case 'ETIMEDOUT':
      return 'connection timed out';
    default:
      return err.code ? `${err.code}: ${err.message}` : err.message;
  }
}

/** a Content-Base with credentials in it (some cameras echo them) must not reach a log */
function stripCredentials(u: string): string {
  try {
    const x = new URL(u);
    if (!x.username && !x.password) return u;
    x.username = '';
    x.password = '';
    return x.toString();
  } catch {
    return u;
  }
}

/** RTP-Info names a stream by its full control URL or a part of it */
function sameControl(control: string, url: string): boolean {
  if (!url) return false;
  return control === url || control.endsWith(url) || url.endsWith(control) || (url.includes('/') && control.endsWith(url.slice(url.lastIndexOf('/'))));
}
