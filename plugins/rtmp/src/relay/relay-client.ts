/**
 * One relay connection: an RTMP client that publishes, on node-media-server's chunk parser and AMF0 code (the
 * `Rtmp` class of src/protocol/rtmp.js, one instance per connection). It speaks what ffmpeg speaks to a live
 * platform: the simple handshake, Set Chunk Size, connect (app, tcUrl, flashVer FMLE), releaseStream, FCPublish,
 * createStream, publish (live), and waits for NetStream.Publish.Start; the owner then sends media with `send`.
 *
 * The server is any host an API caller names, so what it sends is bounded as our server bounds its clients: a
 * server has only commands to send, so messages over 1 MiB, chunk sizes outside RTMP's range and many chunk streams
 * end the connection. Its error descriptions are shown in status with the stream key scrubbed (servers echo the
 * stream name: `/live/KEY is now published`).
 */
import { randomBytes } from 'node:crypto';
import * as net from 'node:net';
import * as tls from 'node:tls';
import nmsAmf = require('node-media-server/src/protocol/amf.js');
import { BYTE_TOTAL_START } from '../../../../plugin-sdk';
import { GuardedRtmp, ProtocolError } from '../guarded-rtmp';
import type { RelayTarget } from './relay-url';

const HANDSHAKE_SIZE = 1536;
/** NMS's RTMP_HANDSHAKE_2: from this state on its parserData reads chunks (the handshake is ours, as a client) */
const NMS_HANDSHAKE_DONE = 3;
/** chunk size we announce: rtmp-format's messages are chunked at 65,535 (chunksCreate's own size) */
const OUT_CHUNK_SIZE = 0xffff;
const MAX_SERVER_MESSAGE = 1024 * 1024;
const MAX_CHUNK_STREAMS = 16;
/** commands a publishing client acts on; others (onBWDone, onFCPublish…) are read past without NMS's decoder, which logs unknown ones */
const ACTED_ON = new Set(['_result', '_error', 'onStatus', 'close']);
const T_CONNECT = 1;
const T_CREATE_STREAM = 4;
const T_PUBLISH = 5;

export interface RelayClientOptions {
  target: RelayTarget;
  /** the address the host policy checked */
  address: string;
  timeoutMs: number;
  /** CAs for rtmps (undefined: Node's own store) */
  ca: string[] | undefined;
  highWaterBytes: number;
  /** NetStream.Publish.Start came: media may go, on this message stream id */
  publishing(streamId: number): void;
  /** the connection failed or ended (once; not after close()) */
  failed(reason: string): void;
  drain(): void;
}

type Phase = 'handshake' | 'connect' | 'createStream' | 'publish' | 'publishing' | 'closed';

function controlMessage(type: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(12);
  h[0] = 2;
  h.writeUIntBE(payload.length, 4, 3);
  h[7] = type;
  return Buffer.concat([h, payload]);
}

export class RelayClient extends GuardedRtmp {
  private readonly socket: net.Socket;
  private phase: Phase = 'handshake';
  private handshake: Buffer[] = [];
  private handshakeBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private received = 0;
  private acked = 0;
  private ackWindow = 0;
  private publishStreamId = 0;
  bytesOut = BYTE_TOTAL_START;

  constructor(private readonly o: RelayClientOptions) {
    super(MAX_SERVER_MESSAGE, MAX_CHUNK_STREAMS);
    this.onOutputCallback = (b: Buffer) => this.send(b);
    const t = o.target;
    this.socket = t.secure
      ? // the name is checked against the certificate although the connection goes to the address resolved
        tls.connect({ host: o.address, port: t.port, servername: net.isIP(t.host) ? undefined : t.host, ca: o.ca })
      : net.connect({ host: o.address, port: t.port });
    this.socket.setNoDelay(true);
    this.socket.once(t.secure ? 'secureConnect' : 'connect', () => this.sendC0C1());
    this.socket.on('data', (b: Buffer) => this.read(b));
    this.socket.on('drain', () => o.drain());
    this.socket.on('error', (err: NodeJS.ErrnoException) => this.fail(err.code ? `${err.code}: ${err.message}` : err.message));
    this.socket.on('close', () =>
      this.fail(this.phase === 'publishing' ? 'the server closed the connection' : 'the server closed the connection before NetStream.Publish.Start'),
    );
    this.timer = setTimeout(() => this.fail(`no NetStream.Publish.Start within ${o.timeoutMs / 1000} s`), o.timeoutMs);
  }

  get streamIdOut(): number {
    return this.publishStreamId;
  }

  writable(): boolean {
    return this.socket.writableLength < this.o.highWaterBytes;
  }

  send(b: Buffer): void {
    if (this.phase === 'closed' || this.socket.destroyed) return;
    this.socket.write(b);
    this.bytesOut += b.length;
  }

