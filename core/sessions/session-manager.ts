import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { RequestLog } from '../../plugin-sdk/plugin';
import type { Application } from '../../plugin-sdk/http';
import type { JsonSchema } from '../../plugin-sdk/api-docs';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Clock, Cancel } from '../../plugin-sdk/clock';
import type { Notice, NoticePayload } from '../../plugin-sdk/notices';
import {
  CloseCause,
  closeReasonOf,
  type ChannelStream,
  type CloseCauseValue,
  type IngestProvider,
  type OpenGuard,
  type OpenParams,
  type OutputProvider,
  type PlayerHandle,
  type PlayerInfo,
  type PresenceProvider,
  type PushAddress,
  type Sessions,
  type StreamTyp,
  type StrmRequest,
  type TalkProvider,
} from '../../plugin-sdk/sessions';
import type { CoreMediaBus, BusStream } from '../bus/media-bus';
import type { NoticeHub } from '../notices';
import { mediaTypOf, validateOpen } from './open-validation';
import { openRequestSchema } from './open-schema';
import { attachPlayerTo, tokenMatches } from './play-access';
import { RequestCap } from './request-cap';
import { checkReqIds, type RequestDirectory } from './request-ids';
import { lacksAudio, noticePayload, openResult, requestStatus } from './request-views';
import { RequestState, StreamState, type SessionTimings } from './session-state';
import { SessionProviders } from './session-providers';

export type { RequestDirectory } from './request-ids';
export type { SessionTimings } from './session-state';

/** how long a detectMediaTyp request's ready notice waits for an audio track after the first keyframe */
const DETECT_WAIT_MS = 1000;

