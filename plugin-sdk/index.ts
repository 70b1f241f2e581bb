/** The public surface for plugin authors. Plugins import from here, never from core/ or from each other. */
export { definePlugin } from './plugin';
export type {
  PluginDefinition,
  PluginContext,
  PluginInstance,
  RequestLog,
  Health,
  SiteInfo,
  Net,
  ListenOptions,
  HttpListenOptions,
  HttpListener,
  Stores,
  KeyValueStore,
  Workers,
  SliceReader,
  UdpPort,
} from './plugin';
export type {
  Routes,
  RouteRequest,
  RouteOptions,
  AuthMode,
  JsonHandler,
  RawHandler,
  UpgradeHandler,
  WebSocketHandler,
  WebSocketRouteOptions,
  JsonReply,
  Application,
  UrlOptions,
} from './http';
export { defineFormat, STREAM_NAME } from './bus';
export type {
  MediaBus,
  MediaStream,
  OwnedStream,
  MediaReader,
  Publisher,
  ReaderHandle,
  ReaderOptions,
  ReaderStats,
  MediaStreamStats,
  MediaSelect,
  UnitFormat,
  FormatEncoder,
  StreamInfo,
  StreamEvent,
  StageDefinition,
  StageContext,
  StageInstance,
  StageRef,
  StageParams,
  Via,
  CreateStreamOptions,
  Off,
} from './bus';
export { audioStage, audioStageStats } from './stages';
export type { AudioTransform, AudioStageOptions, AudioStageStats } from './stages';
export { filterStage } from './filter-stage';
export type { FilterStageOptions } from './filter-stage';
export { VIA_PARAM, playVia, chainVia, playQuery } from './play-via';
export type { PlayVia } from './play-via';
export { servePlays } from './plays';
export type { Plays, Play, PlayRead, PlaysOptions, PlaysContext } from './plays';
export { wsPlayerSocket, httpPlayerSocket } from './player-sockets';
export type { PlayerSocket, PlayRefusal, PlayerSocketOptions, HttpPlayerSocketOptions } from './player-sockets';
export { VIDEO_TIMESCALE, unitAt, videoUnit, audioUnit, shiftUnit, withPayload } from './media';
export type { AccessUnit, TrackInfo, VideoTrackInfo, AudioTrackInfo, CodecId, VideoCodec, AudioCodec, G726Packing, UnitTicks, UnitMs } from './media';
export { AAC_STAGE, aacVia } from './audio';
export type { AacStageParams } from './audio';
export { channelKey, streamKey } from './cluster';
export type { ConnectionRouter, RouteDecision } from './cluster';
export { defineService } from './services';
export type { ServiceToken, Services } from './services';
export { TERMINAL_LINKS } from './services/terminal-links';
export type { TerminalLinks, TerminalLink, DownlinkAudio, Jt1078Layout } from './services/terminal-links';
export { INTERCOM_TALKS } from './services/intercom-talks';
export type { IntercomTalks, TalkSession, TalkRefusal, TalkConnection as IntercomTalkConnection } from './services/intercom-talks';
export { CloseCause, closeReasonOf, mediaTypOf } from './sessions';
export { normaliseSim, SIM_PATTERN } from './sim';
export type {
  Sessions,
  StrmRequest,
  ChannelStream,
  OpenParams,
  IngestProvider,
  OutputProvider,
  TalkProvider,
  PresenceProvider,
  OpenGuard,
  PushAddress,
  StreamTyp,
  MediaTyp,
  CloseCauseValue,
  PlayerInfo,
  PlayerHandle,
} from './sessions';
export type { Notice, NoticePayload, Notices } from './notices';
export type { Metrics } from './metrics';
export { ErrCode, GatewayError, invalidParam } from './errors';
export type { ErrCodeValue } from './errors';
export { systemClock, ManualClock } from './clock';
export { BufferSlab, FRAME_SLAB_BYTES } from './buffer-slab';
export { copyBytes, lengthOf, memOf, offsetOf, setBytes } from './byte-views';
export { DirectWriter, WritableAccount, directWritesActive } from './direct-writes';
export { WireScratch } from './wire-scratch';
export type { Clock, Cancel } from './clock';
export { LogLimiter, OVERFLOW_KEY } from './log-limiter';
export type { LogLimiterOptions, LogVerdict } from './log-limiter';
export type { HotCounter, HotHistogram } from './hot-metrics';
export { BYTE_TOTAL_START, ByteTotal } from './hot-metrics';
export { StreamFeed } from './stream-feed';
export { BatchedBroadcast } from './batched-broadcast';
export type { BatchedBroadcastOptions } from './batched-broadcast';
export { keptAlloc, keptCopy } from './kept-bytes';
export { redactUrlPassword } from './redact';
export { parseCallbackUrl } from './callback-url';
export type { ParsedCallback, CallbackUrlResult } from './callback-url';
export { API_DOCS, fieldSchema, objectSchema, queryParameters } from './api-docs';
export type { ApiDescription, ApiDocs, FieldRule, FieldRules, JsonSchema, PathItem } from './api-docs';

/*
 * TypeScript compiles each `export … from` into an accessor on `exports` after first setting it to undefined, which
 * turns the exports object into a dictionary: every `plugin_sdk_1.NAME` read by a plugin would be a hash lookup on
 * the media path. A plain copy made once here keeps every read a fast property load (test/core/module-exports.test.ts).
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- module.exports is typed any; the copy is the same names
module.exports = { __esModule: true, ...module.exports };
