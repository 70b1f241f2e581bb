/**
 * A relay's bus reader: the stream's RTMP form (the bytes rtmp-format makes once for every RTMP reader), made fit
 * for publishing. What a player gets as it is differs for a server in three ways, so each message is taken out of
 * its chunks and chunked again (one copy of the messages, for one relay; players keep the shared bytes):
 * - onMetaData goes as `@setDataFrame` `onMetaData` (what ffmpeg and OBS send; a server stores it for its players);
 * - timestamps start near 0 on each connection, as an encoder's do (the stream's own timeline may be hours in);
 * - the message stream id is the one createStream gave (the shared bytes say 1).
 * Backpressure is the bus's: while the socket holds highWaterBytes the bus queues (bounded, then skips a GOP).
 */
import type { AccessUnit, MediaReader, ReaderHandle } from '../../../../plugin-sdk';
import { FLV_TAG_SCRIPT, type FlvTag } from '../../../../plugin-sdk/formats';
import { messageOf, type RtmpFrame } from '../rtmp-format';

/** AMF0 string "@setDataFrame", put before a script tag's "onMetaData" */
const SET_DATA_FRAME = Buffer.concat([Buffer.from([2, 0, 13]), Buffer.from('@setDataFrame')]);
/** the size rtmp-format's messages are chunked at (node-media-server's chunksCreate) */
const CHUNK = 0xffff;

export interface RtmpMessage {
  type: number;
  timestamp: number;
  body: Buffer;
}

/**
 * The messages in bytes made by chunksCreate: each a type-0 chunk with a 1-byte basic header, then type-3
 * continuation chunks every 65,535 bytes (with the extended timestamp again when there is one).
 */
export function messagesIn(b: Buffer): RtmpMessage[] {
  const out: RtmpMessage[] = [];
  let at = 0;
  while (at < b.length) {
    if (b[at] >> 6 !== 0 || (b[at] & 0x3f) < 2) throw new Error('not a type-0 chunk with a 1-byte header');
    let timestamp = b.readUIntBE(at + 1, 3);
    const length = b.readUIntBE(at + 4, 3);
    const type = b[at + 7];
    at += 12;
    const extended = timestamp === 0xffffff;
    if (extended) {
      timestamp = b.readUInt32BE(at);
      at += 4;
    }
    const parts: Buffer[] = [];
    let left = length;
    for (;;) {
      const n = Math.min(left, CHUNK);
      parts.push(b.subarray(at, at + n));
      at += n;
      left -= n;
      if (left === 0) break;
      at += 1 + (extended ? 4 : 0);
    }
    if (at > b.length) throw new Error('a message runs past its bytes');
    out.push({ type, timestamp, body: parts.length === 1 ? parts[0] : Buffer.concat(parts) });
  }
  return out;
}

export interface RelayOut {
  send(b: Buffer): void;
  writable(): boolean;
}

export class RelaySink implements MediaReader<RtmpFrame> {
  sub: ReaderHandle | undefined;
  private starting = true;
  private version = -1;
  private base: number | undefined;
  private last = 0;

  constructor(
    private readonly out: RelayOut,
    private readonly streamId: number,
    private readonly sent: (n: number) => void,
    private readonly ended: (reason: string) => void,
  ) {}

  holdsPayloads(): boolean {
    return false;
  }

  writable(): boolean {
    return this.out.writable();
  }

  write(_unit: AccessUnit, f: RtmpFrame): void {
    let bytes: Buffer;
    if (!this.starting) {
      bytes = f.bytes;
    } else {
      if (f.init === undefined) return;
      const own = f.mediaAt === 0 ? f.bytes : f.bytes.subarray(f.mediaAt);
      bytes = this.version !== f.version ? Buffer.concat([f.init, own]) : own;
      this.starting = false;
    }
    this.version = f.version;
    const out = this.rewrite(bytes);
    this.out.send(out);
    this.sent(out.length);
  }

  skipped(): void {
    this.starting = true;
  }

  end(reason: string): void {
    this.ended(reason);
  }

  private rewrite(bytes: Buffer): Buffer {
    const parts: Buffer[] = [];
    for (const m of messagesIn(bytes)) {
      const script = m.type === FLV_TAG_SCRIPT;
      // the first media message of the connection sets its zero (one before it, audio just ahead of the key frame,
      // goes at 0); onMetaData says 0 in the shared bytes, and goes at the media's time here
      if (!script) {
        this.base ??= m.timestamp;
        this.last = Math.max(0, m.timestamp - this.base);
      }
      const timestamp = this.last;
      const body = script ? Buffer.concat([SET_DATA_FRAME, m.body]) : m.body;
      const tag: FlvTag = { type: m.type as FlvTag['type'], timestamp, body, keyframe: false };
      parts.push(messageOf(tag, this.streamId));
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }
}
