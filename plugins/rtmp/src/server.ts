/**
 * The RTMP server on the plugin's port: who may play and who may publish, and what each becomes.
 *
 * - Play `rtmp://host:port/live/{stream}?reqId=…&token=…`: served only for an open request of that stream with its
 *   token (as the FLV play URL); the player is a bus reader of the stream's RTMP form.
 * - Publish `rtmp://host:port/push/{simNo}_{chanId}?key=…`: the key names an application (publishKeys); the
 *   encoder's stream becomes the live virtual channel (simNo, chanId) of that application, which opens address like
 *   a terminal's channel. A second publish of the same channel by the same application takes it over (an encoder
 *   that reconnects before its old connection timed out); another application's is refused.
 * Refusals are told to the client (onStatus error) and logged, at most one line per address per 10 s.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import {
  channelKey,
  LogLimiter,
  normaliseSim,
  SIM_PATTERN,
  streamKey,
  type MediaStream,
  type Net,
  type RequestLog,
  type Sessions,
  type ReaderOptions,
} from '../../../plugin-sdk';
import type { RtmpConfig } from './config';
import { RtmpConnection, type ConnectionHost } from './connection';
import { BadMedia, FlvUnits } from './flv-units';
import { RtmpPlayer, type RtmpPlayerStats } from './player';
import { PublishedChannel } from './published';
import type { RtmpFormats, RtmpFrame } from './rtmp-format';
import type { PlayOrPublish } from './rtmp-peer';

export const PLAY_APP = 'live';
export const PUBLISH_APP = 'push';
const STREAM_NAME = /^[A-Za-z0-9_.~-]{1,128}$/;
const PUBLISH_NAME = /^([0-9A-Za-z.~-]{1,20})_(\d{1,3})(?:_1)?$/;

export interface RtmpServerOptions {
  log: Logger;
  requestLog: RequestLog;
  sessions: Sessions;
  /** with workers: a connection goes to the worker of its stream once it says which (route 'late') */
  net: Pick<Net, 'routeLate' | 'replayOf' | 'hold'>;
  config: RtmpConfig;
  formats: RtmpFormats;
  now: () => number;
  /** how a request's players read its stream: which tracks, and through which stage (AAC audio) */
  readFor(reqId: string): Pick<ReaderOptions<RtmpFrame>, 'media' | 'via'>;
  counts: { refused(what: 'play' | 'publish'): void; dropped(): void; bytesIn(n: number): void; bytesOut(n: number): void; badMedia(): void; moved(): void };
}

interface Publishing {
  conn: RtmpConnection;
  channel: PublishedChannel;
  units: FlvUnits;
  /** this worker owns the channel's terminal while it publishes (opens of it are routed here) */
  release: () => void;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export class RtmpServer implements ConnectionHost {
  private readonly conns = new Set<RtmpConnection>();
  private readonly players = new Map<RtmpConnection, RtmpPlayer>();
  /** by bus stream name */
  private readonly published = new Map<string, Publishing>();
  private readonly byConn = new Map<RtmpConnection, Publishing>();
  private readonly keys: Array<{ appId: string; digest: Buffer }>;
  private readonly refusals = new LogLimiter();
  private nextId = 1;
  private stopped = false;
  private idleTimer: NodeJS.Timeout;

  constructor(private readonly o: RtmpServerOptions) {
    this.keys = o.config.publishKeys.map((k) => ({ appId: k.appId, digest: digest(k.key) }));
    this.idleTimer = setInterval(() => this.dropIdlePublishers(), 1000);
    this.idleTimer.unref();
  }

  get playerCount(): number {
    return this.players.size;
  }

  get publisherCount(): number {
    return this.published.size;
  }

  onConnection(socket: Socket): void {
    if (this.stopped) {
      socket.destroy();
      return;
    }
    const c = new RtmpConnection(String(this.nextId++), socket, this, this.o.config.maxMessageBytes, this.o.config.handshakeTimeoutSec * 1000);
    this.conns.add(c);
  }

  /** the channel a request's open may be fed by: its publisher's application, if one publishes it */
  publisherApp(streamName: string): string | undefined {
    return this.published.get(streamName)?.channel.appId;
  }

  /** a stream the sessions opened: fed at once if its channel is published (by the application of its requests) */
  streamOpened(name: string, media: MediaStream, appIds: string[]): void {
    const p = this.published.get(name);
    if (p && appIds.every((a) => a === p.channel.appId)) p.channel.attach(media);
  }

  closeRequest(reqId: string): void {
    for (const [c, p] of this.players) if (p.reqId === reqId) c.socket.end();
  }

  playerStats(): RtmpPlayerStats[] {
    return [...this.players.values()].map((p) => p.stats());
  }

  publisherStats(): Array<{ stream: string; appId: string; remote: string; units: number; bytes: number; feeding: boolean }> {
    return [...this.published.values()].map(({ channel: ch }) => ({
      stream: ch.name,
      appId: ch.appId,
      remote: ch.remote,
      units: ch.units,
      bytes: ch.bytes,
      feeding: ch.feeding !== undefined,
    }));
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.idleTimer);
    for (const c of [...this.conns]) c.socket.destroy();
  }

