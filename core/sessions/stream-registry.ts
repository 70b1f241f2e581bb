/**
 * The channel streams that requests share, by name. A stream is made on the media bus by the first request of its
 * channel and type and torn down when its last request closes; while plugins let go of it (their stream-closed
 * hooks, at most 5 s) it stays here as 'closing', so opens of its channel are told to retry rather than made to
 * share a stream on its way out.
 */
import type { Logger } from 'pino';
import type { RequestLog } from '../../plugin-sdk/plugin';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Clock, Cancel } from '../../plugin-sdk/clock';
import type { ChannelStream, OpenParams, StreamTyp } from '../../plugin-sdk/sessions';
import type { CoreMediaBus, BusStream } from '../bus/media-bus';
import { mediaTypOf } from './open-validation';
import { StreamState } from './session-state';
import type { SessionHooks } from './session-hooks';

export function streamNameOf(normSim: string, chanId: number, typ: StreamTyp): string {
  return `${normSim}_${chanId}_${typ === 'live' ? 1 : 0}`;
}

export class StreamRegistry {
  private streams = new Map<string, StreamState>();

  constructor(
    private readonly bus: CoreMediaBus,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly requestLog: RequestLog,
    private readonly hooks: SessionHooks,
  ) {}

  get(name: string): StreamState | undefined {
    return this.streams.get(name);
  }
  /** the stream of a channel and type, unless it is closing */
  find(normSim: string, chanId: number, typ: StreamTyp): ChannelStream | undefined {
    const s = this.streams.get(streamNameOf(normSim, chanId, typ));
    return s && s.state !== 'closing' ? s : undefined;
  }
  get size(): number {
    return this.streams.size;
  }
  /** a copy: closing a stream's requests while walking them changes the map */
  list(): StreamState[] {
    return [...this.streams.values()];
  }

  /** makes the stream on the media bus and keeps it; `onReady` runs when its media becomes playable */
  create(name: string, params: OpenParams, now: number, onReady: (s: StreamState) => void): StreamState {
    let media: BusStream;
    try {
      media = this.bus.create(name, 'sessions');
    } catch (err) {
      // a plugin made a stream of this name for itself: requests cannot share it
      this.log.warn({ stream: name, err: (err as Error).message }, 'open refused: the stream name is taken');
      throw new GatewayError(ErrCode.RETRY, 'The stream is in use by the gateway; retry.');
    }
    const stream = new StreamState(name, params.typ, params.normSim, params.chanId, media, now);
    this.streams.set(name, stream);
    media.on('ready', () => onReady(stream));
    return stream;
  }

  updateExpectVideo(s: StreamState): void {
    s.media.expectVideo = s.requests.some((r) => mediaTypOf(r.params.typ, r.params.dataTyp) !== 'a');
  }

  async teardown(s: StreamState): Promise<void> {
    if (s.state === 'closing') return;
    s.state = 'closing';
    this.bus.remove(s.name, 'stream closed');
    let cancel: Cancel | undefined;
    try {
      // opens of this channel answer -207 until every plugin has let go of the stream (at most 5 s)
      await Promise.race([
        Promise.all(
          this.hooks.streamClosed.map((cb) =>
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
}
