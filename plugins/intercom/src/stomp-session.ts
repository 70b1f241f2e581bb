/**
 * One STOMP 1.2 connection on `/talk-stomp` (the query authorised it already; CONNECT needs no login).
 *
 * CONNECT or STOMP first → CONNECTED (version 1.2, negotiated heart-beats). SEND to `/talk/{reqId}` of this
 * connection's request, with the audio as a binary body (content-length) → the talker. SUBSCRIBE to the same
 * destination → the terminal's audio as MESSAGE frames. `receipt` on any frame → RECEIPT. DISCONNECT → RECEIPT (if
 * asked) and close 1000. Anything wrong → an ERROR frame saying what (message header and body), then close 4400.
 */
import type { WebSocket } from 'ws';
import type { IntercomMeters } from './meters';
import { negotiateHeartBeat, serializeFrame, StompReader, StompSyntaxError, type StompFrame } from './stomp';
import { CLOSE, type TalkConnection, type Talker } from './talker';
import { closeWs, toBuffer } from './client-format';

export interface StompSessionOptions {
  reqId: string;
  heartBeatMs: number;
  maxBodyBytes: number;
  meters: IntercomMeters;
  /** rate-limited by the caller (a peer can send bad frames at will) */
  log: (obj: Record<string, unknown>, msg: string) => void;
  now(): number;
  /** logged as an error (not rate-limited: it is ours, not the peer's) */
  onInternalError(err: Error): void;
  setInterval(fn: () => void, ms: number): () => void;
}

const SERVER = 'jt1078-gateway-intercom/1';
/** what one frame's headers may take */
const MAX_HEADER_BYTES = 8 * 1024;

export class StompSession {
  private talker: Talker | undefined;
  private readonly reader: StompReader;
  private connected = false;
  private ending = false;
  private subscription: string | undefined;
  private messageId = 0;
  private lastRx: number;
  private cancelBeat: (() => void) | undefined;
  private readonly destination: string;

  constructor(
    private readonly ws: WebSocket,
    private readonly o: StompSessionOptions,
  ) {
    this.reader = new StompReader({ maxHeaderBytes: MAX_HEADER_BYTES, maxBodyBytes: o.maxBodyBytes });
    this.lastRx = o.now();
    this.destination = `/talk/${o.reqId}`;
    ws.on('message', (data) => this.onMessage(toBuffer(data)));
    ws.on('close', (code) => {
      this.cancelBeat?.();
      if (code === 1009) o.meters.refused.inc({ reason: 'oversized' });
      if (code === 1000 || code === 1001 || code === 1005) this.talker?.finish(code, 'client closed');
      else this.talker?.close(code, 'client closed');
    });
  }

  /** the talker's side of this connection: downlink as MESSAGE frames while subscribed */
  connection(): TalkConnection {
    return {
      sendAudio: (data) => {
        if (this.subscription === undefined || this.ws.readyState !== this.ws.OPEN) return;
        this.ws.send(
          serializeFrame(
            'MESSAGE',
            {
              subscription: this.subscription,
              'message-id': String(++this.messageId),
              destination: this.destination,
              'content-type': 'application/octet-stream',
            },
            data,
          ),
          { binary: true },
        );
      },
      backlog: () => this.ws.bufferedAmount,
      close: (code, reason) => {
        this.cancelBeat?.();
        closeWs(this.ws, code, reason);
      },
    };
  }

  attach(t: Talker): void {
    this.talker = t;
  }

  private onMessage(data: Buffer): void {
    if (this.ending || !this.talker || this.talker.isClosed) return;
    this.lastRx = this.o.now();
    try {
      for (const e of this.reader.push(data)) {
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- handling the frame before may have ended the session
        if (this.ending) return;
        if (e.type === 'frame') this.onFrame(e.frame);
      }
    } catch (err) {
      if (err instanceof StompSyntaxError) {
        this.o.meters.malformed.inc({ proto: 'talk-stomp' });
        this.error('malformed frame', err.message);
        return;
      }
      // a bug of ours: this connection ends, the gateway goes on
      this.o.onInternalError(err as Error);
      this.error('internal error', 'the frame could not be handled', undefined, {}, CLOSE.internal);
    }
  }

