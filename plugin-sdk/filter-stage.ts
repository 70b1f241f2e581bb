/**
 * A stage that keeps some units of one track and drops the rest (key frames only, one frame in N, audio muted past a
 * time): `filterStage({ name, create })`, where `create` gives each running instance its keep/drop predicate.
 *
 * The units kept go to the derived stream by reference, the same objects the input has, and the other track passes
 * through the bus itself (StageDefinition.passes), so the stage costs a call per unit of its track and no copy.
 * Payload reuse (Publisher.alloc) stays on: the stage's reader holds nothing (its `holdsPayloads` answers false), and
 * the derived stream, fed from the input, counts as a holder of what it got (its GOP cache, queues and sinks are
 * asked before the input reuses memory). What makes that exact is that a kept unit reaches the derived stream in the
 * same call in which the input took it, before the input passes any later unit: the bus numbers it no later than it
 * is. Units handed to the stage's reader at its start (the input's GOP cache, and any unit pushed before the reader's
 * first turn) reach it later than that, so those are copied: a GOP's worth, once per instance.
 *
 * On a stream with no unit of the passed track (video without audio, for a video filter) the bus has nothing to
 * number the kept units by: they count as holding all of the input's memory while the derived stream has them, so
 * the input reuses nothing while the stage runs (safe, only slower).
 */
import type { Logger } from 'pino';
import type { StageContext, StageDefinition, StageParams } from './bus';
import { withPayload, type AccessUnit, type TrackInfo } from './media';

export interface FilterStageOptions<P extends object = StageParams> {
  /** the stage's name, as readers give it in `via` */
  name: string;
  /** checks and completes a reader's params (StageDefinition.params): `create` finds the result in `ctx.params` */
  params?: StageDefinition<P>['params'];
  /** the track filtered (default 'video'); the other passes as it is */
  kind?: 'video' | 'audio';
  /**
   * The predicate of one running instance (one per stream and params): true keeps the unit. It runs on the
   * publisher's path for every unit of the track, so it is cheap and synchronous; a throw drops the unit (logged).
   * A video filter that drops a key frame should drop the frames that follow it up to the next kept key frame
   * (they cannot be decoded without it).
   */
  create(ctx: StageContext<P>): (unit: AccessUnit) => boolean;
}

/** A stage that keeps the units of one track its predicate keeps, by reference, and passes the other track. */
export function filterStage<P extends object = StageParams>(opts: FilterStageOptions<P>): StageDefinition<P> {
  const kind = opts.kind ?? 'video';
  return {
    name: opts.name,
    params: opts.params,
    passes: [kind === 'video' ? 'audio' : 'video'],
    start(ctx) {
      const keep = opts.create(ctx);
      const out = ctx.output;
      const log: Logger = ctx.log;
      let failed = 0;
      // (see the header) what the reader gets before its second turn is copied
      let starting = true;
      const started = setImmediate(() => {
        starting = false;
      });
      let track: TrackInfo | undefined;
      const tracks = (list: ReadonlyArray<TrackInfo>): void => {
        for (const t of list) {
          if (t.kind !== kind || t === track) continue;
          track = t;
          out.setTrack(t);
        }
      };
      const sub = ctx.input.subscribe(
        {
          tracks,
          write(u) {
            let kept: boolean;
            try {
              kept = keep(u);
            } catch (err) {
              // the first failures say why; a predicate failing on every unit must not flood the log
              if (++failed <= 3) log.warn({ err: (err as Error | undefined)?.message ?? String(err) }, 'filter stage predicate threw: unit dropped');
              return;
            }
            if (kept) out.push(starting ? withPayload(u, Buffer.from(u.payload)) : u);
          },
          holdsPayloads: () => false,
          // the input closed (the bus closes this stage's stream then), or this reader was ended as stuck
          end: (reason) => {
            if (!ctx.input.closed) ctx.fail(reason);
          },
        },
        { media: kind === 'video' ? 'v' : 'a' },
      );
      // the track now, not from the reader's first call: a reader of the stage's stream that joins now finds it
      tracks(ctx.input.tracks);
      return {
        stop() {
          clearImmediate(started);
          sub.close();
        },
      };
    },
  };
}
