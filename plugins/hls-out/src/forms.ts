/**
 * The HLS forms being made: one segmenter per (stream, tracks wanted, audio form, container, play stage), started when
 * the first fmt 1 request that wants it opens (so a player's first playlist finds media at once) and stopped when the
 * last such request closes or the stream closes. A playlist URL whose `via` names a stage starts (or shares) the form
 * read through that stage at its first fetch; it belongs to the request from then on, as its own form does.
 */
import type { Logger } from 'pino';
import { aacVia, chainVia, mediaTypOf, type ChannelStream, type MediaBus, type StageRef, type StrmRequest, type ReaderHandle } from '../../../plugin-sdk';
import type { HlsOutConfig } from './config';
import { Segmenter, type Container, type SegmenterStats } from './segmenter';

export interface HlsForm {
  readonly key: string;
  readonly stream: string;
  readonly container: Container;
  readonly segmenter: Segmenter;
  /** the stage a play URL asked for (undefined: the request's own form) */
  readonly via: string | undefined;
  /** requests reading it */
  readonly requests: Set<string>;
}

interface FormState extends HlsForm {
  sub: ReaderHandle | undefined;
  offPublisher: () => void;
  /** its first segment exists: its requests are playable */
  playable: boolean;
}

export class HlsForms {
  private readonly byKey = new Map<string, FormState>();
  /** a request's forms by the stage its plays asked for ('' for none) */
  private readonly byReq = new Map<string, Map<string, FormState>>();

  constructor(
    private readonly c: HlsOutConfig,
    private readonly bus: MediaBus,
    private readonly log: Logger,
    private readonly stats: SegmenterStats,
    /** a request can play its form now (its first segment exists): sessions.outputReady */
    private readonly playable: (reqId: string) => void,
  ) {}

  get size(): number {
    return this.byKey.size;
  }

  /** bytes held by every form, and by the largest one */
  memory(): { total: number; largest: number } {
    let total = 0;
    let largest = 0;
    for (const f of this.byKey.values()) {
      total += f.segmenter.bytes;
      largest = Math.max(largest, f.segmenter.bytes);
    }
    return { total, largest };
  }

  /** the form a request's plays read: its own, or the one through the stage `via` */
  of(reqId: string, via?: string): HlsForm | undefined {
    return this.byReq.get(reqId)?.get(via ?? '');
  }

  /** a request opened: its form starts (or is shared) */
  requestOpened(r: StrmRequest, s: ChannelStream): void {
    if (r.params.fmt === 1) this.start(r, s, undefined);
  }

  /**
   * The form a fmt 1 request reads through a play's stage `via` (a stage registered on the bus), started now if need
   * be: undefined when its stream cannot be read that way (logged).
   */
  forPlay(r: StrmRequest, s: ChannelStream, via: string): HlsForm | undefined {
    return this.of(r.reqId, via) ?? this.start(r, s, via);
  }

  private start(r: StrmRequest, s: ChannelStream, play: string | undefined): HlsForm | undefined {
    const container: Container = r.params.subFmt === 'mpegts' ? 'mpegts' : 'fmp4';
    const media = mediaTypOf(r.params.typ, r.params.dataTyp);
    const own: StageRef | undefined = media === 'v' ? undefined : aacVia(this.bus, r.params.audioCfg);
    const via = chainVia(play, own);
    const key = `${s.name}|${media}|${container}|${own ? JSON.stringify(own.params ?? {}) : 'as-received'}|${play ?? ''}`;
    let f = this.byKey.get(key);
    if (!f || f.segmenter.closed) {
      const log = this.log.child({ stream: s.name, hls: `${media}/${container}` });
      const segmenter = new Segmenter({
        container,
        targetDurationSec: this.c.targetDurationSec,
        partTargetSec: this.c.partTargetSec,
        windowSegments: this.c.windowSegments,
        windowSec: this.c.windowSec,
        maxStreamBytes: this.c.maxStreamBytes,
        audioWaitMs: this.c.audioWaitMs,
        wantsAudioWithVideo: media === 'av',
        wallClock: (dts) => s.media.wallClock(dts),
        sourceHasAudio: () => s.media.tracks.some((t) => t.kind === 'audio'),
        log,
        stats: this.stats,
      });
      const state: FormState = {
        key,
        stream: s.name,
        container,
        segmenter,
        via: play,
        requests: new Set(),
        sub: undefined,
        playable: false,
        offPublisher: s.media.on('publisher', () => segmenter.publisherChanged()),
      };
      f = state;
      this.byKey.set(key, state);
      segmenter.onChange(() => {
        if (segmenter.closed) this.forget(state);
        else if (!state.playable && segmenter.hasMedia) {
          state.playable = true;
          // a request is ready when its own form is (a play's stage is that play's business)
          if (play === undefined) for (const id of state.requests) this.playable(id);
        }
      });
      try {
        // the segmenter takes every unit at once (it never reports itself unwritable): the bus queues nothing for it
        state.sub = s.media.subscribe(segmenter, { media, via });
      } catch (err) {
        log.warn({ err: (err as Error).message, via: play }, 'HLS form could not read its stream');
        segmenter.close();
        return undefined;
      }
      log.info({ key }, 'HLS form started');
    }
    f.requests.add(r.reqId);
    let forms = this.byReq.get(r.reqId);
    if (!forms) this.byReq.set(r.reqId, (forms = new Map<string, FormState>()));
    forms.set(play ?? '', f);
    if (f.playable && play === undefined) this.playable(r.reqId);
    return f;
  }

  requestClosed(reqId: string): void {
    const forms = this.byReq.get(reqId);
    if (!forms) return;
    this.byReq.delete(reqId);
    for (const f of forms.values()) {
      f.requests.delete(reqId);
      if (f.requests.size === 0) this.stopForm(f);
    }
  }

  stop(): void {
    for (const f of [...this.byKey.values()]) this.stopForm(f);
  }

  private stopForm(f: FormState): void {
    f.sub?.close();
    f.segmenter.close();
    this.forget(f);
  }

  private forget(f: FormState): void {
    f.offPublisher();
    if (this.byKey.get(f.key) === f) this.byKey.delete(f.key);
    const at = f.via ?? '';
    for (const id of f.requests) {
      const forms = this.byReq.get(id);
      if (forms?.get(at) !== f) continue;
      forms.delete(at);
      if (forms.size === 0) this.byReq.delete(id);
    }
  }
}
