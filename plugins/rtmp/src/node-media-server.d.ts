/**
 * Types for the node-media-server 4.4.3 RTMP module rtmp loads (CommonJS, untyped). The version is pinned in
 * package.json: these describe that version's source (src/protocol/rtmp.js), not a public API.
 */
declare module 'node-media-server/src/protocol/rtmp.js' {
  interface NmsRtmpHeader {
    fmt: number;
    cid: number;
    timestamp: number;
    length: number;
    type: number;
    stream_id: number;
  }
  interface NmsRtmpPacket {
    header: NmsRtmpHeader;
    clock: number;
    payload: Buffer;
    capacity: number;
    bytes: number;
  }
  interface NmsInvoke {
    cmd: string;
    transId: number;
    cmdObj?: Record<string, unknown> | null;
    streamName?: string;
    [k: string]: unknown;
  }
  class Rtmp {
    handshakeState: number;
    parserState: number;
    parserBuffer: Buffer;
    parserBasicBytes: number;
    parserPacket: NmsRtmpPacket;
    inPackets: Map<number, NmsRtmpPacket>;
    inChunkSize: number;
    outChunkSize: number;
    streams: number;
    streamApp?: string;
    streamName?: string;
    streamId?: number;
    connectCmdObj?: Record<string, unknown>;
    objectEncoding?: number;
    onOutputCallback: (buffer: Buffer) => void;
    parserData(buffer: Buffer): string | null;
    packetParse(): void;
    chunkMessageHeaderRead(): number;
    packetAlloc(): void;
    packetHandler(): void;
    controlHandler(): void;
    invokeHandler(): void;
    dataHandler(): void;
    onConnect(invoke: NmsInvoke): void;
    onCreateStream(invoke: NmsInvoke): void;
    onPublish(invoke: NmsInvoke): void;
    onPlay(invoke: NmsInvoke): void;
    onDeleteStream(invoke: NmsInvoke): void;
    sendStatusMessage(sid: number, level: string, code: string, description: string): void;
    sendInvokeMessage(sid: number, opt: Record<string, unknown>): void;
    sendStreamStatus(st: number, id: number): void;
    respondPublish(): void;
    respondPlay(): void;
    static chunksCreate(packet: { header: NmsRtmpHeader; payload: Buffer }): Buffer;
  }
  export = Rtmp;
}

// (flv-out declares this module's encoder; these are the decoders rtmp reads commands with)
declare module 'node-media-server/src/protocol/amf.js' {
  /** the first AMF0 value of a buffer, and its length in bytes; undefined (or a throw) on bytes that are no AMF0 */
  export function amf0DecodeOne(b: Buffer): { len: number; value: unknown } | undefined;
  /** a command message: its name, transaction id, command object and the fields NMS knows for that command */
  export function decodeAmf0Cmd(b: Buffer): { cmd: string; transId: number; cmdObj?: Record<string, unknown> | null; [k: string]: unknown };
}

declare module 'node-media-server/src/protocol/amf.js' {
  /** a command message: `cmd`, then the fields NMS knows for that command, in order */
  export function encodeAmf0Cmd(opt: Record<string, unknown>): Buffer;
}

declare module 'node-media-server/src/core/logger.js' {
  /** NMS's one logger for the process: prints with console.log at or above `level` (it starts at debug) */
  const logger: { level: string };
  export = logger;
}
