/**
 * When a request's notices go out. Ready is told once per request, by whichever comes last of the stream's media,
 * the request's own output (readyWhen 'own') and, for detectMediaTyp, the audio track; a ready already reported by
 * the open result is not told again. Closed or failed is the request's last notice.
 */
import type { RequestLog } from '../../plugin-sdk/plugin';
import type { Clock } from '../../plugin-sdk/clock';
import type { NoticePayload } from '../../plugin-sdk/notices';
import type { CloseCauseValue } from '../../plugin-sdk/sessions';
import type { NoticeHub } from '../notices';
import { lacksAudio, noticePayload } from './request-views';
import type { RequestState, StreamState } from './session-state';

/** how long a detectMediaTyp request's ready notice waits for an audio track after the first keyframe */
const DETECT_WAIT_MS = 1000;

export class RequestNotices {
  constructor(
    private readonly instId: string,
    private readonly notices: NoticeHub,
    private readonly clock: Clock,
    private readonly requestLog: RequestLog,
  ) {}

  emit(r: RequestState, s: StreamState | undefined, act: NoticePayload['act'], cause?: CloseCauseValue): void {
    const payload = noticePayload(this.instId, r, s, act, cause);
    this.notices.emit({ payload, appId: r.appId, cb: r.params.cb, last: act !== 'ready' });
  }

  /** the request's own output says it is playable (sessions.outputReady) */
  outputReady(r: RequestState, s: StreamState | undefined): void {
    r.ownReady = true;
    // before the stream is ready, streamReady tells it; inside open, the open result does
    if (r.opening || r.readyAtOpen || !s || s.state !== 'ready') return;
    r.sawReady = true;
    this.emit(r, s, 'ready');
  }

  streamReady(s: StreamState): void {
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
}
