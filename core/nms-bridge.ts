/**
 * The one module that touches node-media-server (4.4.3): HTTP-FLV and WS-FLV players fed by our own publishers.
 *
 * What we take from NMS:
 * - its BroadcastServer, one per stream, as the stream's state: publisher and subscriber sessions (postPublish,
 *   postPlay, donePlay, _finishPublish), the FLV header and the caches a late joiner needs (onMetaData, audio and
 *   video sequence headers, GOP). Its postPlay replays those caches to a joining player and subscribes it;
 * - its FLV tag classification (Flv.parserTag) for which cache a tag belongs in, and its AMF0 reader for
 *   onMetaData (which tracks the FLV header announces);
 * - its BaseSession contract for players and publishers, and its logger (routed to pino).
 * What we do ourselves: the per-tag path. NMS's broadcastMessage makes two copies of every tag (an RTMP chunked
 * one and a zero-filled FLV one) for every tag although we serve no RTMP; instead each tag is framed once, in
 * place, in the room FlvMuxer leaves around a body (serializeTag), cached by reference in the BroadcastServer's
 * caches, and that one Buffer goes to every player of the stream. HTTP players get their chunked framing
 * written straight to their socket (one shared chunk-size line per tag), and every player's socket is corked
 * for the rest of the tick, so the tags of one tick leave in one writev per player.
 * What we deliberately do not load, because it cannot be made safe from outside:
 * - NodeMediaServer (index.js): forces its logger to debug on console.log, opens a JSON store under ./data of
 *   the working directory, starts RTMP/record/relay/notify servers and a rate-sampler timer.
 * - NodeHttpServer: process.exit(1) on EADDRINUSE, serves /admin and CORS for everything, treats every
 *   WebSocket upgrade as WS-FLV, and lets anyone publish with POST or a "post"/"publisher" WS subprotocol.
 * - FlvSession: writes without backpressure, allocates a 1 MiB parser buffer per player and parses whatever
 *   a player sends, and registers streams in NMS's process-wide Context.
 * So this file serves HTTP/WS itself and subscribes its own player sessions to NMS broadcasts. The guards:
 * - each player's socket backlog is capped: past it the player skips to the next keyframe, and a player that
 *   stays stuck (backlog plus media it missed passes 4x the cap) is dropped;
 * - the GOP cache is capped in bytes (NMS counts only messages) and there is no RTMP twin of it;
 * - a publisher that can make its GOP's tags again on demand (joinTags) has no GOP cache here at all: a late
 *   joiner gets those tags after NMS's replay of the header, metadata and sequence headers. flv-out holds the
 *   GOP's frames anyway (as the bus's AccessUnits); caching their FLV tags as well doubled the Buffer memory
 *   that lives for a GOP, which at hundreds of streams drove a V8 mark-compact every half second;
 * - a publisher's end finishes the publish at once (no 30 s grace holding a stale GOP);
 * - broadcasts live in this bridge, not in NMS's global Context, so bridges do not share streams;
 * - NMS's logger is routed to our pino logger.
 */
import * as http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer } from 'ws';
import BroadcastServer = require('node-media-server/src/server/broadcast_server.js');
import BaseSession = require('node-media-server/src/session/base_session.js');
import NmsFlv = require('node-media-server/src/protocol/flv.js');
import nmsLogger = require('node-media-server/src/core/logger.js');
import { serializeTag } from '../plugin-sdk/formats/flv';
import { FLV_MAX_GOP_TAGS, type FlvPublisher, type FlvPublishOptions, type FlvServer, type FlvTag, type PlayAttempt } from '../plugin-sdk/flv-server';

/** NMS's AMF0 reader (CommonJS; only this call is used, so it is typed here) */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const nmsAmf = require('node-media-server/src/protocol/amf.js') as {
  decodeAmf0Data(data: Buffer): { cmd?: unknown; dataObj?: unknown };
};

export type { PlayAttempt };

export interface NmsBridgeOptions {
  host: string;
  port: number;
  /** NMS is given no path of its own: nothing is written, here or anywhere */
  dataDir: string;
  logger: Logger;
  /** default 2 MiB: past it a player skips to the next keyframe; past 4x (backlog plus missed media) it is dropped */
  maxPlayerBacklogBytes?: number;
  /** default 8 MiB per stream: a longer GOP is not cached and late joiners wait for the next keyframe */
  maxGopCacheBytes?: number;
}

