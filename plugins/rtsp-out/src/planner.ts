/**
 * What DESCRIBE decides for a request: which tracks the presentation has (the request's dataTyp, the tracks of the
 * stream, or of the stage's form of it that the play URL asked for) and how its readers read the stream (as it is,
 * or through that stage, then through the AAC stage for audio RTP here does not carry as received). An early
 * player's DESCRIBE waits here for the stream's first media.
 */
import type { Logger } from 'pino';
import {
  aacVia,
  chainVia,
  mediaTypOf,
  type AudioTrackInfo,
  type ChannelStream,
  type Clock,
  type MediaBus,
  type MediaSelect,
  type MediaStream,
  type StrmRequest,
  type TrackInfo,
  type VideoTrackInfo,
  type Via,
} from '../../../plugin-sdk';
import type { AudioCodec } from '../../../plugin-sdk';
import type { PlayTarget } from './play-url';
import { audioPayloadType } from '../../../plugin-sdk/rtp';
import type { Presentation } from './sdp';
import type { Plan } from './session';

/** an av request whose stream has video but no audio track yet waits this long more for audio before DESCRIBE answers */
const AUDIO_GRACE_MS = 1000;

type WaitResult = 'ok' | 'timeout' | 'closed';

/** a DESCRIBE (or SETUP) waiting for media; `owner` is its connection */
export interface Wait {
  readonly reqId: string;
  readonly owner: object;
  done(r: WaitResult): void;
}

export interface PlannerOptions {
  bus: MediaBus;
  clock: Clock;
  log: Logger;
  /** audio carried as received */
  audioCodecs: readonly string[];
  describeWaitMs: number;
}

export class Planner {
  private readonly waits = new Set<Wait>();

  constructor(private readonly o: PlannerOptions) {}

  /** Ends the waits that match (their request or connection closed): they answer as if the stream closed. */
  cancel(match: (w: Wait) => boolean): void {
    for (const w of [...this.waits]) if (match(w)) w.done('closed');
  }

  /**
   * The plan, or the status DESCRIBE answers instead: 404 (the request, stream or connection closed while waiting),
   * 503 (no media within describeWaitMs, or the play's stage gives no tracks), 415 (nothing RTP here can carry).
   * `play` is the stage the play URL asked for, checked.
   */
  async plan(t: PlayTarget, r: StrmRequest, cs: ChannelStream, owner: { closed: boolean }, publicAddress: string, play?: string): Promise<Plan | number> {
    const media = mediaTypOf(r.params.typ, r.params.dataTyp);
    const ms = cs.media;
    const hasVideo = (): boolean => ms.tracks.some((x) => x.kind === 'video');
    const hasAudio = (): boolean => ms.tracks.some((x) => x.kind === 'audio');
    const wanted = media === 'a' ? hasAudio : () => ms.ready && hasVideo();
    const got = await this.waitFor(ms, r.reqId, owner, wanted, this.o.describeWaitMs);
    if (got === 'closed') return 404;
    if (got === 'timeout') return 503;
    if (media === 'av' && !hasAudio()) {
      if ((await this.waitFor(ms, r.reqId, owner, hasAudio, AUDIO_GRACE_MS)) === 'closed') return 404;
    }
    // the tracks of the play's form of the stream: a stage may change them
    const tracks = play === undefined ? ms.tracks : await this.formTracks(ms, play, media);
    if (!tracks) return 503;
    const presentation: Presentation = {};
    if (media !== 'a') presentation.video = tracks.find((x): x is VideoTrackInfo => x.kind === 'video');
    let via: Via | undefined = play;
    const audio = media === 'v' ? undefined : tracks.find((x): x is AudioTrackInfo => x.kind === 'audio');
    if (audio) {
      if (this.o.audioCodecs.includes(audio.codec) && audioPayloadType(audio) !== undefined) {
        presentation.audio = audio;
      } else {
        const aac = aacVia(this.o.bus, r.params.audioCfg, this.o.audioCodecs as AudioCodec[]);
        const derived = aac && (await this.formTracks(ms, chainVia(play, aac)!, 'a'))?.find((x): x is AudioTrackInfo => x.kind === 'audio');
        if (derived && audioPayloadType(derived) !== undefined) {
          presentation.audio = derived;
          via = chainVia(play, aac);
        }
      }
    }
    if (!presentation.video && !presentation.audio) return 415;
    return { reqId: r.reqId, token: t.token, stream: t.stream, host: t.host || publicAddress, media, play, via, presentation };
  }

  /** Waits until `cond` holds, the time is up, or the request, stream or connection closes. */
  private waitFor(ms: MediaStream, reqId: string, owner: { closed: boolean }, cond: () => boolean, timeoutMs: number): Promise<WaitResult> {
    if (ms.closed || owner.closed) return Promise.resolve('closed');
    if (cond()) return Promise.resolve('ok');
    return new Promise((resolve) => {
      const offs: Array<() => void> = [];
      const w: Wait = {
        reqId,
        owner,
        done: (r) => {
          for (const off of offs) off();
          this.waits.delete(w);
          resolve(r);
        },
      };
      this.waits.add(w);
      const check = (): void => {
        if (cond()) w.done('ok');
      };
      offs.push(
        ms.on('tracks', check),
        ms.on('ready', check),
        ms.on('closed', () => w.done('closed')),
      );
      offs.push(this.o.clock.setTimeout(() => w.done(cond() ? 'ok' : 'timeout'), timeoutMs));
    });
  }

  /**
   * The tracks (of `media`) of a stage's form of the stream (the play's, or AAC audio): read from a short-lived reader
   * of that form; undefined when the form cannot be read (logged).
   */
  private async formTracks(ms: MediaStream, via: Via, media: MediaSelect): Promise<ReadonlyArray<TrackInfo> | undefined> {
    let found: ReadonlyArray<TrackInfo> | undefined;
    let sub;
    try {
      sub = ms.subscribe(
        {
          // what comes meanwhile is let go (tracks are delivered in order with units, so this reader must take them)
          write: () => undefined,
          tracks: (list: ReadonlyArray<TrackInfo>) => {
            found = list;
          },
        },
        { media, via },
      );
    } catch (err) {
      this.o.log.warn({ stream: ms.name, via, err: (err as Error).message }, "a stage's form of the stream is unavailable: RTSP goes without it");
      return undefined;
    }
    try {
      // the stage sets its tracks when its own reader starts, a microtask or two after ours: a few turns at most
      for (let i = 0; i < 20 && !found?.length; i++) await new Promise<void>((resolve) => (i < 5 ? setImmediate(resolve) : setTimeout(resolve, 10)));
    } finally {
      sub.close();
    }
    return found;
  }
}
