/**
 * node-media-server's RTMP chunk parser (`src/protocol/rtmp.js`, one instance per connection) with the limits a peer
 * on the internet needs, for both ends we run: our server's connections (rtmp-peer.ts) and our relays' connections
 * to servers an API caller names (relay/relay-client.ts). NMS allocates whatever a peer announces (16 MiB per chunk
 * stream id, 65,599 ids) and takes any chunk size; here a message over `maxMessageBytes`, a chunk size outside RTMP's
 * own range (1 .. 2^24-1: a message cannot be longer), more chunk streams than `maxChunkStreams`, or messages in
 * flight over twice `maxMessageBytes` is a ProtocolError. Its 3-byte chunk basic header (chunk stream ids from 320)
 * is read as RTMP says, 64 + byte1 + byte2 * 256 (NMS shifts the sum by 8).
 */
import NmsRtmp = require('node-media-server/src/protocol/rtmp.js');
import nmsLogger = require('node-media-server/src/core/logger.js');

// NMS's logger is one for the process and starts at debug, printing with console.log: its lines (an E-RTMP client's
// strict array is "Do strict array!") would land between our JSON log lines. Its errors only are kept; the code we
// use reaches them only for commands we send, never for what a peer sends (rtmp-peer.ts reads command names first).
nmsLogger.level = 'error';

/** a peer broke the protocol or a limit: drop it */
export class ProtocolError extends Error {}

const RTMP_TYPE_SET_CHUNK_SIZE = 1;
/** RTMP's message length field is 24 bits: a chunk cannot usefully be larger */
export const MAX_CHUNK_SIZE = 0xffffff;
const EMPTY = Buffer.alloc(0);

export class GuardedRtmp extends NmsRtmp {
  constructor(
    private readonly maxMessageBytes: number,
    private readonly maxChunkStreams: number,
  ) {
    super();
  }

  override packetParse(): void {
    const b = this.parserBuffer;
    const fmt = b[0] >> 6;
    const n = this.parserBasicBytes;
    const cid = n === 2 ? 64 + b[1] : n === 3 ? 64 + b[1] + b[2] * 256 : b[0] & 0x3f;
    let p = this.inPackets.get(cid);
    if (!p) {
      if (this.inPackets.size >= this.maxChunkStreams) throw new ProtocolError(`more than ${this.maxChunkStreams} chunk streams`);
      p = { header: { fmt, cid, timestamp: 0, length: 0, type: 0, stream_id: 0 }, clock: 0, payload: EMPTY, capacity: 0, bytes: 0 };
      this.inPackets.set(cid, p);
    }
    this.parserPacket = p;
    p.header.fmt = fmt;
    p.header.cid = cid;
    this.chunkMessageHeaderRead();
  }

  override packetAlloc(): void {
    const len = this.parserPacket.header.length;
    if (len > this.maxMessageBytes) throw new ProtocolError(`a message of ${len} bytes (at most ${this.maxMessageBytes})`);
    super.packetAlloc();
    // each chunk stream keeps its own buffer: together they stay within two of the largest messages
    let held = 0;
    for (const q of this.inPackets.values()) held += q.capacity;
    if (held > 2 * this.maxMessageBytes + 64 * 1024) throw new ProtocolError(`${held} bytes of messages in flight across chunk streams`);
  }

  /** a Set Chunk Size's new size, checked (throws ProtocolError) */
  protected chunkSizeOf(): number | undefined {
    const h = this.parserPacket.header;
    if (h.type !== RTMP_TYPE_SET_CHUNK_SIZE) return undefined;
    if (h.length < 4) throw new ProtocolError('a short Set Chunk Size');
    const size = this.parserPacket.payload.readUInt32BE(0) & 0x7fffffff;
    if (size < 1 || size > MAX_CHUNK_SIZE) throw new ProtocolError(`chunk size ${size} (RTMP allows 1 to ${MAX_CHUNK_SIZE})`);
    return size;
  }
}