export interface BridgePublisher extends FlvPublisher {
  /** sequence headers (AVC/HEVC/AAC) and onMetaData are recognised and cached for late joiners */
  sendTag(tag: FlvTag): void;
  end(): void;
}

export interface PlayerStats {
  id: string;
  app: string;
  stream: string;
  protocol: PlayAttempt['protocol'];
  remote: string;
  bytesOut: number;
  /** bytes written but not yet taken by the peer (our user-space socket buffers) */
  backlogBytes: number;
  peakBacklogBytes: number;
  /** times the player fell behind and was moved to the next keyframe */
  skips: number;
  waitingForKeyframe: boolean;
}

const DEFAULT_MAX_BACKLOG = 2 * 1024 * 1024;
const DEFAULT_MAX_GOP = 8 * 1024 * 1024;
/** a player still not gone this long after we ended it (peer not reading) is destroyed */
const END_GRACE_MS = 5000;
const PLAY_PATH = /^\/([A-Za-z0-9_-]{1,64})\/([A-Za-z0-9_.~-]{1,128})\.flv$/;
const WS_UNAUTHORIZED = 4401;
const WS_BINARY = { binary: true } as const;
const CRLF = Buffer.from('\r\n', 'latin1');
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/** The chunked-encoding size line ("<hex>\r\n") in front of an n-byte chunk: one per tag, shared by its HTTP players. */
function chunkSizeLine(n: number): Buffer {
  let digits = 1;
  for (let v = n >>> 4; v > 0; v >>>= 4) digits++;
  const line = Buffer.allocUnsafe(digits + 2);
  for (let i = digits - 1, v = n; i >= 0; i--, v >>>= 4) line[i] = HEX_DIGITS[v & 15];
  line[digits] = 13;
  line[digits + 1] = 10;
  return line;
}

// ---------------------------------------------------------------------------------------------------------------
// NMS's logger is a process-wide singleton that prints with console.log; route it to the newest bridge's logger.

const logSinks: Logger[] = [];
let loggerRouted = false;

function routeNmsLogger(): void {
  if (loggerRouted) return;
  loggerRouted = true;
  nmsLogger.level = 'trace';
  nmsLogger.log = (message: unknown, level = 'info') => {
    const sink = logSinks[logSinks.length - 1];
    if (!sink) return;
    const text = String(message);
    if (level === 'error') sink.warn({ nms: true }, text);
    else if (level === 'warn') sink.info({ nms: true }, text);
    else if (level === 'trace') sink.trace({ nms: true }, text);
    else sink.debug({ nms: true }, text);
  };
}

// ---------------------------------------------------------------------------------------------------------------

/** How a player treats one NMS message (the 13-byte file header or a whole tag with its header and trailer). */
const enum Kind { Config, Key, Frame, Audio }

function classify(msg: Buffer): Kind {
  const type = msg[0];
  if (type === 0x46 /* 'F': file header */ || type === 18 || msg.length < 13) return Kind.Config;
  const b0 = msg[11];
  if (type === 8) {
    const fmt = b0 >> 4;
    if ((fmt === 10 && msg[12] === 0) || (fmt === 9 && (b0 & 0x0f) === 0)) return Kind.Config;
    return Kind.Audio;
  }
  const frameType = (b0 >> 4) & 0x07;
  if (b0 & 0x80) {
    const packetType = b0 & 0x0f;
    if (packetType !== 1 && packetType !== 3) return Kind.Config; // SequenceStart/End, Metadata
  } else {
    const codec = b0 & 0x0f;
    if ((codec === 7 || codec === 12) && msg[12] !== 1) return Kind.Config; // AVC sequence header / end
  }
  if (frameType === 5) return Kind.Config;
  return frameType === 1 ? Kind.Key : Kind.Frame;
}

interface StreamEntry {
  key: string;
  app: string;
  stream: string;
  broadcast: BroadcastServer;
  publisher?: PublisherImpl;
  players: Map<string, Player>;
  /**
   * Players past their join (NMS's subscribers), in the order they joined: what a tag is fanned out to.
   * Replaced, never changed in place, so a player leaving during a fan-out does not disturb it.
   */
  live: Player[];
  /** whether audio must wait for a video keyframe before a player starts */
  hasVideo: boolean;
  gopBytes: number;
  /** tags of the current publish so far */
  tagsIn: number;
  /** latest timestamp sent, so a later publisher continues the timeline of players that stay */
  lastTs: number;
  published: boolean;
}

type Transport =
  | { kind: 'http'; res: http.ServerResponse }
  | { kind: 'ws'; ws: WebSocket };

