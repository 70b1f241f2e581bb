/**
 * Types for the parts of node-media-server 4.4.3 (CommonJS, untyped) that core/nms-bridge.ts uses.
 * The version is pinned in package.json: these internals are not a public API and change between releases.
 */

declare module 'node-media-server/src/core/avpacket.js' {
  class AVPacket {
    codec_id: number;
    /** FLV tag type: 8 audio, 9 video, 18 script */
    codec_type: number;
    duration: number;
    /** 0 audio sequence header, 1 audio frame, 2 video sequence header, 3 video keyframe, 4 video frame, 5 metadata */
    flags: number;
    pts: number;
    dts: number;
    size: number;
    offset: number;
    /** the whole FLV tag body */
    data: Buffer;
  }
  export = AVPacket;
}

declare module 'node-media-server/src/session/base_session.js' {
  class BaseSession {
    id: string;
    /** '' marks an internal session (no play/publish events counted) */
    ip: string;
    isPublisher: boolean;
    /** 'flv' | 'rtmp' | ...: selects which message form the broadcast sends */
    protocol: string;
    streamHost: string;
    streamApp: string;
    streamName: string;
    streamPath: string;
    streamQuery: Record<string, unknown>;
    createTime: number;
    endTime: number;
    videoCodec: number;
    videoWidth: number;
    videoHeight: number;
    videoFramerate: number;
    audioCodec: number;
    audioChannels: number;
    audioSamplerate: number;
    inBytes: number;
    outBytes: number;
    playCount: number;
    /** assigned in the constructor as an instance field; subclasses override it the same way */
    sendBuffer: (buffer: Buffer) => void;
    close: () => void;
  }
  export = BaseSession;
}

declare module 'node-media-server/src/server/broadcast_server.js' {
  import AVPacket = require('node-media-server/src/core/avpacket.js');
  import BaseSession = require('node-media-server/src/session/base_session.js');
  class BroadcastServer {
    constructor(streamPath: string);
    streamPath: string;
    publisher: BaseSession | null;
    subscribers: Map<string, BaseSession>;
    flvHeader: Buffer;
    flvMetaData: Buffer | null;
    flvAudioHeader: Buffer | null;
    flvVideoHeader: Buffer | null;
    rtmpMetaData: Buffer | null;
    rtmpAudioHeader: Buffer | null;
    rtmpVideoHeader: Buffer | null;
    flvGopCache: Set<Buffer> | null;
    rtmpGopCache: Set<Buffer> | null;
    publishGraceMs: number;
    _publishGraceTimer: ReturnType<typeof setTimeout> | null;
    /** sends header, cached metadata/sequence headers and GOP to the session, then subscribes it; returns an error text or null */
    postPlay: (session: BaseSession) => string | null;
    donePlay: (session: BaseSession) => void;
    postPublish: (session: BaseSession) => string | null;
    donePublish: (session: BaseSession) => void;
    /** ends the publish now: clears the caches (donePublish instead waits out a 30 s grace) */
    _finishPublish: () => void;
    broadcastMessage: (packet: AVPacket) => void;
  }
  export = BroadcastServer;
}

declare module 'node-media-server/src/protocol/flv.js' {
  import AVPacket = require('node-media-server/src/core/avpacket.js');
  class Flv {
    static createHeader(hasAudio: boolean, hasVideo: boolean): Buffer;
    static createMessage(packet: AVPacket): Buffer;
    /** classifies a tag body into an AVPacket (flags, codec_id, pts from the composition time) */
    static parserTag(type: number, time: number, size: number, data: Buffer): AVPacket;
  }
  export = Flv;
}

declare module 'node-media-server/src/core/logger.js' {
  interface NmsLogger {
    level: string;
    log(message: unknown, logLevel?: string): void;
    trace(message: unknown): void;
    debug(message: unknown): void;
    info(message: unknown): void;
    warn(message: unknown): void;
    error(message: unknown): void;
  }
  const logger: NmsLogger;
  export = logger;
}
