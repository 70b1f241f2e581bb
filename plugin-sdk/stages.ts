/**
 * Helpers for writing stages (see bus.ts: a stage = subscribe to one stream + publish a derived one).
 *
 * `audioStage` covers the common case: video and its track go through by reference, at once, and each audio frame
 * goes through a transform (sync, or async when the work runs in a worker thread: see worker.ts), the audio output
 * keeping the input's order. Video does not wait for audio in flight: each track stays in order and the units say
 * when they play, so a player interleaves them; holding video behind an encoder would only add latency. Backpressure crosses the async boundary: while `maxInFlight` frames are being transformed the
 * stage's input reader reports not writable, so the bus queues for it and, if the transform stays behind, applies
 * its slow-reader policy (skip to the next keyframe), as for any other reader.
 */
import type { Logger } from 'pino';
import type { StageContext, StageDefinition, StageInstance } from './bus';
import type { AccessUnit, AudioTrackInfo, TrackInfo } from './media';

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
}

export interface AudioStageOptions {
  name: string;
  params?: StageDefinition['params'];
  /** audio frames being transformed at once before the input stops taking more (default 32) */
  maxInFlight?: number;
  create(ctx: StageContext): AudioTransform;
}

type Item =
  | { kind: 'track'; track: TrackInfo }
  | { kind: 'pending'; done: boolean; out: readonly AccessUnit[] };

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

export function audioStage(opts: AudioStageOptions): StageDefinition {
  const maxInFlight = opts.maxInFlight ?? 32;
  if (!(maxInFlight >= 1)) throw new RangeError('audioStage: maxInFlight must be >= 1');
  return {
    name: opts.name,
    params: opts.params,
    start(ctx) {
      const transform = opts.create(ctx);
      const stats: AudioStageStats = { framesIn: 0, framesOut: 0, failed: 0, inFlight: 0 };
      const fifo: Item[] = [];
      let stopped = false;
      const out = ctx.output;
      const log: Logger = ctx.log;

      const flush = () => {
        while (fifo.length > 0) {
          const head = fifo[0];
          if (head.kind === 'pending' && !head.done) break;
          fifo.shift();
          if (stopped) continue;
          if (head.kind === 'track') out.setTrack(head.track);
          else for (const u of head.out) { stats.framesOut++; out.push(u); }
        }
      };
      const failed = (err: unknown) => {
        // the first failures say why; a transform failing on every frame must not flood the log
        if (++stats.failed <= 3) log.warn({ err: (err as Error)?.message ?? String(err) }, 'audio stage could not transform a frame: left out');
      };

      const sub = ctx.input.subscribe({
        tracks(list) {
          for (const t of list) {
            if (t.kind === 'video') {
              if (!stopped) out.setTrack(t);
              continue;
            }
            let o: AudioTrackInfo | undefined;
            try {
              o = transform.track(t);
            } catch (err) {
              failed(err);
            }
            if (o) fifo.push({ kind: 'track', track: o });
          }
          flush();
        },
        write(u) {
          if (u.kind === 'video') {
            out.push(u);
            return;
          }
          stats.framesIn++;
          let r: readonly AccessUnit[] | Promise<readonly AccessUnit[]>;
          try {
            r = transform.unit(u);
          } catch (err) {
            failed(err);
            return;
          }
          if (!(r instanceof Promise)) {
            fifo.push({ kind: 'pending', done: true, out: r });
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
          r.then((o) => { item.out = o; settle(); }, (err) => { failed(err); settle(); });
        },
        writable: () => stats.inFlight < maxInFlight,
        // the input closed (the bus closes this stage's stream then), or this reader was ended as stuck
        end: (reason) => {
          stopped = true;
          if (!ctx.input.closed) ctx.fail(reason);
        },
      });

      const instance: StageInstance = {
        stop() {
          stopped = true;
          fifo.length = 0;
          sub.close();
          try {
            transform.stop?.();
          } catch (err) {
            log.warn({ err: (err as Error)?.message }, 'audio transform failed to stop');
          }
        },
      };
      running.set(instance, stats);
      return instance;
    },
  };
}