class Player extends BaseSession {
  waiting = true;
  /** NMS is replaying the cached headers and GOP to this player */
  joining = true;
  headerPending = false;
  /** media skipped while the peer had unread data: with the backlog, what decides a drop */
  owed = 0;
  skips = 0;
  peakBacklog = 0;
  closing = false;
  gone = false;
  /** its socket is corked until the bridge's end-of-tick uncork */
  corked = false;
  endTimer?: NodeJS.Timeout;
  /**
   * The connection's socket: corked per tick for every player, and written to directly by HTTP players
   * (null when the response has no socket yet, e.g. a pipelined request: those go through res.write).
   */
  private readonly sock: Socket | null;
  /** HTTP/1.1 chunked response whose chunk framing we write ourselves (HTTP/1.0 gets the bare stream) */
  readonly chunked: boolean;

  constructor(
    private readonly bridge: NmsBridge,
    readonly entry: StreamEntry,
    readonly attempt: PlayAttempt,
    readonly transport: Transport,
  ) {
    super();
    this.protocol = 'flv';
    this.ip = attempt.remote;
    this.streamApp = entry.app;
    this.streamName = entry.stream;
    this.streamPath = entry.broadcast.streamPath;
    this.streamQuery = attempt.query;
    if (transport.kind === 'http') {
      // attach runs after flushHeaders: a response that owns its socket has written its headers to it already,
      // so our bytes can follow on the socket itself
      this.sock = transport.res.socket ?? null;
      this.chunked = this.sock !== null && transport.res.chunkedEncoding;
    } else {
      this.sock = (transport.ws as unknown as { _socket?: Socket })._socket ?? null;
      this.chunked = false;
    }
  }

  backlog(): number {
    const t = this.transport;
    if (t.kind === 'ws') return t.ws.bufferedAmount;
    return this.sock !== null ? this.sock.writableLength : t.res.writableLength;
  }

  /** NMS's replay of the header and caches to a joining player. */
  override sendBuffer = (msg: Buffer): void => {
    this.deliver(msg, classify(msg), null);
  };

  /** One message (the file header or a framed tag) for this player; `sizeLine` is its shared chunk size line. */
  deliver(msg: Buffer, kind: Kind, sizeLine: Buffer | null): void {
    if (this.closing) return;
    if (msg[0] === 0x46 /* 'F' */) {
      // NMS's header always says audio+video; before the publisher has said what it carries, hold it back
      if (this.entry.tagsIn === 0) { this.headerPending = true; return; }
    } else if (this.headerPending) {
      this.headerPending = false;
      this.write(this.entry.broadcast.flvHeader, null);
    }
    const backlog = this.backlog();
    if (backlog === 0) this.owed = 0;
    if (kind !== Kind.Config) {
      const cap = this.bridge.maxBacklog;
      const resumePoint = kind === Kind.Key || (kind === Kind.Audio && !this.entry.hasVideo);
      if (this.waiting) {
        if (!resumePoint || backlog > cap) { this.skip(msg.length, backlog); return; }
        this.waiting = false;
      } else if (backlog > 0 && backlog + msg.length > cap) {
        this.waiting = true;
        this.skips++;
        this.skip(msg.length, backlog);
        return;
      }
    }
    this.write(msg, sizeLine);
  }

  private skip(bytes: number, backlog: number): void {
    // Skipping the rest of a cached GOP while joining is catching up, not falling behind.
    if (backlog === 0 || this.joining) return;
    this.owed += bytes;
    if (backlog + this.owed > 4 * this.bridge.maxBacklog) {
      this.bridge.log.info({ player: this.id, stream: this.entry.key, backlog, owed: this.owed }, 'dropping a player that stopped reading');
      this.drop();
    }
  }

  private write(msg: Buffer, sizeLine: Buffer | null): void {
    const t = this.transport;
    const s = this.sock;
    if (t.kind === 'http') {
      if (s === null) {
        if (t.res.writableEnded || t.res.destroyed) return;
        t.res.write(msg);
      } else {
        if (!s.writable) return;
        this.cork(s);
        if (this.chunked) {
          s.write(sizeLine ?? chunkSizeLine(msg.length));
          s.write(msg);
          s.write(CRLF);
        } else {
          s.write(msg);
        }
      }
    } else {
      if (t.ws.readyState !== WebSocket.OPEN) return;
      if (s !== null) this.cork(s);
      t.ws.send(msg, WS_BINARY);
    }
    this.outBytes += msg.length;
    this.bridge.bytesOut += msg.length;
    const backlog = this.backlog();
    if (backlog > this.peakBacklog) this.peakBacklog = backlog;
  }

