import type { JsonSchema } from './api-docs';
import type { Application } from './http';
import type { TrackInfo } from './media';
import type { MediaStream } from './bus';

export type StreamTyp = 'live' | 'replay';
export type MediaTyp = 'av' | 'a' | 'v';

/** closeCause values of decisions.md */
export const CloseCause = {
  clientReq: 1,
  termStrmClose: 2,
  internalError: 4,
  keepTimeout: 5,
  termDataTimeout: 6,
  badStrmFormat: 7,
  requestTimeout: 11,
  consumptionTimeout: 12,
  /** a fleet node that held the request stopped: a surviving node sends the notice (decisions.md) */
  nodeLost: 13,
} as const;
export type CloseCauseValue = (typeof CloseCause)[keyof typeof CloseCause];
export const closeReasonOf: Record<CloseCauseValue, string> = {
  1: 'clientReq',
  2: 'termStrmClose',
  4: 'internalError',
  5: 'keepTimeout',
  6: 'termDataTimeout',
  7: 'badStrmFormat',
  11: 'requestTimeout',
  12: 'consumptionTimeout',
  13: 'nodeLost',
};

/**
 * What a request wants, from its typ and dataTyp (strm-api 3.4.4): live 0 audio+video, 1 video, 2 intercom and
 * 3 listen (audio); replay 0 audio+video, 1 audio, 2 video. Outputs read a stream's tracks accordingly.
 */
export function mediaTypOf(typ: StreamTyp, dataTyp: number): MediaTyp {
  if (typ === 'live') return dataTyp === 0 ? 'av' : dataTyp === 1 ? 'v' : 'a';
  return dataTyp === 0 ? 'av' : dataTyp === 1 ? 'a' : 'v';
}

/** The open request after validation and normalisation. */
export interface OpenParams {
  reqId: string;
  cb?: string;
  user: { token: string; userId?: string; userGrade?: number };
  typ: StreamTyp;
  /** as sent */
  simNo: string;
  /** leading zeros stripped when all digits */
  normSim: string;
  chanId: number;
  dataTyp: number;
  codeStrm: number;
  fmt: number;
  subFmt?: string;
  scheme?: string;
  connIdx: number;
  talkSendProtoVer?: number;
  exclusive: boolean;
  record: boolean;
  detectMediaTyp: boolean;
  keepIntv: number;
  audioCfg?: { sampleRate: number; channels: number };
  rtspSrc?: { url: string; user?: string; pwd?: string; transport?: 'auto' | 'tcp' | 'udp' };
  http?: boolean;
  timedToken?: string;
}

/** A live request as plugins see it. */
export interface StrmRequest {
  readonly reqId: string;
  readonly appId: string;
  readonly params: OpenParams;
  /** `{normSim}_{chanId}_{1 live | 0 replay}` */
  readonly streamName: string;
  readonly ctrl: boolean;
  readonly openedAt: Date;
  readonly playUrl: string;
  readonly closed: boolean;
  readonly players: number;
  /** set by plugins that act on the request (e.g. the recorder); shown in the open result and status */
  readonly flags: Record<string, unknown>;
}

/** Where a terminal pushes, as the open result reports it. */
export interface PushAddress {
  host: string;
  port: number;
  tcp: boolean;
  port2019: number;
  tcp2019: boolean;
}

/** An ingest plugin: answers where terminals push for a given typ. */
export interface IngestProvider {
  name: string;
  /** 'terminal': JT/T 1078 pushes; 'rtsp': requests that carry rtspSrc */
  source: 'terminal' | 'rtsp';
  pushAddress(typ: StreamTyp): PushAddress;
}

/**
 * An output plugin: makes play URLs. With `fmt` it serves that `fmt` of the open request (its URL is the
 * `playUrl`). Without one it serves every request in a way of its own: its URL goes into the open result's and
 * status's `urls` object under its name (`"urls": {"annexb-http": "http://…"}`), made with its first scheme.
 */
export interface OutputProvider {
  name: string;
  fmt?: number;
  /** schemes this output can serve on this site, e.g. ['http', 'ws'] */
  schemes: string[];
  playUrl(args: { streamName: string; reqId: string; token: string; scheme: string; host: string; subFmt?: string }): string;
  /**
   * 'own': this output says itself when a request of its fmt is playable (`Sessions.outputReady`; HLS: its first
   * segment exists). Until then the request is not `ready` (open result, status) and gets no ready notice. By
   * default a request is ready with its stream (first keyframe, or audio for an audio-only request).
   */
  readyWhen?: 'own';
}

