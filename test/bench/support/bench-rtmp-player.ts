/**
 * One RTMP player of a benchmark: a minimal RTMP client on a raw socket, as a player such as ffplay talks to a server,
 * and nothing more: the simple handshake (C0 C1, S0 S1 S2, C2), connect, createStream, play with the URL's stream
 * name and query, an Acknowledgement each time the server's window has been read, a Ping Response to a Ping Request.
 * Then it reads the chunk stream and counts: bytes, messages by type, video frames and key frames (sequence headers
 * apart), each message's first two bytes and nothing else of media bodies (nothing copied or decoded; only control
 * and command messages are kept whole). Video frames are matched to what its terminal sent, as the HTTP-FLV
 * players' tags are (bench-player.ts): an RTMP message's timestamp is the FLV tag's.
 *
 * Reads go into the process's shared read buffer (gateway-harness `sharedReads`), so hundreds of these cost the
 * load generator about what as many FLV players do. Any protocol surprise is an error: the socket is closed and
 * `error` says why.
 */
import type * as net from 'node:net';
import nmsAmf = require('node-media-server/src/protocol/amf.js');
import { connectTcp } from './gateway-harness';
import { SENT_RING, type SynthTerminal } from './synth-terminals';

const HANDSHAKE = 1536;
/** the chunk size this client sends with (announced first): every command then fits one chunk */
const OUT_CHUNK = 4096;
/** RTMP's message length is 24 bits */
const MAX_MESSAGE = 0xffffff;
/** control and command bodies are kept whole up to this; media bodies never */
const MAX_KEPT = 64 * 1024;
const HEADER_LEN = [11, 7, 3, 0];

export const enum RtmpType {
  ChunkSize = 1,
  Abort = 2,
  Ack = 3,
  User = 4,
  Window = 5,
  PeerBw = 6,
  Audio = 8,
  Video = 9,
  Data = 18,
  Command = 20,
}

/** one chunk stream's message in flight */
interface ChunkStream {
  ts: number;
  delta: number;
  len: number;
  type: number;
  sid: number;
  ext: boolean;
  /** bytes of the current message still to come (0: the next chunk starts a message) */
  left: number;
  /** the message's first two bytes */
  head: number;
  headFill: number;
  body: Buffer | undefined;
  bodyFill: number;
}

/** AMF0 values a client's commands need: numbers, strings, booleans, null, flat objects */
export function amf0(values: unknown[]): Buffer {
  const parts: Buffer[] = [];
  const str = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    const h = Buffer.alloc(2);
    h.writeUInt16BE(b.length);
    parts.push(h, b);
  };
  const value = (v: unknown): void => {
    if (typeof v === 'number') {
      const b = Buffer.alloc(9);
      b.writeDoubleBE(v, 1);
      parts.push(b);
    } else if (typeof v === 'boolean') parts.push(Buffer.from([1, v ? 1 : 0]));
    else if (typeof v === 'string') {
      parts.push(Buffer.from([2]));
      str(v);
    } else if (v === null || v === undefined) parts.push(Buffer.from([5]));
    else if (typeof v === 'object') {
      parts.push(Buffer.from([3]));
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        str(k);
        value(x);
      }
      parts.push(Buffer.from([0, 0, 9]));
    } else throw new TypeError(`no AMF0 for ${typeof v}`);
  };
  for (const v of values) value(v);
  return Buffer.concat(parts);
}

