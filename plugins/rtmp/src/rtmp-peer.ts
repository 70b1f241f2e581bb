/**
 * One RTMP connection's protocol, on node-media-server's own code: its handshake (simple and digest), chunk stream
 * parser and AMF0 commands (`src/protocol/rtmp.js`, one instance per connection: it keeps no global state). What
 * this subclass adds is what a server facing the internet needs and NMS leaves out:
 *
 * - limits (guarded-rtmp.ts): a message larger than maxMessageBytes, a chunk size outside RTMP's range, more chunk
 *   streams in flight than any encoder uses: a ProtocolError, and the connection is dropped;
 * - authorisation before the answer: NMS answers `NetStream.Play.Start`/`Publish.Start` before its callbacks run, so
 *   a refused client would already have been told yes. Here play and publish go to the owner, which calls `accept`
 *   or `refuse`;
 * - a quiet parser: NMS logs an unknown command through its own console logger. Commands are read here by name
 *   first, and only the ones a client needs an answer to reach NMS's decoder.
 *
 * Media messages (audio, video, data) go to the owner as views of the parser's buffer, valid during the call.
 */
import nmsAmf = require('node-media-server/src/protocol/amf.js');
import { GuardedRtmp, ProtocolError } from './guarded-rtmp';

const RTMP_TYPE_FLEX_MESSAGE = 17;
/** chunk stream ids with a message in flight; ffmpeg and OBS use 2 to 8 */
const MAX_CHUNK_STREAMS = 64;
/** commands that get an answer; others (FCPublish, releaseStream, _checkbw…) need none from a server */
const ANSWERED = new Set(['connect', 'createStream', 'publish', 'play', 'deleteStream', 'closeStream']);

export interface PlayOrPublish {
  /** the stream name without its query */
  name: string;
  query: URLSearchParams;
  /** the RTMP `app` of the connect */
  app: string;
}

export interface RtmpPeerOwner {
  output(b: Buffer): void;
  /** a play or publish command: answer with `accept` or `refuse`, now or later */
  play(p: PlayOrPublish): void;
  publish(p: PlayOrPublish): void;
  /** an audio (8), video (9) or data (18) message; `body` is valid only during the call */
  message(type: number, timestampMs: number, body: Buffer): void;
  /** the client closed its stream (deleteStream, closeStream) */
  streamClosed(): void;
}

export class RtmpPeer extends GuardedRtmp {
  private role: 'play' | 'publish' | undefined;
  private asked = false;
  private firstByte = true;

  constructor(
    private readonly owner: RtmpPeerOwner,
    maxMessageBytes: number,
  ) {
    super(maxMessageBytes, MAX_CHUNK_STREAMS);
    this.onOutputCallback = (b: Buffer) => owner.output(b);
  }

  /** whether the client's connect said it reads Enhanced RTMP video (E-RTMP `fourCcList` naming hvc1, or '*') */
  get enhanced(): boolean {
    const list = this.connectCmdObj?.fourCcList;
    // a strict array as E-RTMP says; an ECMA array (an object of indexes) from clients that encode it so
    const values: unknown[] = Array.isArray(list) ? list : list !== null && typeof list === 'object' ? Object.values(list) : [];
    return values.some((x) => x === 'hvc1' || x === '*');
  }

  /** Parses what the peer sent; throws ProtocolError (or whatever NMS's decoder throws on garbage) to drop it. */
  read(b: Buffer): void {
    if (this.firstByte && b.length > 0) {
      this.firstByte = false;
      // C0: RTMP 3 (6 would be RTMPE, which NMS does not speak)
      if (b[0] !== 3) throw new ProtocolError(`not RTMP: first byte ${b[0]}`);
    }
    this.parserData(b);
  }

  accept(): void {
    if (this.role === 'publish') this.respondPublish();
    else this.respondPlay();
  }

  /** tells the client why (onStatus error) before the owner closes the connection */
  refuse(code: string, description: string): void {
    this.sendStatusMessage(this.streamId ?? 0, 'error', code, description);
  }

  override controlHandler(): void {
    this.chunkSizeOf();
    super.controlHandler();
  }

  override invokeHandler(): void {
    const h = this.parserPacket.header;
    const body = this.parserPacket.payload.subarray(h.type === RTMP_TYPE_FLEX_MESSAGE ? 1 : 0, h.length);
    const first = nmsAmf.amf0DecodeOne(body) as { value?: unknown } | undefined;
    const cmd = first?.value;
    if (typeof cmd !== 'string' || !ANSWERED.has(cmd)) return;
    const m = nmsAmf.decodeAmf0Cmd(body);
    switch (cmd) {
      case 'connect':
        if (typeof m.cmdObj?.tcUrl !== 'string' || typeof m.cmdObj.app !== 'string') throw new ProtocolError('connect without tcUrl and app');
        this.onConnect(m);
        break;
      case 'createStream':
        this.onCreateStream(m);
        break;
      case 'play':
      case 'publish':
        this.ask(cmd, m);
        break;
      default:
        this.owner.streamClosed();
    }
  }

  override dataHandler(): void {
    const h = this.parserPacket.header;
    this.owner.message(h.type, this.parserPacket.clock, this.parserPacket.payload.subarray(0, h.length));
  }

  private ask(cmd: 'play' | 'publish', m: Record<string, unknown>): void {
    if (this.asked) throw new ProtocolError(`a second ${cmd} on one connection`);
    if (typeof m.streamName !== 'string') throw new ProtocolError(`${cmd} without a stream name`);
    this.asked = true;
    this.role = cmd;
    const q = m.streamName.indexOf('?');
    this.streamName = q < 0 ? m.streamName : m.streamName.slice(0, q);
    this.streamId = this.parserPacket.header.stream_id;
    const p: PlayOrPublish = { name: this.streamName, query: new URLSearchParams(q < 0 ? '' : m.streamName.slice(q + 1)), app: this.streamApp ?? '' };
    if (cmd === 'play') this.owner.play(p);
    else this.owner.publish(p);
  }
}