/**
 * An intercom plugin: the talk URLs of a live dataTyp 2 request (decisions.md: `taUrl`, the binary WebSocket, and
 * `wsUrl`, the STOMP one). The sessions put them into the open result, the status entry and the ready notice of such
 * requests only; one provider per gateway.
 */
export interface TalkProvider {
  name: string;
  talkUrls(args: { streamName: string; reqId: string; token: string; host: string; params: OpenParams }): { taUrl: string; wsUrl: string } | undefined;
}

/** A player (or any reader serving a request) as the output tells the sessions about it. */
export interface PlayerInfo {
  /** e.g. 'http-flv', 'ws-flv', 'hls', 'rtsp' */
  protocol: string;
  /** the peer, address:port */
  remote: string;
}

/** What an output holds while a player of a request plays: the request counts it, and its bytes. */
export interface PlayerHandle {
  /** n more bytes went to this player (added to the stream's bytes out in status) */
  sent(n: number): void;
  /** the player left (idempotent) */
  close(): void;
}

/** Knows whether a terminal is online; open answers -27 when it says 'offline'. */
export interface PresenceProvider {
  name: string;
  presence(simNo: string): 'online' | 'offline' | 'unknown';
}

/**
 * A check run on every open after field validation; throw a GatewayError to refuse.
 * Used e.g. by gov-timed-token.
 */
export type OpenGuard = (app: Application, params: OpenParams, body: Record<string, unknown>) => void | Promise<void>;

export interface ChannelStream {
  readonly name: string;
  readonly typ: StreamTyp;
  readonly normSim: string;
  readonly chanId: number;
  readonly state: 'waiting' | 'ready' | 'closing';
  readonly requests: ReadonlyArray<StrmRequest>;
  readonly media: MediaStream;
}

export interface Sessions {
  /** the JSON Schema of the open body, generated from the field tables the open's validator reads (for API documents) */
  openRequestSchema(): JsonSchema;
  registerIngest(p: IngestProvider): void;
  registerOutput(p: OutputProvider): void;
  /** the intercom provider (taUrl/wsUrl of live dataTyp 2 requests); a second one throws */
  registerTalk(p: TalkProvider): void;
  setPresenceProvider(p: PresenceProvider): void;
  addOpenGuard(g: OpenGuard): void;

  /** the open stream for a pushed channel, if any request wants it */
  findStream(normSim: string, chanId: number, typ: StreamTyp): ChannelStream | undefined;
  getStreamByName(name: string): ChannelStream | undefined;
  getRequest(reqId: string): StrmRequest | undefined;
  /**
   * A play attempt: the request if reqId is open on this stream and token equals its user.token
   * (constant-time), else undefined.
   */
  authorizePlay(streamName: string, reqId: string, token: string): StrmRequest | undefined;
  /**
   * A player of reqId started: the request counts it (`players` in status) and is consumed from now on (it is not
   * closed for consumptionTimeoutSec). Undefined when the request is not open. Close the handle when it leaves.
   */
  attachPlayer(reqId: string, info: PlayerInfo): PlayerHandle | undefined;
  /** close a request (e.g. terminal gone for good) */
  closeRequest(reqId: string, cause: CloseCauseValue): void;
  /** close every request of a stream */
  closeStream(streamName: string, cause: CloseCauseValue): void;
  setRequestFlag(reqId: string, key: string, value: unknown): void;
  /**
   * A request of an output with `readyWhen: 'own'` is playable in its format: it becomes ready (the ready notice
   * goes out now, or when its stream is ready if that comes later). Idempotent; ignored for other requests.
   */
  outputReady(reqId: string): void;

  onStreamOpened(cb: (s: ChannelStream) => void): void;
  /** the kernel waits (up to 5 s) for a returned promise before the stream's teardown goes on */
  onStreamClosed(cb: (s: ChannelStream) => void | Promise<void>): void;
  onRequestOpened(cb: (r: StrmRequest, s: ChannelStream) => void): void;
  onRequestClosed(cb: (r: StrmRequest, cause: CloseCauseValue) => void): void;
}

export type { TrackInfo };