  /** ends the publish as ffmpeg does (FCUnpublish, deleteStream), then the connection; no `failed` follows */
  close(): void {
    if (this.phase === 'closed') return;
    if (this.phase === 'publishing') {
      const key = this.o.target.streamKey;
      this.sendInvokeMessage(0, { cmd: 'FCUnpublish', transId: 6, cmdObj: null, streamName: key });
      this.sendInvokeMessage(0, { cmd: 'deleteStream', transId: 7, cmdObj: null, streamId: this.publishStreamId });
    }
    this.phase = 'closed';
    this.clearTimer();
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  private fail(reason: string): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.clearTimer();
    this.socket.destroy();
    this.o.failed(this.scrub(reason));
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** a server's words with the stream key (and its name without the query) taken out, and bounded */
  private scrub(s: string): string {
    const key = this.o.target.streamKey;
    const name = key.split('?')[0];
    let out = s.split(key).join('***');
    if (name.length >= 3) out = out.split(name).join('***');
    return out.length > 200 ? out.slice(0, 200) + '…' : out;
  }

  private sendC0C1(): void {
    const c1 = randomBytes(HANDSHAKE_SIZE);
    // time 0 and zero "version": the simple handshake, as ffmpeg and NMS's own client send
    c1.fill(0, 0, 8);
    this.socket.write(Buffer.concat([Buffer.from([3]), c1]));
  }

  private read(b: Buffer): void {
    this.received += b.length;
    if (this.phase === 'handshake') {
      this.handshake.push(b);
      this.handshakeBytes += b.length;
      if (this.handshakeBytes < 1 + 2 * HANDSHAKE_SIZE) return;
      const all = Buffer.concat(this.handshake);
      this.handshake = [];
      if (all[0] !== 3) return this.fail(`not an RTMP server (S0 ${all[0]})`);
      // C2 echoes S1
      this.socket.write(all.subarray(1, 1 + HANDSHAKE_SIZE));
      this.handshakeState = NMS_HANDSHAKE_DONE;
      this.phase = 'connect';
      const size = Buffer.alloc(4);
      size.writeUInt32BE(OUT_CHUNK_SIZE);
      this.send(controlMessage(1, size));
      const t = this.o.target;
      this.sendInvokeMessage(0, {
        cmd: 'connect',
        transId: T_CONNECT,
        cmdObj: { app: t.app, type: 'nonprivate', flashVer: 'FMLE/3.0 (compatible; FMSc/1.0)', swfUrl: t.tcUrl, tcUrl: t.tcUrl },
      });
      b = all.subarray(1 + 2 * HANDSHAKE_SIZE);
      if (b.length === 0) return;
    }
    try {
      this.parserData(b);
    } catch (err) {
      return this.fail(`unreadable RTMP from the server (${(err as Error).message})`);
    }
    if (this.ackWindow > 0 && this.received - this.acked >= this.ackWindow) {
      this.acked = this.received;
      const p = Buffer.alloc(4);
      p.writeUInt32BE(this.received % 0x100000000);
      this.send(controlMessage(3, p));
    }
  }

  // --- NMS parser hooks --------------------------------------------------------------------------------------------

  override controlHandler(): void {
    const h = this.parserPacket.header;
    const p = this.parserPacket.payload;
    const size = this.chunkSizeOf();
    if (size !== undefined) {
      this.inChunkSize = size;
    } else if (h.type === 5) {
      if (h.length < 4) throw new ProtocolError('a short Window Acknowledgement Size');
      this.ackWindow = p.readUInt32BE(0);
    }
  }

  /** User Control: a PingRequest (6) gets its PingResponse (7), as servers that drop silent clients expect */
  eventHandler(): void {
    const h = this.parserPacket.header;
    const p = this.parserPacket.payload;
    if (h.length < 6 || p.readUInt16BE(0) !== 6) return;
    const pong = Buffer.alloc(6);
    pong.writeUInt16BE(7, 0);
    p.copy(pong, 2, 2, 6);
    this.send(controlMessage(4, pong));
  }

  override dataHandler(): void {
    // a publisher has no use for the server's data messages (|RtmpSampleAccess, onMetaData echoes)
  }

  override invokeHandler(): void {
    const h = this.parserPacket.header;
    const body = this.parserPacket.payload.subarray(h.type === 17 ? 1 : 0, h.length);
    const cmd = (nmsAmf.amf0DecodeOne(body) as { value?: unknown } | undefined)?.value;
    if (typeof cmd !== 'string' || !ACTED_ON.has(cmd)) return;
    const m = nmsAmf.decodeAmf0Cmd(body);
    const info = (typeof m.info === 'object' && m.info !== null ? m.info : {}) as { code?: unknown; level?: unknown; description?: unknown };
    const said = [info.code, info.description].filter((x) => typeof x === 'string' && x !== '').join(': ');
    if (cmd === 'close') return this.fail(`the server closed the stream${said ? ` (${said})` : ''}`);
    if (cmd === '_error') return this.fail(`${this.phase} refused${said ? `: ${said}` : ''}`);
    if (cmd === '_result') return this.result(m.transId, m.info);
    // onStatus
    if (info.code === 'NetStream.Publish.Start' && this.phase === 'publish') {
      this.phase = 'publishing';
      this.clearTimer();
      this.o.publishing(this.publishStreamId);
    } else if (info.level === 'error' || /Failed|BadName|Rejected|Error|Unpublish/.test(String(info.code))) {
      this.fail(said || 'an onStatus error');
    }
  }

  private result(transId: number, info: unknown): void {
    const key = this.o.target.streamKey;
    if (transId === T_CONNECT && this.phase === 'connect') {
      this.phase = 'createStream';
      this.sendInvokeMessage(0, { cmd: 'releaseStream', transId: 2, cmdObj: null, streamName: key });
      this.sendInvokeMessage(0, { cmd: 'FCPublish', transId: 3, cmdObj: null, streamName: key });
      this.sendInvokeMessage(0, { cmd: 'createStream', transId: T_CREATE_STREAM, cmdObj: null });
    } else if (transId === T_CREATE_STREAM && this.phase === 'createStream') {
      if (typeof info !== 'number' || !Number.isInteger(info) || info < 0) return this.fail('createStream answered without a stream id');
      this.publishStreamId = info;
      this.phase = 'publish';
      this.sendInvokeMessage(info, { cmd: 'publish', transId: T_PUBLISH, cmdObj: null, streamName: key, type: 'live' });
    }
  }
}