  /** Holds this tick's writes in the socket's buffer, to leave in one writev when the bridge uncorks. */
  private cork(s: Socket): void {
    if (this.corked) return;
    this.corked = true;
    s.cork();
    this.bridge.uncorkAtTickEnd(this);
  }

  uncork(): void {
    this.corked = false;
    // (after res.end(), node has fully uncorked the socket already; uncorking again does nothing)
    this.sock?.uncork();
  }

  /** NMS's close: end gracefully, destroy if the peer does not take the rest in time. */
  override close = (): void => {
    if (this.closing) return;
    this.closing = true;
    this.bridge.detach(this);
    const t = this.transport;
    if (t.kind === 'http') t.res.end();
    else t.ws.close(1000, 'stream closed');
    this.endTimer = setTimeout(() => this.drop(), END_GRACE_MS);
    this.endTimer.unref();
  };

  drop(): void {
    this.closing = true;
    this.bridge.detach(this);
    const t = this.transport;
    if (t.kind === 'http') t.res.destroy();
    else t.ws.terminate();
  }

  stats(): PlayerStats {
    return {
      id: this.id, app: this.entry.app, stream: this.entry.stream, protocol: this.attempt.protocol,
      remote: this.attempt.remote, bytesOut: this.outBytes, backlogBytes: this.gone ? 0 : this.backlog(),
      peakBacklogBytes: this.peakBacklog, skips: this.skips, waitingForKeyframe: this.waiting,
    };
  }
}

class PublisherImpl implements BridgePublisher {
  readonly session = new BaseSession();
  ended = false;
  private base = -1;

  constructor(
    private readonly bridge: NmsBridge,
    private readonly entry: StreamEntry,
    private readonly continueTimeline: boolean,
    /** makes a late joiner's GOP tags; set, the bridge caches no GOP for this publish */
    readonly joinTags?: () => FlvTag[],
  ) {
    // ip '' marks an internal session to NMS: no auth check, no play counting against it
    this.session.ip = '';
    this.session.isPublisher = true;
    this.session.protocol = 'flv';
    this.session.streamApp = entry.app;
    this.session.streamName = entry.stream;
    this.session.streamPath = entry.broadcast.streamPath;
  }

  sendTag(tag: FlvTag): void {
    if (this.ended) return; // a publisher replaced or ended while its source was still delivering
    const { type, body } = tag;
    if (type !== 8 && type !== 9 && type !== 18) throw new TypeError(`FLV tag type ${String(type)} is not 8, 9 or 18`);
    if (!Buffer.isBuffer(body)) throw new TypeError('FLV tag body must be a Buffer');
    // NMS reads the AVC header (5 bytes), the Enhanced header with its FourCC (5) of every video tag, and the
    // composition time after it (8) of Enhanced CodedFrames
    const min = type === 9 ? ((body[0] & 0x80) !== 0 && (body[0] & 0x0f) === 1 ? 8 : 5) : 1;
    if (body.length < min) throw new TypeError(`FLV ${type === 9 ? 'video' : type === 8 ? 'audio' : 'script'} tag body of ${body.length} bytes is too short`);
    if (body.length > 0xffffff) throw new TypeError(`FLV tag body of ${body.length} bytes exceeds 16 MiB`);
    if (!Number.isFinite(tag.timestamp) || tag.timestamp < 0) throw new TypeError(`FLV tag timestamp ${tag.timestamp} is not a non-negative number`);
    const entry = this.entry;
    let isMeta = false;
    if (type === 9) {
      entry.hasVideo = true;
    } else if (type === 18) {
      const meta = this.readMeta(body);
      if (meta === undefined) return; // NMS's AMF reader could not read it: the tag is skipped, the stream goes on
      isMeta = meta;
    }
    if (this.base < 0) {
      // Players that stayed through a previous publish get one continuous timeline.
      this.base = this.continueTimeline ? Math.max(0, entry.lastTs + 1 - Math.round(tag.timestamp)) : 0;
    }
    const ts = this.timeOf(tag);
    entry.tagsIn++;
    const flags = NmsFlv.parserTag(type, ts, body.length, body).flags;
    this.bridge.fanOut(entry, this.frame(tag, ts), flags, isMeta);
    if (ts > entry.lastTs) entry.lastTs = ts;
  }