  // --- ConnectionHost ---------------------------------------------------------------------------------------------

  replayOf(socket: Socket): Buffer | undefined {
    return this.o.net.replayOf(socket);
  }

  moved(c: RtmpConnection, key: string, replay: Buffer): boolean {
    if (this.o.net.routeLate(c.socket, key, replay) !== 'moved') return false;
    this.o.counts.moved();
    return true;
  }

  play(c: RtmpConnection, p: PlayOrPublish): void {
    const reqId = p.query.get('reqId') ?? '';
    if (p.app !== PLAY_APP || !STREAM_NAME.test(p.name))
      return this.refuse(c, 'play', 'NetStream.Play.StreamNotFound', `no stream ${p.app}/${p.name}`, { app: p.app, stream: p.name });
    const key = streamKey(p.name);
    if (key !== undefined) c.moveIfElsewhere(key);
    const req = this.o.sessions.authorizePlay(p.name, reqId, p.query.get('token') ?? '');
    if (!req) return this.refuse(c, 'play', 'NetStream.Play.Failed', 'unknown request or wrong token', { stream: p.name, reqId });
    const media = this.o.sessions.getStreamByName(p.name)?.media;
    const video = media?.tracks.find((t) => t.kind === 'video');
    if (video?.codec === 'h265' && !c.enhanced) {
      return this.refuse(c, 'play', 'NetStream.Play.Failed', 'H.265 over RTMP needs an Enhanced RTMP client (fourCcList hvc1)', { stream: p.name, reqId });
    }
    const handle = this.o.sessions.attachPlayer(reqId, { protocol: 'rtmp', remote: c.remote });
    if (!handle || !media || media.closed) {
      handle?.close();
      return this.refuse(c, 'play', 'NetStream.Play.Failed', 'the request closed', { stream: p.name, reqId });
    }
    c.accept('play');
    const player = new RtmpPlayer(
      c.id,
      p.name,
      reqId,
      c.remote,
      c.socket,
      c.account,
      this.o.config.socketHighWaterBytes,
      handle,
      (n) => this.o.counts.bytesOut(n),
      (reason) => {
        if (reason.startsWith('reader stuck')) c.drop(reason);
        else c.socket.end();
      },
    );
    this.players.set(c, player);
    try {
      const read = this.o.readFor(reqId);
      player.sub = media.subscribe(player, { format: this.o.formats[read.media ?? 'av'], maxQueueBytes: this.o.config.maxPlayerBacklogBytes, ...read });
    } catch (err) {
      this.o.log.warn({ stream: p.name, err: (err as Error).message }, 'RTMP player could not subscribe to its stream');
      c.socket.end();
      return;
    }
    this.o.requestLog({ stream: p.name, reqId, remote: c.remote, protocol: 'rtmp' }, 'player started');
  }

