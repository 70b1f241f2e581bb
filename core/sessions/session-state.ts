import type { ChannelStream, OpenParams, StreamTyp, StrmRequest } from '../../plugin-sdk/sessions';
import type { BusStream } from '../bus/media-bus';
import { BYTE_TOTAL_START } from '../../plugin-sdk/hot-metrics';

export interface SessionTimings {
  keepIntvDefault: number;
  openTimeoutSec: number;
  consumptionTimeoutSec: number;
  instId: string;
  publicHost: string;
  /** the node's further address sets: connIdx k >= 1 writes publicHosts[k - 1] into the open's addresses and URLs */
  publicHosts?: readonly string[];
  /** open requests one application may hold */
  maxRequestsPerApp: number;
  /** per-application overrides of maxRequestsPerApp, by appId */
  requestLimits?: ReadonlyMap<string, number>;
}

export class RequestState implements StrmRequest {
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

export class StreamState implements ChannelStream {
  state: 'waiting' | 'ready' | 'closing' = 'waiting';
  requests: RequestState[] = [];
  bytesOut = BYTE_TOTAL_START;
  constructor(
    readonly name: string,
    readonly typ: StreamTyp,
    readonly normSim: string,
    readonly chanId: number,
    readonly media: BusStream,
    readonly openedAtMs: number,
  ) {}
}
