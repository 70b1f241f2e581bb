import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { RequestLog } from '../../plugin-sdk/plugin';
import type { Application } from '../../plugin-sdk/http';
import type { JsonSchema } from '../../plugin-sdk/api-docs';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Clock } from '../../plugin-sdk/clock';
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
import type { CoreMediaBus } from '../bus/media-bus';
import type { NoticeHub } from '../notices';
import { validateOpen } from './open-validation';
import { openRequestSchema } from './open-schema';
import { attachPlayerTo, tokenMatches } from './play-access';
import { RequestCap } from './request-cap';
import { checkReqIds, reservationOf, type RequestDirectory } from './request-ids';
import { RequestNotices } from './request-notices';
import { holdMs, RequestTimers } from './request-timers';
import { openResult, requestStatus } from './request-views';
import { SessionHooks } from './session-hooks';
import { RequestState, type SessionTimings } from './session-state';
import { SessionProviders } from './session-providers';
import { StreamRegistry, streamNameOf } from './stream-registry';

export type { RequestDirectory } from './request-ids';
export type { SessionTimings } from './session-state';

/**
 * Requests and the channel streams they share: opens, keeps and closes, composed of the parts beside it (the
 * plugins' providers and hooks, the streams, the notices, the timers, the per-application cap).
 */
export class SessionManager implements Sessions {
  private requests = new Map<string, RequestState>();
  private directory: RequestDirectory | undefined;
  private cap: RequestCap;
  private readonly providers: SessionProviders;
  private readonly hooks: SessionHooks;
  private readonly streams: StreamRegistry;
  private readonly readiness: RequestNotices;
  private readonly timers: RequestTimers;

  constructor(
    private readonly t: SessionTimings,
    bus: CoreMediaBus,
    notices: NoticeHub,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** request opened/closed and stream ready/closed, at the site's requestLogLevel */
    private readonly requestLog: RequestLog = (obj, msg) => log.info(obj, msg),
  ) {
    this.cap = new RequestCap(t, clock, log);
    this.providers = new SessionProviders(log);
    this.hooks = new SessionHooks(log);
    this.streams = new StreamRegistry(bus, clock, log, this.requestLog, this.hooks);
    this.readiness = new RequestNotices(t.instId, notices, clock, this.requestLog);
    this.timers = new RequestTimers(t, clock, log, {
      requests: () => [...this.requests.values()],
      streams: () => this.streams.list(),
      closeRequest: (reqId, cause) => this.closeRequest(reqId, cause),
      closeStream: (name, cause) => this.closeStream(name, cause),
    });
  }

  start(): void {
    this.timers.start();
  }

  stopAll(): void {
    this.timers.stop();
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
    this.hooks.streamOpened.push(cb);
  }
  onStreamClosed(cb: (s: ChannelStream) => void | Promise<void>): void {
    this.hooks.streamClosed.push(cb);
  }
  onRequestOpened(cb: (r: StrmRequest, s: ChannelStream) => void): void {
    this.hooks.requestOpened.push(cb);
  }
  onRequestClosed(cb: (r: StrmRequest, cause: CloseCauseValue) => void): void {
    this.hooks.requestClosed.push(cb);
  }

  // --- lookups -------------------------------------------------------------------------------
  static streamName(normSim: string, chanId: number, typ: StreamTyp): string {
    return streamNameOf(normSim, chanId, typ);
  }
  findStream(normSim: string, chanId: number, typ: StreamTyp): ChannelStream | undefined {
    return this.streams.find(normSim, chanId, typ);
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
    this.readiness.outputReady(r, this.streams.get(r.streamName));
  }
  setRequestFlag(reqId: string, key: string, value: unknown): void {
    const r = this.requests.get(reqId);
    if (r) r.flags[key] = value;
  }

  // --- open / keep / close ----------------------------------------------------------------------
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
    const existing = this.streams.get(streamNameOf(params.normSim, params.chanId, params.typ));
    const ctrl = !existing || existing.requests.length === 0;
    const { closedNotice, info } = reservationOf(this.t.instId, app.appId, params, ctrl, this.clock.now() + holdMs(params.keepIntv));
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
    const name = streamNameOf(params.normSim, params.chanId, params.typ);
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
      stream = this.streams.create(name, params, now, (st) => this.readiness.streamReady(st));
      created = true;
    }
    const req = new RequestState(params.reqId, app.appId, params, name, stream.requests.length === 0, new Date(now), now);
    req.keepDeadline = now + holdMs(params.keepIntv);
    this.providers.makeUrls(req, output, name, host, params);
    if (output.readyWhen === 'own') req.ownReady = false;
    req.readyAtOpen = stream.state === 'ready' && req.ownReady !== false;
    req.sawReady = req.readyAtOpen;
    this.requests.set(req.reqId, req);
    this.cap.added(app.appId);
    stream.requests.push(req);
    this.streams.updateExpectVideo(stream);
    this.requestLog({ reqId: req.reqId, appId: app.appId, stream: name, ctrl: req.ctrl, fmt: params.fmt, ready: req.readyAtOpen }, 'request opened');
    if (created) this.hooks.fireStreamOpened(stream);
    this.hooks.fireRequestOpened(req, stream);
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
      r.keepDeadline = this.clock.now() + holdMs(r.params.keepIntv);
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
    this.hooks.fireRequestClosed(r, cause);
    const failed =
      !r.sawReady &&
      (cause === CloseCause.termDataTimeout || cause === CloseCause.badStrmFormat || cause === CloseCause.internalError || cause === CloseCause.termStrmClose);
    this.readiness.emit(r, s, failed ? 'failed' : 'closed', cause);
    if (s) {
      s.requests = s.requests.filter((x) => x !== r);
      if (s.requests.length === 0) void this.streams.teardown(s);
      else this.streams.updateExpectVideo(s);
    }
  }

  closeStream(streamName: string, cause: CloseCauseValue): void {
    const s = this.streams.get(streamName);
    if (!s) return;
    for (const r of [...s.requests]) this.closeRequest(r.reqId, cause);
  }

  private newReqId(): string {
    for (;;) {
      const id = randomBytes(16).toString('base64url');
      if (!this.requests.has(id)) return id;
    }
  }
}
