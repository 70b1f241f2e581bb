/**
 * Helpers for writing stages (see bus.ts: a stage = subscribe to one stream + publish a derived one).
 *
 * `audioStage` covers the common case: video and its track go through by reference, at once (the bus passes them:
 * StageDefinition.passes; the stage reads audio only), and each audio frame goes through a transform (sync, or async when the work runs in a worker thread: see worker.ts), the audio output
 * keeping the input's order. Video does not wait for audio in flight: each track stays in order and the units say
 * when they play, so a player interleaves them; holding video behind an encoder would only add latency. Backpressure crosses the async boundary: while `maxInFlight` frames are being transformed the
 * stage's input reader reports not writable, so the bus queues for it and, if the transform stays behind, applies
 * its slow-reader policy (skip to the next keyframe), as for any other reader.
 */
import type { Logger } from 'pino';
import type { MediaReader, StageContext, StageDefinition, StageInstance, StageParams } from './bus';
import type { AccessUnit, AudioTrackInfo, TrackInfo } from './media';
import { Buffer } from 'node:buffer';

export interface AudioTransform {
  /**
   * The input's audio track, when it is first known and whenever it changes: the output's audio track, or
   * undefined to leave audio out (e.g. a codec the transform cannot read).
   */
  track(input: AudioTrackInfo): AudioTrackInfo | undefined;
  /** One input audio frame: the output frames (none, one or several), now or from a promise. */
  unit(u: AccessUnit): readonly AccessUnit[] | Promise<readonly AccessUnit[]>;
  /** the stage stops: release encoders, tell workers */
  stop?(): void;
  /**
   * Whether the transform still holds an input frame's payload (a view of it it will read later). Define it when
   * it copies what it keeps (then it answers false whenever it holds no view): the input's payload memory can then
   * be reused (Publisher.alloc, MediaReader.holdsPayloads). Frames it returns that share an input's memory are copied
   * by the stage. Left undefined, the stage counts as holding everything it was given.
   */
  holdsPayloads?(): boolean;
}

export interface AudioStageOptions<P extends object = StageParams> {
  name: string;
  /** checks and completes a reader's params (StageDefinition.params): `create` finds the result in `ctx.params` */
  params?: StageDefinition<P>['params'];
  /** audio frames being transformed at once before the input stops taking more (default 32) */
  maxInFlight?: number;
  create(ctx: StageContext<P>): AudioTransform;
}

type Item = { kind: 'track'; track: TrackInfo } | { kind: 'pending'; done: boolean; out: readonly AccessUnit[] };

/** Counts of one running audio stage, for its plugin's metrics. */
export interface AudioStageStats {
  framesIn: number;
  framesOut: number;
  /** frames whose transform threw or rejected (left out) */
  failed: number;
  inFlight: number;
}

const running = new WeakMap<StageInstance, AudioStageStats>();

/** The counts of a running instance made by `audioStage` (undefined for other instances). */
export function audioStageStats(instance: StageInstance): AudioStageStats | undefined {
  return running.get(instance);
}