  private onFrame(f: StompFrame): void {
    const receipt = f.headers.get('receipt');
    if (!this.connected) {
      if (f.command !== 'CONNECT' && f.command !== 'STOMP') return this.error('not connected', `${f.command} before CONNECT`, receipt);
      return this.connect(f);
    }
    switch (f.command) {
      case 'CONNECT':
      case 'STOMP':
        return this.error('already connected', 'a second CONNECT on one connection', receipt);
      case 'SEND': {
        const dest = f.headers.get('destination');
        if (dest === undefined) return this.error('SEND without destination', `send to ${this.destination}`, receipt);
        if (dest !== this.destination)
          return this.error('wrong destination', `destination '${dest.slice(0, 80)}' is not this connection's (${this.destination})`, receipt);
        if (f.headers.get('content-length') === undefined && f.body.length > 0) {
          // without it the body ended at the first NUL, which audio is full of
          return this.error('content-length missing', 'a binary body needs a content-length header', receipt);
        }
        const why = this.talker!.audio(f.body);
        if (why) {
          this.o.meters.malformed.inc({ proto: 'talk-stomp' });
          return this.error('malformed audio', why, receipt);
        }
        break;
      }
      case 'SUBSCRIBE': {
        const dest = f.headers.get('destination');
        const id = f.headers.get('id');
        if (id === undefined) return this.error('SUBSCRIBE without id', 'the id header is required', receipt);
        if (dest !== this.destination)
          return this.error('wrong destination', `destination '${(dest ?? '').slice(0, 80)}' is not this connection's (${this.destination})`, receipt);
        this.subscription = id;
        this.talker!.startDownlink();
        break;
      }
      case 'UNSUBSCRIBE':
        if (f.headers.get('id') !== this.subscription)
          return this.error('unknown subscription', `no subscription '${(f.headers.get('id') ?? '').slice(0, 40)}'`, receipt);
        this.subscription = undefined;
        this.talker!.stopDownlink();
        break;
      case 'DISCONNECT':
        if (receipt !== undefined) this.send(serializeFrame('RECEIPT', { 'receipt-id': receipt }));
        this.ending = true;
        // the socket closes now; what the client said still goes out (Talker.finish)
        this.talker!.finish(CLOSE.normal, 'client disconnected');
        closeWs(this.ws, CLOSE.normal, 'client disconnected');
        return;
      default:
        return this.error('not supported', `${f.command} is not supported here (no transactions, no acknowledgements)`, receipt);
    }
    if (receipt !== undefined) this.send(serializeFrame('RECEIPT', { 'receipt-id': receipt }));
  }

  private connect(f: StompFrame): void {
    const receipt = f.headers.get('receipt');
    const versions = (f.headers.get('accept-version') ?? '1.0').split(',').map((v) => v.trim());
    if (!versions.includes('1.2')) return this.error('unsupported version', 'this server speaks STOMP 1.2', receipt, { version: '1.2' });
    const hb = negotiateHeartBeat(f.headers.get('heart-beat'), this.o.heartBeatMs);
    if (typeof hb === 'string') return this.error('bad heart-beat', hb, receipt);
    this.connected = true;
    this.send(serializeFrame('CONNECTED', { version: '1.2', 'heart-beat': hb.header, server: SERVER, session: this.o.reqId }));
    if (receipt !== undefined) this.send(serializeFrame('RECEIPT', { 'receipt-id': receipt }));
    const every = Math.min(...[hb.sendEveryMs, hb.expectEveryMs].filter((x) => x > 0));
    if (Number.isFinite(every)) {
      let lastTx = this.o.now();
      this.cancelBeat = this.o.setInterval(
        () => {
          const now = this.o.now();
          // 1.2: allow for timing inaccuracy; twice the agreed period without a byte is a dead peer
          if (hb.expectEveryMs > 0 && now - this.lastRx > 2 * hb.expectEveryMs) {
            this.error('heart-beat timeout', `nothing received for ${now - this.lastRx} ms`, undefined, {}, CLOSE.heartbeat);
            return;
          }
          if (hb.sendEveryMs > 0 && now - lastTx >= hb.sendEveryMs) {
            lastTx = now;
            if (this.ws.readyState === this.ws.OPEN) this.ws.send('\n');
          }
        },
        Math.max(50, Math.floor(every / 2)),
      );
    }
  }

  private send(frame: Buffer): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(frame, { binary: true });
  }

  /** An ERROR frame saying what was wrong, then the connection closes (STOMP 1.2: the server closes after ERROR). */
  private error(message: string, detail: string, receipt?: string, extra: Record<string, string> = {}, code: number = CLOSE.stompError): void {
    if (this.ending) return;
    this.ending = true;
    this.o.meters.stompErrors.inc();
    const headers: Record<string, string> = { message, ...extra, 'content-type': 'text/plain' };
    if (receipt !== undefined) headers['receipt-id'] = receipt;
    this.send(serializeFrame('ERROR', headers, detail));
    this.o.log({ reqId: this.o.reqId, message, detail }, 'talk (STOMP): error frame sent');
    this.talker?.close(code, `STOMP error: ${message}`.slice(0, 120));
  }
}