  publish(c: RtmpConnection, p: PlayOrPublish): void {
    const appId = this.appOfKey(p.query.get('key') ?? '');
    if (appId === undefined) return this.refuse(c, 'publish', 'NetStream.Publish.BadName', 'unknown publish key', { app: p.app, name: p.name });
    const m = PUBLISH_NAME.exec(p.name);
    const chanId = m ? Number(m[2]) : 0;
    if (p.app !== PUBLISH_APP || !m || !SIM_PATTERN.test(m[1]) || chanId < 1 || chanId > 255) {
      return this.refuse(c, 'publish', 'NetStream.Publish.BadName', `publish to ${PUBLISH_APP}/{simNo}_{chanId}`, { app: p.app, name: p.name, appId });
    }
    const norm = normaliseSim(m[1]);
    const name = `${norm}_${chanId}_1`;
    c.moveIfElsewhere(channelKey(norm, chanId));
    const old = this.published.get(name);
    if (old && old.channel.appId !== appId)
      return this.refuse(c, 'publish', 'NetStream.Publish.BadName', 'another application publishes this channel', { stream: name, appId });
    const s = this.o.sessions.getStreamByName(name);
    if (s && s.requests.some((r) => r.appId !== appId))
      return this.refuse(c, 'publish', 'NetStream.Publish.BadName', 'another application has this channel open', { stream: name, appId });
    if (old) old.conn.drop('another connection publishes its channel now (the encoder reconnected)');
    c.accept('publish');
    const channel = new PublishedChannel(name, appId, c.remote, this.o.config.maxPublishGopBytes, this.o.log, this.o.now);
    const pub: Publishing = {
      conn: c,
      channel,
      units: new FlvUnits(channel, this.o.config.maxMessageBytes),
      release: this.o.net.hold(channelKey(norm, chanId)),
    };
    channel.lastUnitAt = this.o.now();
    this.published.set(name, pub);
    this.byConn.set(c, pub);
    if (s && s.state !== 'closing') channel.attach(s.media);
    this.o.requestLog({ stream: name, appId, remote: c.remote, protocol: 'rtmp' }, 'RTMP publisher started');
  }

  media(c: RtmpConnection, type: number, ts: number, body: Buffer): void {
    const pub = this.byConn.get(c);
    if (!pub) return;
    try {
      pub.units.message(type, ts, body);
    } catch (err) {
      if (!(err instanceof BadMedia)) throw err;
      this.o.counts.badMedia();
      c.drop(`bad media: ${err.message}`);
    }
  }

  gone(c: RtmpConnection): void {
    this.conns.delete(c);
    const player = this.players.get(c);
    if (player) {
      this.players.delete(c);
      player.close();
      this.o.requestLog(
        { stream: player.stream, reqId: player.reqId, remote: c.remote, bytesOut: player.bytesOut, skips: player.skips, protocol: 'rtmp' },
        'player stopped',
      );
    }
    const pub = this.byConn.get(c);
    if (pub) {
      this.byConn.delete(c);
      if (this.published.get(pub.channel.name) === pub) this.published.delete(pub.channel.name);
      pub.channel.close();
      pub.release();
      this.o.requestLog(
        { stream: pub.channel.name, appId: pub.channel.appId, remote: c.remote, bytesIn: c.bytesIn, units: pub.channel.units },
        'RTMP publisher stopped',
      );
    }
  }

  dropped(c: RtmpConnection, reason: string): void {
    this.o.counts.dropped();
    // one line per address and kind of reason per 10 s (a flood of one kind from one place is one line)
    this.refusals.log(
      this.o.log,
      'warn',
      `${c.socket.remoteAddress ?? ''}|${reason.replace(/\d+/g, '#')}`,
      { remote: c.remote, role: c.role, reason },
      'RTMP connection dropped',
    );
  }

  bytesIn(n: number): void {
    this.o.counts.bytesIn(n);
  }

  // ---------------------------------------------------------------------------------------------------------------

  private refuse(c: RtmpConnection, what: 'play' | 'publish', code: string, why: string, fields: Record<string, unknown>): void {
    this.o.counts.refused(what);
    // anyone can send these: at most one line per address per 10 s
    this.refusals.log(this.o.log, 'warn', c.socket.remoteAddress ?? '', { ...fields, remote: c.remote, why }, `RTMP ${what} refused`);
    c.refuse(code, why);
  }

  private appOfKey(key: string): string | undefined {
    if (!key) return undefined;
    const d = digest(key);
    let found: string | undefined;
    // every key compared, in constant time each: how long this takes says nothing about which matched
    for (const k of this.keys) if (timingSafeEqual(k.digest, d) && found === undefined) found = k.appId;
    return found;
  }

  private dropIdlePublishers(): void {
    const limit = this.o.config.publishIdleSec * 1000;
    const now = this.o.now();
    for (const pub of this.published.values()) {
      if (now - pub.channel.lastUnitAt > limit) pub.conn.drop(`no media for ${this.o.config.publishIdleSec} s`);
    }
  }
}