export function audioStage<P extends object = StageParams>(opts: AudioStageOptions<P>): StageDefinition<P> {
  const maxInFlight = opts.maxInFlight ?? 32;
  if (!(maxInFlight >= 1)) throw new RangeError('audioStage: maxInFlight must be >= 1');
  return {
    name: opts.name,
    params: opts.params,
    passes: ['video'],
    start(ctx) {
      const transform = opts.create(ctx);
      const stats: AudioStageStats = { framesIn: 0, framesOut: 0, failed: 0, inFlight: 0 };
      const fifo: Item[] = [];
      let stopped = false;
      const out = ctx.output;
      const log: Logger = ctx.log;

      const flush = () => {
        while (fifo.length > 0) {
          const head = fifo[0]!;
          if (head.kind === 'pending' && !head.done) break;
          fifo.shift();
          if (stopped) continue;
          if (head.kind === 'track') out.setTrack(head.track);
          else
            for (const u of head.out) {
              stats.framesOut++;
              out.push(u);
            }
        }
      };
      const answers = typeof transform.holdsPayloads === 'function';
      /** a frame out that is a view of an input's memory would be read after the input's memory is reused */
      const own = (o: readonly AccessUnit[], from: AccessUnit): readonly AccessUnit[] => {
        // (most calls of a transform that holds frames back return none: no need to look at the input's memory)
        if (!answers || o.length === 0) return o;
        const b = from.payload.buffer;
        // a loop, not o.some: its closure was made for every result
        let shares = false;
        for (let i = 0; i < o.length && !shares; i++) shares = o[i].payload.buffer === b;
        return shares ? o.map((x) => (x.payload.buffer === b ? { ...x, payload: Buffer.from(x.payload) } : x)) : o;
      };
      const failed = (err: unknown) => {
        // the first failures say why; a transform failing on every frame must not flood the log
        if (++stats.failed <= 3) log.warn({ err: (err as Error | undefined)?.message ?? String(err) }, 'audio stage could not transform a frame: left out');
      };

      /** the input's audio track last given to the transform: a list repeats it when the other track changes */
      let inputTrack: TrackInfo | undefined;
      const tracks = (list: ReadonlyArray<TrackInfo>) => {
        for (const t of list) {
          if (t.kind !== 'audio' || t === inputTrack) continue;
          inputTrack = t;
          let o: AudioTrackInfo | undefined;
          try {
            o = transform.track(t);
          } catch (err) {
            failed(err);
          }
          if (o) fifo.push({ kind: 'track', track: o });
        }
        flush();
      };
      const sink: MediaReader = {
        // audio only (media 'a'): the bus passes video
        tracks,
        write(u) {
          stats.framesIn++;
          let r: readonly AccessUnit[] | Promise<readonly AccessUnit[]>;
          try {
            r = transform.unit(u);
          } catch (err) {
            failed(err);
            return;
          }
          if (!(r instanceof Promise)) {
            // nothing out: no item, even behind frames in flight (an empty item would keep no order, emit nothing;
            // a transform that holds frames back, as the AAC one does four times in five, made and dropped one a frame)
            if (r.length === 0) return;
            fifo.push({ kind: 'pending', done: true, out: own(r, u) });
            flush();
            return;
          }
          const item: Item & { kind: 'pending' } = { kind: 'pending', done: false, out: [] };
          fifo.push(item);
          stats.inFlight++;
          // one reaction per frame (no .finally: it costs two more promises, and audio is 50 frames a second a stream)
          const settle = () => {
            item.done = true;
            stats.inFlight--;
            flush();
            if (!stopped) sub.resume();
          };
          r.then(
            (o) => {
              item.out = own(o, u);
              settle();
            },
            (err) => {
              failed(err);
              settle();
            },
          );
        },
        writable: () => stats.inFlight < maxInFlight,
        // the input closed (the bus closes this stage's stream then), or this reader was ended as stuck
        end: (reason) => {
          stopped = true;
          if (!ctx.input.closed) ctx.fail(reason);
        },
      };
      if (answers) sink.holdsPayloads = () => transform.holdsPayloads!();
      const sub = ctx.input.subscribe(sink, { media: 'a' });
      // the output's audio track now, not from the reader's first call (a microtask away): a reader of the stage's
      // stream that joins now finds it beside the video the bus passes (an FLV header's flags are sent once)
      tracks(ctx.input.tracks);

      const instance: StageInstance = {
        stop() {
          stopped = true;
          fifo.length = 0;
          sub.close();
          try {
            transform.stop?.();
          } catch (err) {
            log.warn({ err: (err as Error | undefined)?.message }, 'audio transform failed to stop');
          }
        },
      };
      running.set(instance, stats);
      return instance;
    },
  };
}
