import type { MediaTyp, StreamTyp, CloseCauseValue } from './sessions';

/** The callback body of decisions.md (`POST <cb>/strm_notif`). */
export interface NoticePayload {
  instId: string;
  /** `relay`: a push out of the request (POST /strm/relay) changed state (the rtmp plugin) */
  act: 'ready' | 'closed' | 'failed' | 'relay';
  reqId: string;
  typ: StreamTyp;
  simNo: string;
  chan: number;
  mediaTyp: MediaTyp;
  playUrl?: string;
  taUrl?: string;
  wsUrl?: string;
  closeCause?: CloseCauseValue;
  closeReason?: string;
  /** audio codec name */
  ac?: string;
  /** video codec name */
  vc?: string;
  sampleRate?: number;
  frameRate?: number;
  playedAvDumpUrl?: string;
  /** the request asked to record and is not recorded, or its recording stopped: why (the recorder sets it) */
  recordingError?: string;
  /** act `relay`: which relay, its new state, its URL without the stream key, and why it is retrying */
  relayId?: string;
  relayState?: string;
  relayUrl?: string;
  relayError?: string;
}

/** A notice with where it goes: the request's cb (if any) and its application. */
export interface Notice {
  payload: NoticePayload;
  appId: string;
  cb?: string;
  /** true for the request's final notice (closed/failed): delivery state may be forgotten after it */
  last: boolean;
}

export interface Notices {
  /** listeners run synchronously after the session change; they must not block (queue and return) */
  on(cb: (n: Notice) => void): void;
  /** runs before listeners; may add fields (e.g. playedAvDumpUrl) */
  addEnricher(fn: (n: Notice) => void): void;
  /**
   * A plugin's own notice about a request (e.g. a relay's state): delivered like the sessions' ones (the request's
   * cb, else the event bus). Not `last`: the sessions send the request's final notice.
   */
  emit(n: Notice): void;
}