  /** A tag's timestamp on the players' timeline. */
  private timeOf(tag: FlvTag): number {
    // script tags keep their own timestamp: ffmpeg reads onMetaData only at 0 (else as subtitle data)
    return (Math.round(tag.timestamp) + (tag.type === 18 ? 0 : this.base)) >>> 0;
  }

  /** Framed once, in the room FlvMuxer left around the body (other bodies are copied once): all players share it. */
  private frame(tag: FlvTag, ts: number): Buffer {
    return serializeTag(ts === tag.timestamp ? tag : { type: tag.type, timestamp: ts, body: tag.body, keyframe: tag.keyframe });
  }

  /**
   * The GOP part of a late joiner's start, from joinTags instead of a cache: its media tags on this publish's
   * timeline, to this player only, while it is still joining (it gets no live tag before they are written).
   */
  sendJoinTags(player: Player): void {
    if (!this.joinTags || this.ended || this.base < 0) return;
    let tags: FlvTag[];
    try {
      tags = this.joinTags();
    } catch (err) {
      this.bridge.log.error({ err, stream: this.entry.key }, 'joinTags threw; the player starts at the next keyframe');
      return;
    }
    for (const tag of tags) {
      if (tag.type !== 8 && tag.type !== 9) continue; // onMetaData went first, from NMS's cache
      const msg = this.frame(tag, this.timeOf(tag));
      const kind = classify(msg);
      // so did the sequence headers: the latest ones sent live, which are what these tags decode with
      if (kind !== Kind.Config) player.deliver(msg, kind, null);
    }
  }

  /** Reads a script tag with NMS's AMF0 reader: whether it is onMetaData, undefined when it cannot be read. */
  private readMeta(body: Buffer): boolean | undefined {
    let data: { cmd?: unknown; dataObj?: unknown };
    try {
      data = nmsAmf.decodeAmf0Data(body);
    } catch (err) {
      this.bridge.log.warn({ stream: this.entry.key, type: 18, err: (err as Error).message }, 'node-media-server could not read a script tag');
      return undefined;
    }
    const obj = data.dataObj;
    if ((data.cmd !== 'onMetaData' && data.cmd !== '@setDataFrame') || obj === null || typeof obj !== 'object') return false;
    const m = obj as Record<string, unknown>;
    const entry = this.entry;
    // onMetaData says which tracks exist: the FLV header players get should say the same
    // (flv.js and mpegts.js wait for an audio track the header announces)
    const hasAudio = m.audiocodecid !== undefined;
    const hasVideo = m.videocodecid !== undefined;
    if (hasAudio || hasVideo) {
      entry.broadcast.flvHeader = NmsFlv.createHeader(hasAudio, hasVideo || entry.hasVideo);
      if (hasVideo) entry.hasVideo = true;
    }
    // what NMS's broadcastMessage would have recorded on the publisher session
    const s = this.session;
    const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    s.audioCodec = num(m.audiocodecid);
    s.audioChannels = m.stereo ? 2 : 1;
    s.audioSamplerate = num(m.audiosamplerate);
    s.videoCodec = num(m.videocodecid);
    s.videoWidth = num(m.width);
    s.videoHeight = num(m.height);
    s.videoFramerate = num(m.framerate);
    return true;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.bridge.endPublish(this.entry, this);
  }
}

export class NmsBridge implements FlvServer {
  readonly log: Logger;
  readonly maxBacklog: number;
  readonly maxGop: number;
  bytesOut = 0;
  private readonly server: http.Server;
  private readonly wss: WebSocketServer;
  private readonly sockets = new Set<Socket>();
  private readonly streams = new Map<string, StreamEntry>();
  private readonly startCbs: Array<(p: PlayAttempt, id: string) => void> = [];
  private readonly stopCbs: Array<(p: PlayAttempt, id: string) => void> = [];
  private authorizer?: (p: PlayAttempt) => boolean;
  private stopped = false;
  private boundPort = 0;
  /** players whose sockets were corked this tick; uncorked together once the tick's writes are done */
  private corked: Player[] = [];
  private uncorking: Player[] = [];
  private uncorkQueued = false;

