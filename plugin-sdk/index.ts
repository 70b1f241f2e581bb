/** The public surface for plugin authors. Plugins import from here, never from core/ or from each other. */
export { definePlugin } from './plugin';
export type { PluginDefinition, PluginContext, PluginInstance, SiteInfo, Net, ListenOptions, Stores, KeyValueStore } from './plugin';
export type { Routes, RouteRequest, RouteOptions, AuthMode, JsonHandler, RawHandler, UpgradeHandler, JsonReply, Application } from './http';
export type { MediaBus, MediaStream, MediaSink, Publisher, Subscription, SubscribeOptions, MediaStreamStats } from './bus';
export type { AccessUnit, TrackInfo, VideoTrackInfo, AudioTrackInfo, CodecId, VideoCodec, AudioCodec } from './media';
export { CloseCause, closeReasonOf } from './sessions';
export { normaliseSim, SIM_PATTERN } from './sim';
export type {
  Sessions, StrmRequest, ChannelStream, OpenParams, IngestProvider, OutputProvider, PresenceProvider, OpenGuard, PushAddress,
  StreamTyp, MediaTyp, CloseCauseValue,
} from './sessions';
export type { Notice, NoticePayload, Notices } from './notices';
export type { Metrics } from './metrics';
export type { FlvServer, FlvPublisher, FlvPublishOptions, FlvTag, PlayAttempt } from './flv-server';
export { ErrCode, GatewayError, invalidParam } from './errors';
export type { ErrCodeValue } from './errors';
export { systemClock, ManualClock } from './clock';
export { BufferSlab } from './buffer-slab';
export type { Clock, Cancel } from './clock';