/** Requests, channel streams and every timer that governs them (keep, consumption, open timeout). */
export class SessionManager implements Sessions {
  private requests = new Map<string, RequestState>();
  private directory: RequestDirectory | undefined;
  private cap: RequestCap;
  private streams = new Map<string, StreamState>();
  private readonly providers: SessionProviders;
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
  ) {
    this.cap = new RequestCap(t, clock, log);
    this.providers = new SessionProviders(log);
  }

  start(): void {
    this.sweepCancel = this.clock.setInterval(() => this.sweep(), 1000);
  }

  stopAll(): void {
    this.sweepCancel?.();
    for (const r of [...this.requests.values()]) this.closeRequest(r.reqId, CloseCause.internalError, 'gateway stopping');
  }

  // --- registration -------------------------------------------------------------------------
  openRequestSchema(): JsonSchema {
    return openRequestSchema();
  }

  registerIngest(p: IngestProvider): void {
    this.providers.registerIngest(p);
  }
  registerOutput(p: OutputProvider): void {
    this.providers.registerOutput(p);
  }
  registerTalk(p: TalkProvider): void {
    this.providers.registerTalk(p);
  }
  setPresenceProvider(p: PresenceProvider): void {
    this.providers.setPresenceProvider(p);
  }
  addOpenGuard(g: OpenGuard): void {
    this.providers.guards.push(g);
  }
  setDirectory(d: RequestDirectory | undefined): void {
    this.directory = d;
  }
  onStreamOpened(cb: (s: ChannelStream) => void): void {
    this.cbOpened.push(cb);
  }
  onStreamClosed(cb: (s: ChannelStream) => void | Promise<void>): void {
    this.cbClosed.push(cb);
  }
  onRequestOpened(cb: (r: StrmRequest, s: ChannelStream) => void): void {
    this.cbReqOpened.push(cb);
  }
  onRequestClosed(cb: (r: StrmRequest, cause: CloseCauseValue) => void): void {
    this.cbReqClosed.push(cb);
  }

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
    const match = tokenMatches(r, token);
    return ok && match ? r : undefined;
  }
  attachPlayer(reqId: string, info: PlayerInfo): PlayerHandle | undefined {
    const r = this.requests.get(reqId);
    if (!r || r.closed) return undefined;
    return attachPlayerTo(r, this.streams.get(r.streamName), info, this.log);
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
    this.cap.check(app.appId);
    const params = validateOpen(body, {
      reqIdHolder: (id) => {
        const r = this.requests.get(id);
        return !r ? undefined : r.appId === app.appId ? 'self' : 'other';
      },
      hasIngestFor: (src) => this.providers.hasIngestFor(src),
      outputSchemes: (fmt) => this.providers.outputSchemes(fmt),
      keepIntvDefault: this.t.keepIntvDefault,
      newReqId: () => this.newReqId(),
    });
    for (const g of this.providers.guards) await g(app, params, body);
    // a guard may have awaited: the reqId could have been taken meanwhile, and other opens may have filled the cap
    const taken = this.requests.get(params.reqId);
    if (taken)
      throw new GatewayError(ErrCode.INVALID_PARAM, taken.appId === app.appId ? 'Invalid parameter `reqId`. It is in use.' : 'Invalid parameter `reqId`.');
    this.cap.check(app.appId);
    if (!this.directory) return this.openChecked(app, params);
    const closedNotice: Notice = {
      payload: {
        instId: this.t.instId,
        act: 'closed',
        reqId: params.reqId,
        typ: params.typ,
        simNo: params.simNo,
        chan: params.chanId,
        mediaTyp: mediaTypOf(params.typ, params.dataTyp),
      },
      appId: app.appId,
      cb: params.cb,
      last: true,
    };
    const existing = this.streams.get(SessionManager.streamName(params.normSim, params.chanId, params.typ));
    const info = {
      channel: `${params.normSim}_${params.chanId}`,
      fmt: params.fmt,
      ctrl: !existing || existing.requests.length === 0,
      keepIntv: params.keepIntv,
      keepDeadline: this.clock.now() + this.holdMs(params.keepIntv),
    };
    const held = await this.directory.reserve(params.reqId, app.appId, this.requestLimitFor(app.appId), closedNotice, info);
    if (held === 'self') throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqId`. It is in use.');
    if (held === 'other') throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqId`.');
    if (held === 'cap') this.cap.check(app.appId, Infinity);
    try {
      return await this.openChecked(app, params);
    } catch (err) {
      if (!this.requests.has(params.reqId)) this.directory.release(params.reqId, app.appId);
      throw err;
    }
  }

  /** the host of the open's address set (connIdx): publicHost, or one of publicHosts */
  private hostFor(connIdx: number): string {
    if (connIdx === 0) return this.t.publicHost;
    const more = this.t.publicHosts ?? [];
    const host = more[connIdx - 1];
    if (host === undefined) {
      throw new GatewayError(
        ErrCode.INVALID_PARAM,
        `Invalid parameter \`connIdx\`. This gateway node has ${more.length + 1} address set${more.length ? 's' : ''}: use 0${more.length ? `..${more.length}` : ''}.`,
      );
    }
    return host;
  }

  private async openChecked(app: Application, params: OpenParams): Promise<Record<string, unknown>> {
    const host = this.hostFor(params.connIdx);
    if (this.providers.offline(params.normSim)) {
      throw new GatewayError(ErrCode.NO_CONNECTION_AVAILABLE, 'The terminal is not online.');
    }
    const { ingest, output } = this.providers.servingOf(params);
    const name = SessionManager.streamName(params.normSim, params.chanId, params.typ);
    let stream = this.streams.get(name);
    if (stream?.state === 'closing') throw new GatewayError(ErrCode.RETRY, 'The stream is closing; retry.');
    if (stream && stream.requests.length > 0) {
      if (params.exclusive) throw new GatewayError(ErrCode.NO_CTRL, 'The channel is in use; exclusive open refused.');
      if (stream.requests.some((r) => r.params.exclusive)) throw new GatewayError(ErrCode.NO_CTRL, 'The channel is held by an exclusive request.');
    }
    const pushed = ingest.pushAddress(params.typ);
    // the ingest names the node's first address set; connIdx chose this one
    const push: PushAddress = params.connIdx === 0 || pushed.host !== this.t.publicHost ? pushed : { ...pushed, host };
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
    this.providers.makeUrls(req, output, name, host, params);
    if (output.readyWhen === 'own') req.ownReady = false;
    req.readyAtOpen = stream.state === 'ready' && req.ownReady !== false;
    req.sawReady = req.readyAtOpen;
    this.requests.set(req.reqId, req);
    this.cap.added(app.appId);
    stream.requests.push(req);
    this.updateExpectVideo(stream);
    this.requestLog({ reqId: req.reqId, appId: app.appId, stream: name, ctrl: req.ctrl, fmt: params.fmt, ready: req.readyAtOpen }, 'request opened');
    if (created) for (const cb of this.cbOpened) this.safe(() => cb(stream!), 'stream-opened hook');
    for (const cb of this.cbReqOpened) this.safe(() => cb(req, stream!), 'request-opened hook');
    if (req.closed) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The request could not be started.');
    req.opening = false;
    // its output may have found it playable in a hook (e.g. an HLS form another request had already started)
    if (req.ownReady === true && stream.state === 'ready') req.readyAtOpen = req.sawReady = true;

    return openResult(req, stream, params, push);
  }

  requestLimitFor(appId: string): number {
    return this.cap.limitFor(appId);
  }

  /** open requests of one application */
  requestCountOf(appId: string): number {
    return this.cap.countOf(appId);
  }

  keep(app: Application, reqIds: unknown): Array<{ reqId: string; keep: boolean }> {
    return this.eachOwned(app, reqIds, 'keep', (r) => {
      r.keepDeadline = this.clock.now() + this.holdMs(r.params.keepIntv);
      this.directory?.kept?.(r.appId, r.reqId, r.keepDeadline);
      return true;
    });
  }

  close(app: Application, reqIds: unknown): Array<{ reqId: string; closed: boolean }> {
    return this.eachOwned(app, reqIds, 'closed', (r) => {
      this.closeRequest(r.reqId, CloseCause.clientReq);
      return true;
    });
  }

  private eachOwned<K extends string>(
    app: Application,
    reqIds: unknown,
    key: K,
    fn: (r: RequestState) => boolean,
  ): Array<{ reqId: string } & Record<K, boolean>> {
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
      out.push(requestStatus(r, this.streams.get(r.streamName)));
    }
    return out;
  }

  closeRequest(reqId: string, cause: CloseCauseValue, detail?: string): void {
    const r = this.requests.get(reqId);
    if (!r || r.closed) return;
    r.closed = true;
    this.requests.delete(reqId);
    this.directory?.release(reqId, r.appId);
    this.cap.removed(r.appId);
    const s = this.streams.get(r.streamName);
    this.requestLog({ reqId, appId: r.appId, stream: r.streamName, closeCause: cause, closeReason: closeReasonOf[cause], detail }, 'request closed');
    for (const cb of this.cbReqClosed) this.safe(() => cb(r, cause), 'request-closed hook');
    const failed =
      !r.sawReady &&
      (cause === CloseCause.termDataTimeout || cause === CloseCause.badStrmFormat || cause === CloseCause.internalError || cause === CloseCause.termStrmClose);
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
        Promise.all(
          this.cbClosed.map((cb) =>
            Promise.resolve()
              .then(() => cb(s))
              .catch((err) => this.log.error({ err, stream: s.name }, 'stream-closed hook failed')),
          ),
        ),
        new Promise<void>((resolve) => {
          cancel = this.clock.setTimeout(() => {
            this.log.warn({ stream: s.name }, 'stream-closed hooks took over 5 s');
            resolve();
          }, 5000);
        }),
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
      if (r.params.detectMediaTyp && lacksAudio(s)) waiting.push(r);
      else this.emit(r, s, 'ready');
    }
    if (waiting.length === 0) return;
    const release = () => {
      offTracks();
      cancel();
      for (const r of waiting) if (!r.closed) this.emit(r, s, 'ready');
    };
    const offTracks = s.media.on('tracks', () => {
      if (!lacksAudio(s)) release();
    });
    const cancel = this.clock.setTimeout(release, DETECT_WAIT_MS);
  }

  private updateExpectVideo(s: StreamState): void {
    s.media.expectVideo = s.requests.some((r) => mediaTypOf(r.params.typ, r.params.dataTyp) !== 'a');
  }

  private emit(r: RequestState, s: StreamState | undefined, act: NoticePayload['act'], cause?: CloseCauseValue): void {
    const payload = noticePayload(this.t.instId, r, s, act, cause);
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
    try {
      fn();
    } catch (err) {
      this.log.error({ err }, `${what} failed`);
    }
  }
}