  private constructor(private readonly opts: NmsBridgeOptions) {
    this.log = opts.logger;
    this.maxBacklog = opts.maxPlayerBacklogBytes ?? DEFAULT_MAX_BACKLOG;
    this.maxGop = opts.maxGopCacheBytes ?? DEFAULT_MAX_GOP;
    if (!(this.maxBacklog > 0) || !(this.maxGop >= 0)) throw new RangeError('maxPlayerBacklogBytes must be > 0 and maxGopCacheBytes >= 0');
    this.server = http.createServer((req, res) => this.onRequest(req, res));
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    this.server.on('upgrade', (req, socket, head) => this.onUpgrade(req, socket, head));
    // ws must not pick a subprotocol: NMS-style "post"/"publisher" would mean publishing
    this.wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 64 * 1024, handleProtocols: () => false });
  }

  /** Listens on host:port; rejects (err.code EADDRINUSE etc.) instead of exiting the process. */
  static async start(opts: NmsBridgeOptions): Promise<NmsBridge> {
    routeNmsLogger();
    const bridge = new NmsBridge(opts);
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        const e = new Error(err.code === 'EADDRINUSE'
          ? `FLV server: port ${opts.port} on ${opts.host} is already in use`
          : `FLV server could not listen on ${opts.host}:${opts.port}: ${err.message}`) as NodeJS.ErrnoException;
        e.code = err.code;
        reject(e);
      };
      bridge.server.once('error', onError);
      bridge.server.listen(opts.port, opts.host, () => {
        bridge.server.off('error', onError);
        resolve();
      });
    });
    bridge.server.on('error', (err) => bridge.log.error({ err }, 'FLV server error'));
    const addr = bridge.server.address();
    bridge.boundPort = typeof addr === 'object' && addr ? addr.port : opts.port;
    logSinks.push(bridge.log);
    bridge.log.info({ host: opts.host, port: bridge.boundPort }, 'FLV server (node-media-server) listening');
    return bridge;
  }

  get port(): number {
    return this.boundPort;
  }

  setPlayAuthorizer(fn: (p: PlayAttempt) => boolean): void {
    this.authorizer = fn;
  }

  onPlayer(ev: 'start' | 'stop', cb: (p: PlayAttempt, playerId: string) => void): void {
    (ev === 'start' ? this.startCbs : this.stopCbs).push(cb);
  }

  /** Starts publishing a stream; a second publish on the same stream replaces the first (source reconnect). */
  publish(app: string, stream: string, opts: FlvPublishOptions = {}): BridgePublisher {
    if (this.stopped) throw new Error('FLV server is stopped');
    if (!PLAY_PATH.test(`/${app}/${stream}.flv`)) throw new TypeError(`bad FLV stream name ${app}/${stream}`);
    // ending the old publisher may drop an entry without players, so look the entry up after it
    this.streams.get(`${app}/${stream}`)?.publisher?.end();
    const entry = this.entryFor(app, stream);
    const continueTimeline = entry.published && entry.players.size > 0;
    const pub = new PublisherImpl(this, entry, continueTimeline, opts.joinTags);
    const err = entry.broadcast.postPublish(pub.session);
    if (err !== null) throw new Error(`node-media-server refused to publish ${entry.key}: ${err}`);
    entry.publisher = pub;
    entry.published = true;
    entry.hasVideo = false;
    entry.gopBytes = 0;
    entry.tagsIn = 0;
    for (const p of entry.players.values()) p.waiting = true;
    return pub;
  }

  /** Ends a stream's players, or only those the filter picks (e.g. one request's). */
  closePlayers(app: string, stream: string, filter?: (p: PlayAttempt) => boolean): void {
    const entry = this.streams.get(`${app}/${stream}`);
    if (!entry) return;
    for (const p of [...entry.players.values()]) {
      let pick = true;
      if (filter) {
        try {
          pick = filter(p.attempt);
        } catch (err) {
          this.log.error({ err }, 'closePlayers filter threw; leaving the player open');
          pick = false;
        }
      }
      if (pick) p.close();
    }
  }

  stats(): { players: number; streams: number; bytesOut: number } {
    let players = 0;
    let streams = 0;
    for (const e of this.streams.values()) {
      players += e.players.size;
      if (e.publisher) streams++;
    }
    return { players, streams, bytesOut: this.bytesOut };
  }

  playerStats(): PlayerStats[] {
    const out: PlayerStats[] = [];
    for (const e of this.streams.values()) for (const p of e.players.values()) out.push(p.stats());
    return out;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const e of [...this.streams.values()]) {
      e.publisher?.end();
      for (const p of [...e.players.values()]) p.drop();
    }
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
    this.server.closeAllConnections();
    for (const s of this.sockets) s.destroy();
    await closed;
    this.streams.clear();
    const i = logSinks.lastIndexOf(this.log);
    if (i >= 0) logSinks.splice(i, 1);
  }

  // --- called by publishers and players -------------------------------------------------------------------------

  /**
   * What NMS's broadcastMessage did, without its copies: caches the framed tag (by reference) where NMS's flags
   * put it, then hands the same Buffer to every player of the stream.
   */
  fanOut(entry: StreamEntry, msg: Buffer, flags: number, isMeta: boolean): void {
    const kind = classify(msg);
    const b = entry.broadcast;
    switch (flags) {
      case 0: // AAC / Enhanced audio sequence header (NMS also leaves 0 on video it does not know: not a header)
        if (msg[0] === 8) b.flvAudioHeader = msg;
        break;
      case 2:
        b.flvVideoHeader = msg;
        break;
      case 5: // any script tag to NMS; only onMetaData is what a late joiner needs first
        if (isMeta) b.flvMetaData = msg;
        break;
      case 3: // a keyframe starts the cache over (an AVC end-of-sequence that NMS also calls a keyframe does not)
        if (kind !== Kind.Key || entry.publisher?.joinTags) break; // (no cache: it stays null, see endPublish)
        if (b.flvGopCache === null) b.flvGopCache = new Set();
        else b.flvGopCache.clear();
        b.flvGopCache.add(msg);
        entry.gopBytes = msg.length;
        break;
      case 1:
      case 4:
        if (kind === Kind.Config || b.flvGopCache === null) break;
        b.flvGopCache.add(msg);
        entry.gopBytes += msg.length;
        break;
    }
    if (b.flvGopCache !== null && (entry.gopBytes > this.maxGop || b.flvGopCache.size > FLV_MAX_GOP_TAGS)) {
      // dropped until the next keyframe starts a new one: meanwhile late joiners wait for that keyframe
      b.flvGopCache.clear();
      b.flvGopCache = null;
      this.log.debug({ stream: entry.key, bytes: entry.gopBytes }, 'GOP over the cache limit, not cached');
    }
    const live = entry.live;
    let sizeLine: Buffer | null = null;
    for (let i = 0; i < live.length; i++) {
      const p = live[i];
      if (p.chunked && sizeLine === null) sizeLine = chunkSizeLine(msg.length);
      p.deliver(msg, kind, sizeLine);
    }
  }

  uncorkAtTickEnd(p: Player): void {
    this.corked.push(p);
    if (this.uncorkQueued) return;
    this.uncorkQueued = true;
    process.nextTick(this.uncorkAll);
  }

  private readonly uncorkAll = (): void => {
    this.uncorkQueued = false;
    // swapped, so players corked while these uncork (a write callback writing again) wait for the next round
    const list = this.corked;
    this.corked = this.uncorking;
    this.uncorking = list;
    for (let i = 0; i < list.length; i++) list[i].uncork();
    list.length = 0;
  };

  endPublish(entry: StreamEntry, pub: PublisherImpl): void {
    if (entry.publisher !== pub) return;
    entry.publisher = undefined;
    // NMS's donePublish would keep the stale GOP for a 30 s reconnect grace; finish the publish now.
    entry.broadcast._finishPublish();
    // (NMS leaves an empty cache behind: the next publish's audio would go into it before its first keyframe)
    entry.broadcast.flvGopCache = null;
    entry.gopBytes = 0;
    this.dropIfEmpty(entry);
  }

  /** Unsubscribes a player from its broadcast (idempotent); 'stop' fires when its connection is gone. */
  detach(p: Player): void {
    const entry = p.entry;
    if (entry.players.get(p.id) !== p) return;
    entry.players.delete(p.id);
    if (entry.live.includes(p)) entry.live = entry.live.filter((q) => q !== p);
    entry.broadcast.donePlay(p);
    this.dropIfEmpty(entry);
  }

  // --- internals ------------------------------------------------------------------------------------------------

  private entryFor(app: string, stream: string): StreamEntry {
    const key = `${app}/${stream}`;
    let e = this.streams.get(key);
    if (!e) {
      e = {
        key, app, stream, broadcast: new BroadcastServer(`/${key}`), players: new Map(), live: [],
        hasVideo: false, gopBytes: 0, tagsIn: 0, lastTs: 0, published: false,
      };
      this.streams.set(key, e);
    }
    return e;
  }

  private dropIfEmpty(entry: StreamEntry): void {
    if (!entry.publisher && entry.players.size === 0 && this.streams.get(entry.key) === entry) this.streams.delete(entry.key);
  }

  /** Parses and authorises a play URL; returns the attempt, or an HTTP status to refuse with. */
  private attemptFor(req: http.IncomingMessage, protocol: PlayAttempt['protocol']): PlayAttempt | 404 | 401 {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://flv.invalid');
    } catch {
      return 404;
    }
    let m: RegExpExecArray | null;
    let app: string, stream: string;
    try {
      m = PLAY_PATH.exec(decodeURIComponent(url.pathname));
      if (!m) return 404;
      [, app, stream] = m;
    } catch {
      return 404;
    }
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) if (!(k in query)) query[k] = v;
    const attempt: PlayAttempt = { app, stream, query, remote: `${req.socket.remoteAddress}:${req.socket.remotePort}`, protocol };
    let allowed = false;
    if (!this.authorizer) {
      this.log.warn({ app, stream }, 'play refused: no play authorizer is set');
    } else {
      try {
        allowed = this.authorizer(attempt) === true;
      } catch (err) {
        this.log.error({ err, app, stream }, 'play authorizer threw; refusing the play');
      }
    }
    return allowed ? attempt : 401;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    req.resume(); // a player's request body means nothing to us
    res.setHeader('Access-Control-Allow-Origin', '*');
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { 'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS', 'Access-Control-Max-Age': '86400' });
      res.end();
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD, OPTIONS', 'Content-Type': 'text/plain' });
      res.end('method not allowed\n');
      return;
    }
    const attempt = this.attemptFor(req, 'http-flv');
    if (attempt === 404 || attempt === 401) {
      res.writeHead(attempt, { 'Content-Type': 'text/plain' });
      res.end(attempt === 404 ? 'not found\n' : 'unauthorized\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'video/x-flv', 'Cache-Control': 'no-cache, no-store', Connection: 'keep-alive' });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    res.socket?.setNoDelay(true);
    // the player learns it is accepted now, even while the stream has no publisher yet
    res.flushHeaders();
    this.attach(attempt, { kind: 'http', res }, (onGone) => res.once('close', onGone));
  }

  private onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const refuse = (status: number, text: string): void => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      socket.destroy();
    };
    if (this.stopped) return refuse(503, 'Service Unavailable');
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return refuse(400, 'Bad Request');
    const attempt = this.attemptFor(req, 'ws-flv');
    // Only FLV play paths are WebSockets here; anything else is not ours to take.
    if (attempt === 404) return refuse(404, 'Not Found');
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      if (attempt === 401) {
        ws.close(WS_UNAUTHORIZED, 'unauthorized');
        return;
      }
      ws.on('error', (err) => this.log.debug({ err: err.message }, 'WS-FLV player socket error'));
      // a player has nothing to say; what it sends is ignored (and capped by maxPayload)
      ws.on('message', () => undefined);
      (ws as unknown as { _socket?: Socket })._socket?.setNoDelay(true);
      this.attach(attempt, { kind: 'ws', ws }, (onGone) => ws.once('close', onGone));
    });
  }

  private attach(attempt: PlayAttempt, transport: Transport, whenGone: (cb: () => void) => void): void {
    const entry = this.entryFor(attempt.app, attempt.stream);
    const player = new Player(this, entry, attempt, transport);
    entry.players.set(player.id, player);
    let started = false;
    whenGone(() => {
      player.gone = true;
      if (player.endTimer) clearTimeout(player.endTimer);
      this.detach(player);
      if (started) for (const cb of this.stopCbs) this.callback(cb, attempt, player.id);
    });
    if (transport.kind === 'http') transport.res.on('error', (err) => this.log.debug({ err: err.message }, 'HTTP-FLV player socket error'));
    // NMS sends the FLV header, cached metadata, sequence headers and GOP, then subscribes the player
    const err = entry.broadcast.postPlay(player);
    if (err === null && !player.closing) entry.publisher?.sendJoinTags(player);
    player.joining = false;
    if (player.closing) {
      // gone during the replay: NMS subscribed it after our detach
      entry.broadcast.subscribers.delete(player.id);
      return;
    }
    if (err !== null) {
      this.log.warn({ stream: entry.key, err }, 'node-media-server refused a play');
      player.drop();
      return;
    }
    entry.live = [...entry.live, player];
    started = true;
    for (const cb of this.startCbs) this.callback(cb, attempt, player.id);
  }

  private callback(cb: (p: PlayAttempt, id: string) => void, p: PlayAttempt, id: string): void {
    try {
      cb(p, id);
    } catch (err) {
      this.log.error({ err }, 'FLV player listener threw');
    }
  }
}
