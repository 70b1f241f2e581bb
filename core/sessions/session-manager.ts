import { randomBytes, hash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { RequestLog } from '../../plugin-sdk/plugin';
import type { Application } from '../../plugin-sdk/http';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Clock, Cancel } from '../../plugin-sdk/clock';
import type { Notice, NoticePayload } from '../../plugin-sdk/notices';
import {
  CloseCause, closeReasonOf, type ChannelStream, type CloseCauseValue, type IngestProvider, type MediaTyp, type OpenGuard,
  type OpenParams, type OutputProvider, type PlayerHandle, type PlayerInfo, type PresenceProvider, type PushAddress, type Sessions,
  type StreamTyp, type StrmRequest, type TalkProvider,
} from '../../plugin-sdk/sessions';
import type { CoreMediaBus, BusStream } from '../bus/media-bus';
import type { NoticeHub } from '../notices';
import { mediaTypOf, validateOpen } from './open-validation';

export interface SessionTimings {
  keepIntvDefault: number;
  openTimeoutSec: number;
  consumptionTimeoutSec: number;
  instId: string;
  publicHost: string;
  /** open requests one application may hold */
  maxRequestsPerApp: number;
  /** per-application overrides of maxRequestsPerApp, by appId */
  requestLimits?: ReadonlyMap<string, number>;
}

/** a refused open past the per-application cap is logged at most this often per application */
const CAP_LOG_INTERVAL_MS = 60_000;

class RequestState implements StrmRequest {
  closed = false;
  players = 0;
  consumed = false;
  flags: Record<string, unknown> = {};
  keepDeadline = 0;
  readyAtOpen = false;
  /** the stream was ready (playable in the request's format) while this request lived (closed vs failed) */
  sawReady = false;
  /**
   * For an output that says itself when a request is playable (OutputProvider.readyWhen 'own'): whether it has
   * (sessions.outputReady). Undefined for other outputs: their requests are ready with the stream.
   */
  ownReady: boolean | undefined = undefined;
  /** inside open(): an outputReady() now is reported by the open result, not by a notice */
  opening = true;
  playUrl = '';
  /** URLs of outputs without a fmt, by output name */
  urls: Record<string, string> | undefined;
  /** intercom URLs (live dataTyp 2 with a talk provider on the site) */
  talk: { taUrl: string; wsUrl: string } | undefined;
  constructor(
    readonly reqId: string,
    readonly appId: string,
    readonly params: OpenParams,
    readonly streamName: string,
    readonly ctrl: boolean,
    readonly openedAt: Date,
    readonly openedAtMs: number,
  ) {}
}

class StreamState implements ChannelStream {
  state: 'waiting' | 'ready' | 'closing' = 'waiting';
  requests: RequestState[] = [];
  bytesOut = 0;
  constructor(
    readonly name: string,
    readonly typ: StreamTyp,
    readonly normSim: string,
    readonly chanId: number,
    readonly media: BusStream,
    readonly openedAtMs: number,
  ) {}
}

/** how long a detectMediaTyp request's ready notice waits for an audio track after the first keyframe */
const DETECT_WAIT_MS = 1000;

// one-shot hash (no Hash object): every HLS part and playlist fetch checks its token
const tokenDigest = (s: string): Buffer => hash('sha256', s, 'buffer');
/** the request's own token digest, made once: a request's token never changes */
const requestDigests = new WeakMap<StrmRequest, Buffer>();
const NO_REQUEST_DIGEST = tokenDigest('');

/** Requests, channel streams and every timer that governs them (keep, consumption, open timeout). */
/**
 * With several workers, request ids live in one directory (the primary's): unique across workers, each one's worker
 * known (keep and close find it), and a closed notice kept for each in case its worker dies.
 */
export interface RequestDirectory {
  /** 'cap': the application holds its maximum of open requests across all workers */
  reserve(reqId: string, appId: string, limit: number, closedNotice: Notice): Promise<'ok' | 'self' | 'other' | 'cap'>;
  release(reqId: string): void;
}