/** one message as a single type-0 chunk (its body must fit the chunk size) */
export function rtmpMessage(csid: number, type: number, streamId: number, body: Buffer, ts = 0): Buffer {
  const h = Buffer.alloc(12);
  h[0] = csid;
  h.writeUIntBE(Math.min(ts, 0xffffff), 1, 3);
  h.writeUIntBE(body.length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(streamId, 8);
  return Buffer.concat([h, body]);
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};

export class RtmpBenchPlayer {
  socket?: net.Socket;
  closed = false;
  error: string | undefined;
  /** the server said NetStream.Play.Start */
  playing = false;
  /** bytes read, handshake and chunk headers included */
  bytes = 0;
  messages = 0;
  /** video messages that are frames (not sequence headers), key frames among them, and the sequence headers */
  videoFrames = 0;
  keyframes = 0;
  videoConfigs = 0;
  audioMessages = 0;
  dataMessages = 0;
  acksSent = 0;
  /** count and match frames (off outside the measured window) */
  measuring = false;
  videoInWindow = 0;
  audioInWindow = 0;
  keyframesInWindow = 0;
  unmatched = 0;

  private handshakeLeft = 1 + 2 * HANDSHAKE;
  private readonly s1 = Buffer.alloc(HANDSHAKE);
  private inChunk = 128;
  private window = 0;
  private lastAck = 0;
  private streamId = 0;
  private playName = '';
  private tcUrl = '';
  private app = '';
  private readonly streams = new Map<number, ChunkStream>();
  /** header bytes of the chunk being read (3 basic + 11 + 4 extended at most) */
  private readonly hdr = Buffer.alloc(18);
  private hdrFill = 0;
  private hdrNeed = 1;
  private cur: ChunkStream | undefined;
  /** payload bytes of the current chunk still to come (0: reading a chunk header) */
  private chunkLeft = 0;
  private vPos = 0;

  constructor(
    private readonly term: SynthTerminal | undefined,
    private readonly onVideoLatency?: (ms: number) => void,
  ) {}

  /** Connects to `url` (rtmp://host:port/app/stream?query) and starts the handshake; the rest runs by itself. */
  async connect(url: URL, signal: AbortSignal): Promise<void> {
    const parts = url.pathname.split('/').filter(Boolean);
    if (url.protocol !== 'rtmp:' || parts.length < 2) throw new Error(`not an RTMP play URL: ${url.protocol}//${url.host}${url.pathname}`);
    this.app = parts[0];
    this.playName = parts.slice(1).join('/') + url.search;
    this.tcUrl = `rtmp://${url.host}/${this.app}`;
    const s = await connectTcp(Number(url.port || 1935), signal, (chunk, end) => this.push(chunk, end));
    this.socket = s;
    s.on('error', (err) => {
      this.fail(`socket: ${err.message}`);
    });
    s.on('close', () => {
      this.closed = true;
    });
    const c1 = Buffer.alloc(1 + HANDSHAKE);
    c1[0] = 3; // C0: RTMP 3; C1: time 0, zero 0 (the simple handshake), then 1528 bytes of anything
    for (let i = 9; i < c1.length; i++) c1[i] = (i * 131) & 0xff;
    s.write(c1);
  }

  /** Feeds bytes 0 to `end` of `b` (valid during the call only). */
  push(b: Buffer, end = b.length): void {
    if (this.error !== undefined) return;
    this.bytes += end;
    try {
      this.parse(b, end);
    } catch (err) {
      this.fail((err as Error).message);
      return;
    }
    if (this.window > 0 && this.bytes - this.lastAck >= this.window) {
      this.lastAck = this.bytes;
      this.send(2, RtmpType.Ack, 0, u32(this.bytes));
      this.acksSent++;
    }
  }

  private fail(why: string): void {
    if (this.error === undefined) this.error = why;
    this.socket?.destroy();
  }

  private send(csid: number, type: number, sid: number, body: Buffer): void {
    if (this.socket && !this.socket.destroyed) this.socket.write(rtmpMessage(csid, type, sid, body));
  }

  private command(sid: number, values: unknown[]): void {
    this.send(sid === 0 ? 3 : 8, RtmpType.Command, sid, amf0(values));
  }

  private parse(b: Buffer, end: number): void {
    let off = 0;
    if (this.handshakeLeft > 0) {
      const n = Math.min(this.handshakeLeft, end);
      const at = 1 + 2 * HANDSHAKE - this.handshakeLeft; // position in S0 S1 S2
      if (at === 0 && b[0] !== 3) throw new Error(`S0 is ${b[0]}, not RTMP 3`);
      // keep S1 (positions 1 to 1536): C2 echoes it
      const from = Math.max(at, 1);
      const to = Math.min(at + n, 1 + HANDSHAKE);
      if (to > from) b.copy(this.s1, from - 1, from - at, to - at);
      this.handshakeLeft -= n;
      off = n;
      if (this.handshakeLeft > 0) return;
      this.socket?.write(this.s1);
      this.send(2, RtmpType.ChunkSize, 0, u32(OUT_CHUNK));
      this.command(0, [
        'connect',
        1,
        {
          app: this.app,
          flashVer: 'LNX 9,0,124,2',
          tcUrl: this.tcUrl,
          fpad: false,
          capabilities: 15,
          audioCodecs: 0x0fff,
          videoCodecs: 0x00ff,
          videoFunction: 1,
        },
      ]);
    }
    while (off < end) {
      if (this.chunkLeft === 0) {
        // chunk header, a byte at a time (it may be split across reads)
        while (this.hdrFill < this.hdrNeed && off < end) {
          this.hdr[this.hdrFill++] = b[off++];
          if (this.hdrFill === this.hdrNeed) this.headerProgress();
        }
        if (this.hdrFill < this.hdrNeed) return;
        this.startChunk();
        if (this.chunkLeft === 0) {
          // an empty message (or the end of one): the next chunk header follows
          this.hdrFill = 0;
          this.hdrNeed = 1;
          continue;
        }
      }
      const cs = this.cur!;
      const n = Math.min(end - off, this.chunkLeft);
      for (let k = 0; cs.headFill < 2 && k < n; k++, cs.headFill++) cs.head = (cs.head << 8) | b[off + k];
      if (cs.body) b.copy(cs.body, cs.bodyFill, off, off + n);
      cs.bodyFill += n;
      cs.left -= n;
      this.chunkLeft -= n;
      off += n;
      if (cs.left === 0) this.message(cs);
      if (this.chunkLeft === 0) {
        this.hdrFill = 0;
        this.hdrNeed = 1;
      }
    }
  }

  /** the header bytes read so far said how many more it has */
  private headerProgress(): void {
    const h = this.hdr;
    const basic = (h[0] & 0x3f) === 0 ? 2 : (h[0] & 0x3f) === 1 ? 3 : 1;
    const fmt = h[0] >> 6;
    if (this.hdrFill === 1) {
      this.hdrNeed = basic + HEADER_LEN[fmt];
      if (this.hdrNeed > 1) return;
    }
    if (this.hdrFill === basic + HEADER_LEN[fmt]) {
      const cs = this.streams.get(this.csid());
      const ext = fmt < 3 ? h.readUIntBE(basic, 3) === 0xffffff : cs?.ext === true;
      if (ext) this.hdrNeed += 4;
    }
  }

  private csid(): number {
    const h = this.hdr;
    const low = h[0] & 0x3f;
    return low === 0 ? 64 + h[1] : low === 1 ? 64 + h[1] + h[2] * 256 : low;
  }

  private startChunk(): void {
    const h = this.hdr;
    const fmt = h[0] >> 6;
    const id = this.csid();
    const basic = (h[0] & 0x3f) === 0 ? 2 : (h[0] & 0x3f) === 1 ? 3 : 1;
    let cs = this.streams.get(id);
    if (!cs) {
      if (fmt !== 0) throw new Error(`chunk stream ${id} starts with a type-${fmt} chunk`);
      if (this.streams.size >= 64) throw new Error('more than 64 chunk streams');
      cs = { ts: 0, delta: 0, len: 0, type: 0, sid: 0, ext: false, left: 0, head: 0, headFill: 0, body: undefined, bodyFill: 0 };
      this.streams.set(id, cs);
    }
    let tsField = 0;
    if (fmt < 3) {
      tsField = h.readUIntBE(basic, 3);
      cs.ext = tsField === 0xffffff;
      if (cs.ext) tsField = h.readUInt32BE(basic + HEADER_LEN[fmt]);
    }
    if (fmt < 2) {
      cs.len = h.readUIntBE(basic + 3, 3);
      cs.type = h[basic + 6];
    }
    if (fmt === 0) cs.sid = h.readUInt32LE(basic + 7);
    if (cs.left === 0) {
      // a new message
      if (fmt === 0) {
        cs.ts = tsField;
        cs.delta = 0;
      } else {
        if (fmt < 3) cs.delta = tsField;
        cs.ts += cs.delta;
      }
      if (cs.len > MAX_MESSAGE) throw new Error(`a message of ${cs.len} bytes`);
      cs.left = cs.len;
      cs.head = 0;
      cs.headFill = 0;
      cs.bodyFill = 0;
      // the type byte as received: one the player does not handle matches no member
      const type = cs.type as RtmpType;
      const media = type === RtmpType.Audio || type === RtmpType.Video || type === RtmpType.Data;
      if (!media && cs.len > MAX_KEPT) throw new Error(`a type-${cs.type} message of ${cs.len} bytes`);
      cs.body = media ? undefined : Buffer.alloc(cs.len);
    } else if (fmt !== 3) {
      throw new Error(`a type-${fmt} chunk in the middle of a message on chunk stream ${id}`);
    }
    this.cur = cs;
    this.chunkLeft = Math.min(this.inChunk, cs.left);
    if (this.chunkLeft === 0) this.message(cs);
  }

  private message(cs: ChunkStream): void {
    this.messages++;
    const body = cs.body;
    switch (cs.type as RtmpType) {
      case RtmpType.Video:
        return this.onVideo(cs.ts, cs.head, cs.headFill);
      case RtmpType.Audio:
        this.audioMessages++;
        if (this.measuring) this.audioInWindow++;
        return;
      case RtmpType.Data:
        this.dataMessages++;
        return;
      case RtmpType.ChunkSize: {
        const size = body!.readUInt32BE(0) & 0x7fffffff;
        if (size < 1) throw new Error(`chunk size ${size}`);
        this.inChunk = size;
        return;
      }
      case RtmpType.Window:
        this.window = body!.readUInt32BE(0);
        return;
      case RtmpType.User:
        // Ping Request (6): answer with a Ping Response (7) of its timestamp
        if (body!.length >= 6 && body!.readUInt16BE(0) === 6) this.send(2, RtmpType.User, 0, Buffer.concat([Buffer.from([0, 7]), body!.subarray(2, 6)]));
        return;
      case RtmpType.Command:
        return this.onCommand(body!);
      case RtmpType.Abort: {
        const other = this.streams.get(body!.readUInt32BE(0));
        if (other) other.left = 0;
        return;
      }
      default:
        return; // Acknowledgement, Set Peer Bandwidth, and whatever else a server may send
    }
  }

  private onCommand(body: Buffer): void {
    const m = nmsAmf.decodeAmf0Cmd(body);
    const info = m.info as { code?: unknown; level?: unknown; description?: unknown } | number | undefined;
    if (m.cmd === '_result' && m.transId === 1) {
      this.command(0, ['createStream', 2, null]);
    } else if (m.cmd === '_result' && m.transId === 2) {
      if (typeof info !== 'number') throw new Error('createStream answered without a stream id');
      this.streamId = info;
      this.command(this.streamId, ['play', 0, null, this.playName, -2000]);
    } else if (m.cmd === '_error') {
      throw new Error(`the server answered command ${m.transId} with _error: ${JSON.stringify(info)}`);
    } else if (m.cmd === 'onStatus' && typeof info === 'object' && info !== null) {
      if (info.level === 'error') throw new Error(`${String(info.code)}: ${String(info.description)}`);
      if (info.code === 'NetStream.Play.Start') this.playing = true;
    }
  }

  private onVideo(ts: number, head: number, headFill: number): void {
    // AVC: byte 0 frame type and codec, byte 1 the AVC packet type (0 the sequence header)
    if (headFill === 2 && (head & 0xff) === 0) {
      this.videoConfigs++;
      return;
    }
    this.videoFrames++;
    const key = head >> 12 === 1;
    if (key) this.keyframes++;
    if (!this.measuring) return;
    this.videoInWindow++;
    if (key) this.keyframesInWindow++;
    const t = this.term;
    if (!t || !this.onVideoLatency) return;
    if (t.sentCount - this.vPos > SENT_RING) this.vPos = t.sentCount - SENT_RING;
    while (this.vPos < t.sentCount && t.sentT[this.vPos % SENT_RING] < ts) this.vPos++;
    if (this.vPos < t.sentCount && t.sentT[this.vPos % SENT_RING] === ts) this.onVideoLatency(performance.now() - t.sentAt[this.vPos % SENT_RING]);
    else this.unmatched++;
  }
}
