/**
 * The HLS forms being made: one segmenter per (stream, tracks wanted, audio form, container), started when the
 * first fmt 1 request that wants it opens (so a player's first playlist finds media at once) and stopped when the
 * last such request closes or the stream closes.
 */
import type { Logger } from 'pino';
import {
  aacVia, mediaTypOf, type ChannelStream, type MediaBus, type StageRef, type StrmRequest, type ReaderHandle,
} from '../../../plugin-sdk';
import type { HlsOutConfig } from './config';
import { Segmenter, type Container, type SegmenterStats } from './segmenter';

export interface HlsForm {
  readonly key: string;
  readonly stream: string;
  readonly container: Container;
  readonly segmenter: Segmenter;
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
  private readonly byReq = new Map<string, FormState>();

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

  of(reqId: string): HlsForm | undefined {
    return this.byReq.get(reqId);
  }

  /** a request opened: its form starts (or is shared) */
  requestOpened(r: StrmRequest, s: ChannelStream): void {
    if (r.params.fmt !== 1) return;
    const container: Container = r.params.subFmt === 'mpegts' ? 'mpegts' : 'fmp4';
    const media = mediaTypOf(r.params.typ, r.params.dataTyp);
    const via: StageRef | undefined = media === 'v' ? undefined : aacVia(this.bus, r.params.audioCfg);
    const key = `${s.name}|${media}|${container}|${via ? JSON.stringify(via.params ?? {}) : 'as-received'}`;
    let f = this.byKey.get(key);
    if (!f || f.segmenter.closed) {
      const log = this.log.child({ stream: s.name, hls: `${media}/${container}` });
      const segmenter = new Segmenter({
        container,
        targetDurationSec: this.c.targetDurationSec,
        partTargetSec: this.c.partTargetSec,
        windowSegments: this.c.windowSegments,
        maxStreamBytes: this.c.maxStreamBytes,
        audioWaitMs: this.c.audioWaitMs,
        wantsAudioWithVideo: media === 'av',
        wallClock: (dts) => s.media.wallClock(dts),
        sourceHasAudio: () => s.media.tracks.some((t) => t.kind === 'audio'),
        log,
        stats: this.stats,
      });
      const state: FormState = {
        key, stream: s.name, container, segmenter, requests: new Set(), sub: undefined, playable: false,
        offPublisher: s.media.on('publisher', () => segmenter.publisherChanged()),
      };
      f = state;
      this.byKey.set(key, state);
      segmenter.onChange(() => {
        if (segmenter.closed) this.forget(state);
        else if (!state.playable && segmenter.hasMedia) {
          state.playable = true;
          for (const id of state.requests) this.playable(id);
        }
      });
      try {
        // the segmenter takes every unit at once (it never reports itself unwritable): the bus queues nothing for it
        state.sub = s.media.subscribe(segmenter, { media, via });
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'HLS form could not read its stream');
        segmenter.close();
        return;
      }
      log.info({ key }, 'HLS form started');
    }
    f.requests.add(r.reqId);
    this.byReq.set(r.reqId, f);
    if (f.playable) this.playable(r.reqId);
  }

  requestClosed(reqId: string): void {
    const f = this.byReq.get(reqId);
    if (!f) return;
    this.byReq.delete(reqId);
    f.requests.delete(reqId);
    if (f.requests.size === 0) this.stopForm(f);
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
    for (const id of f.requests) if (this.byReq.get(id) === f) this.byReq.delete(id);
  }
}
