import type { NoticePayload } from '../../plugin-sdk/notices';
import { closeReasonOf, type CloseCauseValue, type MediaTyp, type OpenParams, type PushAddress } from '../../plugin-sdk/sessions';
import { mediaTypOf } from './open-validation';
import type { RequestState, StreamState } from './session-state';

// What a request shows outward: its open result, its status entry, its notices, and the media type they report.

export function lacksAudio(s: StreamState): boolean {
  return !s.media.tracks.some((t) => t.kind === 'audio');
}

export function mediaTypFor(r: RequestState, s: StreamState): MediaTyp {
  const declared = mediaTypOf(r.params.typ, r.params.dataTyp);
  if (!r.params.detectMediaTyp || !s.media.ready) return declared;
  const kinds = new Set(s.media.tracks.map((t) => t.kind));
  if (kinds.has('video') && kinds.has('audio')) return 'av';
  if (kinds.has('video')) return 'v';
  if (kinds.has('audio')) return 'a';
  return declared;
}

export function noticePayload(instId: string, r: RequestState, s: StreamState | undefined, act: NoticePayload['act'], cause?: CloseCauseValue): NoticePayload {
  const payload: NoticePayload = {
    instId,
    act,
    reqId: r.reqId,
    typ: r.params.typ,
    simNo: r.params.simNo,
    chan: r.params.chanId,
    mediaTyp: s ? mediaTypFor(r, s) : mediaTypOf(r.params.typ, r.params.dataTyp),
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
  return payload;
}

export function openResult(req: RequestState, stream: StreamState, params: OpenParams, push: PushAddress): Record<string, unknown> {
  const result: Record<string, unknown> = {
    reqId: req.reqId,
    ctrl: req.ctrl,
    playUrl: req.playUrl,
    ready: req.readyAtOpen,
    mediaTyp: mediaTypFor(req, stream),
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

/** one entry of `status`: the request `r` on its stream `s` (undefined once the stream is gone) */
export function requestStatus(r: RequestState, s: StreamState | undefined): unknown {
  const st = s?.media.stats();
  return {
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
    mediaTyp: s ? mediaTypFor(r, s) : undefined,
    flags: r.flags,
    codecs: s?.media.tracks.map((t) =>
      t.kind === 'video' ? { kind: t.kind, codec: t.codec, width: t.width, height: t.height } : { kind: t.kind, codec: t.codec, sampleRate: t.sampleRate },
    ),
    bytesIn: st?.bytesIn ?? 0,
    bytesOut: s?.bytesOut ?? 0,
    streamRequests: s?.requests.length ?? 0,
  };
}