/** the reqIds of keep and close: 1..1000 strings of at most 64 characters */
export function checkReqIds(reqIds: unknown): string[] {
  if (!Array.isArray(reqIds) || reqIds.length === 0 || reqIds.length > 1000 || !reqIds.every((x) => typeof x === 'string' && x.length <= 64)) {
    throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqIds`. Give 1..1000 request ids.');
  }
  return reqIds as string[];
}

export class SessionManager implements Sessions {
  private requests = new Map<string, RequestState>();
  private directory: RequestDirectory | undefined;
  /** open requests by appId, for the per-application cap */
  private perApp = new Map<string, number>();
  private capLog = new Map<string, { at: number; suppressed: number }>();
  private streams = new Map<string, StreamState>();
  private ingests: IngestProvider[] = [];
  private outputs = new Map<number, OutputProvider>();
  /** outputs without a fmt: their URLs go into `urls` of every open */
  private extraOutputs: OutputProvider[] = [];
  private talk: TalkProvider | undefined;
  private presence: PresenceProvider | undefined;
  private guards: OpenGuard[] = [];
  private cbOpened: Array<(s: ChannelStream) => void> = [];
  private cbClosed: Array<(s: ChannelStream) => void | Promise<void>> = [];
  private cbReqOpened: Array<(r: StrmRequest, s: ChannelStream) => void> = [];
  private cbReqClosed: Array<(r: StrmRequest, cause: CloseCauseValue) => void> = [];
  private sweepCancel: Cancel | undefined;

  constructor(
    private readonly t: SessionTimings,
    private readonly bus: CoreMediaBus,
    private readonly notices: NoticeHub,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** request opened/closed and stream ready/closed, at the site's requestLogLevel */
    private readonly requestLog: RequestLog = (obj, msg) => log.info(obj, msg),
  ) {}

  start(): void {
    this.sweepCancel = this.clock.setInterval(() => this.sweep(), 1000);
  }

  stopAll(): void {
    this.sweepCancel?.();
    for (const r of [...this.requests.values()]) this.closeRequest(r.reqId, CloseCause.internalError, 'gateway stopping');
  }

  // --- registration -------------------------------------------------------------------------
  registerIngest(p: IngestProvider): void {
    this.ingests.push(p);
  }
  registerOutput(p: OutputProvider): void {
    if (p.schemes.length === 0) throw new Error(`output ${p.name}: give at least one scheme`);
    if (p.fmt === undefined) {
      if (this.extraOutputs.some((o) => o.name === p.name)) throw new Error(`output ${p.name} is registered already`);
      this.extraOutputs.push(p);
      return;
    }
    if (this.outputs.has(p.fmt)) throw new Error(`fmt ${p.fmt} already has an output plugin (${this.outputs.get(p.fmt)!.name})`);
    this.outputs.set(p.fmt, p);
  }
  registerTalk(p: TalkProvider): void {
    if (this.talk) throw new Error(`talk provider ${p.name}: ${this.talk.name} is registered already`);
    this.talk = p;
  }
  setDirectory(d: RequestDirectory): void {
    this.directory = d;
  }

  setPresenceProvider(p: PresenceProvider): void {
    this.presence = p;
  }
  addOpenGuard(g: OpenGuard): void {
    this.guards.push(g);
  }
  onStreamOpened(cb: (s: ChannelStream) => void): void { this.cbOpened.push(cb); }
  onStreamClosed(cb: (s: ChannelStream) => void | Promise<void>): void { this.cbClosed.push(cb); }
  onRequestOpened(cb: (r: StrmRequest, s: ChannelStream) => void): void { this.cbReqOpened.push(cb); }
  onRequestClosed(cb: (r: StrmRequest, cause: CloseCauseValue) => void): void { this.cbReqClosed.push(cb); }

  // --- lookups -------------------------------------------------------------------------------
  static streamName(normSim: string, chanId: number, typ: StreamTyp): string {
    return `${normSim}_${chanId}_${typ === 'live' ? 1 : 0}`;
  }
  findStream(normSim: string, chanId: number, typ: StreamTyp): ChannelStream | undefined {
    const s = this.streams.get(SessionManager.streamName(normSim, chanId, typ));
    return s && s.state !== 'closing' ? s : undefined;
  }
  getStreamByName(name: string): ChannelStream | undefined {
    return this.streams.get(name);
  }
  getRequest(reqId: string): StrmRequest | undefined {
    return this.requests.get(reqId);
  }
  get requestCount(): number {
    return this.requests.size;
  }
  get streamCount(): number {
    return this.streams.size;
  }

  authorizePlay(streamName: string, reqId: string, token: string): StrmRequest | undefined {
    const r = this.requests.get(reqId);
    const ok = !!r && !r.closed && r.streamName === streamName;
    // compare digests so the time taken does not depend on how much of the token matched
    let own = NO_REQUEST_DIGEST;
    if (r) {
      own = requestDigests.get(r) ?? tokenDigest(r.params.user.token);
      requestDigests.set(r, own);
    }
    const match = timingSafeEqual(own, tokenDigest(token));
    return ok && match ? r : undefined;
  }
  attachPlayer(reqId: string, info: PlayerInfo): PlayerHandle | undefined {
    const r = this.requests.get(reqId);
    if (!r || r.closed) return undefined;
    r.players++;
    r.consumed = true;
    const stream = this.streams.get(r.streamName);
    let open = true;
    this.log.debug({ reqId, stream: r.streamName, protocol: info.protocol, remote: info.remote }, 'player attached');
    return {
      sent: (n: number) => {
        if (stream) stream.bytesOut += n;
      },
      close: () => {
        if (!open) return;
        open = false;
        if (r.players > 0) r.players--;
      },
    };
  }
  outputReady(reqId: string): void {
    const r = this.requests.get(reqId);
    if (!r || r.closed || r.ownReady !== false) return;
    r.ownReady = true;
    const s = this.streams.get(r.streamName);
    // before the stream is ready, streamReady tells it; inside open, the open result does
    if (r.opening || r.readyAtOpen || !s || s.state !== 'ready') return;
    r.sawReady = true;
    this.emit(r, s, 'ready');
  }
  setRequestFlag(reqId: string, key: string, value: unknown): void {
    const r = this.requests.get(reqId);
    if (r) r.flags[key] = value;
  }

  // --- open / keep / close ----------------------------------------------------------------------
  private holdMs(keepIntv: number): number {
    return (keepIntv + Math.max(5, keepIntv / 4)) * 1000;
  }

  async open(app: Application, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    this.checkAppCap(app);
    const params = validateOpen(body, {
      reqIdHolder: (id) => {
        const r = this.requests.get(id);
        return !r ? undefined : r.appId === app.appId ? 'self' : 'other';
      },
      hasIngestFor: (src) => this.ingests.some((i) => i.source === src),
      outputSchemes: (fmt) => this.outputs.get(fmt)?.schemes,
      keepIntvDefault: this.t.keepIntvDefault,
      newReqId: () => this.newReqId(),
    });
    for (const g of this.guards) await g(app, params, body);
    // a guard may have awaited: the reqId could have been taken meanwhile, and other opens may have filled the cap
    const taken = this.requests.get(params.reqId);
    if (taken) throw new GatewayError(ErrCode.INVALID_PARAM, taken.appId === app.appId ? 'Invalid parameter `reqId`. It is in use.' : 'Invalid parameter `reqId`.');
    this.checkAppCap(app);
    if (!this.directory) return this.openChecked(app, params);
    const closedNotice: Notice = {
      payload: { instId: this.t.instId, act: 'closed', reqId: params.reqId, typ: params.typ, simNo: params.simNo, chan: params.chanId, mediaTyp: mediaTypOf(params.typ, params.dataTyp) },
      appId: app.appId, cb: params.cb, last: true,
    };
    const held = await this.directory.reserve(params.reqId, app.appId, this.requestLimitFor(app.appId), closedNotice);
    if (held === 'self') throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqId`. It is in use.');
    if (held === 'other') throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqId`.');
    if (held === 'cap') this.checkAppCap(app, Infinity);
    try {
      return await this.openChecked(app, params);
    } catch (err) {
      if (!this.requests.has(params.reqId)) this.directory.release(params.reqId);
      throw err;
    }
  }

  private async openChecked(app: Application, params: OpenParams): Promise<Record<string, unknown>> {
    if (this.presence?.presence(params.normSim) === 'offline') {
      throw new GatewayError(ErrCode.NO_CONNECTION_AVAILABLE, 'The terminal is not online.');
    }
    const ingest = this.ingests.find((i) => i.source === (params.rtspSrc ? 'rtsp' : 'terminal'))!;
    const output = this.outputs.get(params.fmt)!;
    const name = SessionManager.streamName(params.normSim, params.chanId, params.typ);
    let stream = this.streams.get(name);
    if (stream?.state === 'closing') throw new GatewayError(ErrCode.RETRY, 'The stream is closing; retry.');
    if (stream && stream.requests.length > 0) {
      if (params.exclusive) throw new GatewayError(ErrCode.NO_CTRL, 'The channel is in use; exclusive open refused.');
      if (stream.requests.some((r) => r.params.exclusive)) throw new GatewayError(ErrCode.NO_CTRL, 'The channel is held by an exclusive request.');
    }
    const push: PushAddress = ingest.pushAddress(params.typ);
    const now = this.clock.now();
    let created = false;
    if (!stream) {
      let media: BusStream;
      try {
        media = this.bus.create(name, 'sessions');
      } catch (err) {
        // a plugin made a stream of this name for itself: requests cannot share it
        this.log.warn({ stream: name, err: (err as Error).message }, 'open refused: the stream name is taken');
        throw new GatewayError(ErrCode.RETRY, 'The stream is in use by the gateway; retry.');
      }
      stream = new StreamState(name, params.typ, params.normSim, params.chanId, media, now);
      this.streams.set(name, stream);
      created = true;
      const st = stream;
      media.on('ready', () => this.streamReady(st));
    }
    const req = new RequestState(params.reqId, app.appId, params, name, stream.requests.length === 0, new Date(now), now);
    req.keepDeadline = now + this.holdMs(params.keepIntv);
    req.playUrl = output.playUrl({ streamName: name, reqId: req.reqId, token: params.user.token, scheme: params.scheme!, host: this.t.publicHost, subFmt: params.subFmt });
    for (const o of this.extraOutputs) {
      try {
        (req.urls ??= {})[o.name] = o.playUrl({ streamName: name, reqId: req.reqId, token: params.user.token, scheme: o.schemes[0], host: this.t.publicHost });
      } catch (err) {
        this.log.error({ err, output: o.name }, 'output failed to make its URL; left out of the open result');
      }
    }
    if (this.talk && params.typ === 'live' && params.dataTyp === 2) {
      try {
        req.talk = this.talk.talkUrls({ streamName: name, reqId: req.reqId, token: params.user.token, host: this.t.publicHost, params });
      } catch (err) {
        this.log.error({ err, talk: this.talk.name }, 'talk provider failed to make its URLs; left out of the open result');
      }
    }
    if (output.readyWhen === 'own') req.ownReady = false;
    req.readyAtOpen = stream.state === 'ready' && req.ownReady !== false;
    req.sawReady = req.readyAtOpen;
    this.requests.set(req.reqId, req);
    this.perApp.set(app.appId, (this.perApp.get(app.appId) ?? 0) + 1);
    stream.requests.push(req);
    this.updateExpectVideo(stream);
    this.requestLog({ reqId: req.reqId, appId: app.appId, stream: name, ctrl: req.ctrl, fmt: params.fmt, ready: req.readyAtOpen }, 'request opened');
    if (created) for (const cb of this.cbOpened) this.safe(() => cb(stream!), 'stream-opened hook');
    for (const cb of this.cbReqOpened) this.safe(() => cb(req, stream!), 'request-opened hook');
    if (req.closed) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The request could not be started.');
    req.opening = false;
    // its output may have found it playable in a hook (e.g. an HLS form another request had already started)
    if (req.ownReady === true && stream.state === 'ready') req.readyAtOpen = req.sawReady = true;

    const result: Record<string, unknown> = {
      reqId: req.reqId,
      ctrl: req.ctrl,
      playUrl: req.playUrl,
      ready: req.readyAtOpen,
      mediaTyp: this.mediaTypFor(req, stream),
      keepIntv: params.keepIntv,
      host: push.host,
      port: push.port,
      tcp: push.tcp,
      port2019: push.port2019,
      tcp2019: push.tcp2019,
    };
    if (req.urls) result.urls = req.urls;
    if (req.talk) {
      result.taUrl = req.talk.taUrl;
      result.wsUrl = req.talk.wsUrl;
    }
    if (req.flags.recording === true) result.recording = true;
    // an open that asked to record and cannot (e.g. the record store is out of space) says why; the stream still plays
    else if (params.record && typeof req.flags.recordingError === 'string') result.recordingError = req.flags.recordingError;
    if (params.audioCfg) result.audioCfg = params.audioCfg;
    if (params.detectMediaTyp) result.detectMediaTyp = true;
    return result;
  }

  requestLimitFor(appId: string): number {
    return this.t.requestLimits?.get(appId) ?? this.t.maxRequestsPerApp;
  }

  /** open requests of one application */
  requestCountOf(appId: string): number {
    return this.perApp.get(appId) ?? 0;
  }

  /** `held`: the application's open requests, when known better than this worker's count (the cluster's) */
  private checkAppCap(app: Application, held = this.requestCountOf(app.appId)): void {
    const limit = this.requestLimitFor(app.appId);
    if (held < limit) return;
    const now = this.clock.now();
    const l = this.capLog.get(app.appId);
    if (!l || now - l.at >= CAP_LOG_INTERVAL_MS) {
      this.log.warn({ appId: app.appId, limit, suppressed: l?.suppressed ?? 0 }, 'open refused: the application holds its maximum of open requests');
      this.capLog.set(app.appId, { at: now, suppressed: 0 });
    } else {
      l.suppressed++;
    }
    // -3 (other failures): decisions.md has no quota code, and -11 is an HTTP 403 for routes, which would read as
    // "these credentials may not open at all"; -3 stays HTTP 200 like every business error
    throw new GatewayError(ErrCode.EXECUTION_ERROR, `Too many open requests: this application holds its maximum of ${limit}; close some first.`);
  }

  keep(app: Application, reqIds: unknown): Array<{ reqId: string; keep: boolean }> {
    return this.eachOwned(app, reqIds, 'keep', (r) => {
      r.keepDeadline = this.clock.now() + this.holdMs(r.params.keepIntv);
      return true;
    });
  }

  close(app: Application, reqIds: unknown): Array<{ reqId: string; closed: boolean }> {
    return this.eachOwned(app, reqIds, 'closed', (r) => {
      this.closeRequest(r.reqId, CloseCause.clientReq);
      return true;
    });
  }

  private eachOwned<K extends string>(app: Application, reqIds: unknown, key: K, fn: (r: RequestState) => boolean): Array<{ reqId: string } & Record<K, boolean>> {
    return checkReqIds(reqIds).map((id) => {
      const r = this.requests.get(id);
      // another application's request answers exactly like an unknown one
      const ok = !!r && !r.closed && r.appId === app.appId ? fn(r) : false;
      return { reqId: id, [key]: ok } as { reqId: string } & Record<K, boolean>;
    });
  }

  status(app: Application): unknown[] {
    const out: unknown[] = [];
    for (const r of this.requests.values()) {
      if (r.appId !== app.appId) continue;
      const s = this.streams.get(r.streamName);
      const st = s?.media.stats();
      out.push({
        reqId: r.reqId,
        typ: r.params.typ,
        simNo: r.params.simNo,
        chanId: r.params.chanId,
        stream: r.streamName,
        fmt: r.params.fmt,
        playUrl: r.playUrl,
        ...(r.urls ? { urls: r.urls } : {}),
        ...(r.talk ? { taUrl: r.talk.taUrl, wsUrl: r.talk.wsUrl } : {}),
        ctrl: r.ctrl,
        exclusive: r.params.exclusive,
        ready: s?.state === 'ready' && r.ownReady !== false,
        consumed: r.consumed,
        players: r.players,
        keepIntv: r.params.keepIntv,
        openedAt: r.openedAt.toISOString(),
        keepDeadline: new Date(r.keepDeadline).toISOString(),
        mediaTyp: s ? this.mediaTypFor(r, s) : undefined,
        flags: r.flags,
        codecs: s?.media.tracks.map((t) => (t.kind === 'video' ? { kind: t.kind, codec: t.codec, width: t.width, height: t.height } : { kind: t.kind, codec: t.codec, sampleRate: t.sampleRate })),
        bytesIn: st?.bytesIn ?? 0,
        bytesOut: s?.bytesOut ?? 0,
        streamRequests: s?.requests.length ?? 0,
      });
    }
    return out;
  }

  closeRequest(reqId: string, cause: CloseCauseValue, detail?: string): void {
    const r = this.requests.get(reqId);
    if (!r || r.closed) return;
    r.closed = true;
    this.requests.delete(reqId);
    this.directory?.release(reqId);
    const left = (this.perApp.get(r.appId) ?? 1) - 1;
    if (left > 0) this.perApp.set(r.appId, left);
    else this.perApp.delete(r.appId);
    const s = this.streams.get(r.streamName);
    this.requestLog({ reqId, appId: r.appId, stream: r.streamName, closeCause: cause, closeReason: closeReasonOf[cause], detail }, 'request closed');
    for (const cb of this.cbReqClosed) this.safe(() => cb(r, cause), 'request-closed hook');
    const failed = !r.sawReady && (cause === CloseCause.termDataTimeout || cause === CloseCause.badStrmFormat || cause === CloseCause.internalError || cause === CloseCause.termStrmClose);
    this.emit(r, s, failed ? 'failed' : 'closed', cause);
    if (s) {
      s.requests = s.requests.filter((x) => x !== r);
      if (s.requests.length === 0) void this.teardownStream(s);
      else this.updateExpectVideo(s);
    }
  }

  closeStream(streamName: string, cause: CloseCauseValue): void {
    const s = this.streams.get(streamName);
    if (!s) return;
    for (const r of [...s.requests]) this.closeRequest(r.reqId, cause);
  }

  private async teardownStream(s: StreamState): Promise<void> {
    if (s.state === 'closing') return;
    s.state = 'closing';
    this.bus.remove(s.name, 'stream closed');
    let cancel: Cancel | undefined;
    try {
      // opens of this channel answer -207 until every plugin has let go of the stream (at most 5 s)
      await Promise.race([
        Promise.all(this.cbClosed.map((cb) => Promise.resolve().then(() => cb(s)).catch((err) => this.log.error({ err, stream: s.name }, 'stream-closed hook failed')))),
        new Promise<void>((resolve) => { cancel = this.clock.setTimeout(() => { this.log.warn({ stream: s.name }, 'stream-closed hooks took over 5 s'); resolve(); }, 5000); }),
      ]);
    } finally {
      cancel?.();
      if (this.streams.get(s.name) === s) this.streams.delete(s.name);
      this.requestLog({ stream: s.name }, 'stream closed');
    }
  }

  // --- readiness, notices, timers -----------------------------------------------------------------
  private streamReady(s: StreamState): void {
    if (s.state !== 'waiting') return;
    s.state = 'ready';
    this.requestLog({ stream: s.name, tracks: s.media.tracks.map((t) => t.codec) }, 'stream ready');
    // A request that asked to detect its media type is told once it is known: terminals announce audio with its
    // first frame, which may come a little after the first keyframe; the ready notice of such a request waits for
    // the audio track, at most DETECT_WAIT_MS, so its mediaTyp says what the terminal really sends.
    const waiting: RequestState[] = [];
    for (const r of s.requests) {
      // (a request whose output says itself when it is playable is told by outputReady)
      if (r.ownReady === false) continue;
      r.sawReady = true;
      if (r.readyAtOpen) continue;
      if (r.params.detectMediaTyp && this.lacksAudio(s)) waiting.push(r);
      else this.emit(r, s, 'ready');
    }
    if (waiting.length === 0) return;
    const release = () => {
      offTracks();
      cancel();
      for (const r of waiting) if (!r.closed) this.emit(r, s, 'ready');
    };
    const offTracks = s.media.on('tracks', () => { if (!this.lacksAudio(s)) release(); });
    const cancel = this.clock.setTimeout(release, DETECT_WAIT_MS);
  }

  private lacksAudio(s: StreamState): boolean {
    return !s.media.tracks.some((t) => t.kind === 'audio');
  }

  private updateExpectVideo(s: StreamState): void {
    s.media.expectVideo = s.requests.some((r) => mediaTypOf(r.params.typ, r.params.dataTyp) !== 'a');
  }

  private mediaTypFor(r: RequestState, s: StreamState): MediaTyp {
    const declared = mediaTypOf(r.params.typ, r.params.dataTyp);
    if (!r.params.detectMediaTyp || !s.media.ready) return declared;
    const kinds = new Set(s.media.tracks.map((t) => t.kind));
    if (kinds.has('video') && kinds.has('audio')) return 'av';
    if (kinds.has('video')) return 'v';
    if (kinds.has('audio')) return 'a';
    return declared;
  }

  private emit(r: RequestState, s: StreamState | undefined, act: NoticePayload['act'], cause?: CloseCauseValue): void {
    const payload: NoticePayload = {
      instId: this.t.instId,
      act,
      reqId: r.reqId,
      typ: r.params.typ,
      simNo: r.params.simNo,
      chan: r.params.chanId,
      mediaTyp: s ? this.mediaTypFor(r, s) : mediaTypOf(r.params.typ, r.params.dataTyp),
    };
    if (act === 'ready') {
      payload.playUrl = r.playUrl;
      if (r.talk) {
        payload.taUrl = r.talk.taUrl;
        payload.wsUrl = r.talk.wsUrl;
      }
    }
    if (cause !== undefined) {
      payload.closeCause = cause;
      payload.closeReason = closeReasonOf[cause];
    }
    for (const t of s?.media.tracks ?? []) {
      if (t.kind === 'video') {
        payload.vc = t.codec;
        if (t.frameRate) payload.frameRate = t.frameRate;
      } else {
        payload.ac = t.codec;
        payload.sampleRate = t.sampleRate;
      }
    }
    this.notices.emit({ payload, appId: r.appId, cb: r.params.cb, last: act !== 'ready' });
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const r of [...this.requests.values()]) {
      if (r.closed) continue;
      if (now > r.keepDeadline) this.closeRequest(r.reqId, CloseCause.keepTimeout);
      else if (!r.consumed && now - r.openedAtMs >= this.t.consumptionTimeoutSec * 1000) this.closeRequest(r.reqId, CloseCause.consumptionTimeout);
    }
    for (const s of [...this.streams.values()]) {
      if (s.state === 'waiting' && now - s.openedAtMs >= this.t.openTimeoutSec * 1000) {
        this.log.warn({ stream: s.name, openTimeoutSec: this.t.openTimeoutSec }, 'terminal did not push within the open timeout');
        this.closeStream(s.name, CloseCause.termDataTimeout);
      }
    }
  }

  private newReqId(): string {
    for (;;) {
      const id = randomBytes(16).toString('base64url');
      if (!this.requests.has(id)) return id;
    }
  }

  private safe(fn: () => void, what: string): void {
    try { fn(); } catch (err) { this.log.error({ err }, `${what} failed`); }
  }
}
