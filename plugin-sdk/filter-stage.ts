/**
 * A stage that keeps some units of one track and drops the rest (key frames only, one frame in N, audio muted past a
 * time): `filterStage({ name, create })`, where `create` gives each running instance its keep/drop predicate.
 *
 * The stage reads nothing and copies nothing: both tracks pass through the bus (StageDefinition.passes), and the
 * predicate is the instance's `keep`, which the bus asks for each unit of the filtered track as it passes it on, the
 * input's GOP at the stage's start included. Kept units are the input's own objects on the input's numbering, so
 * the input's payload memory (Publisher.alloc) is reused exactly as if the stage's readers read the input.
 */
import type { Logger } from 'pino';
import type { StageContext, StageDefinition, StageParams } from './bus';
import type { AccessUnit } from './media';

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
    passes: ['video', 'audio'],
    start(ctx) {
      const predicate = opts.create(ctx);
      const log: Logger = ctx.log;
      let failed = 0;
      return {
        keep(u: AccessUnit): boolean {
          if (u.kind !== kind) return true;
          try {
            return predicate(u);
          } catch (err) {
            // the first failures say why; a predicate failing on every unit must not flood the log
            if (++failed <= 3) log.warn({ err: (err as Error | undefined)?.message ?? String(err) }, 'filter stage predicate threw: unit dropped');
            return false;
          }
        },
        stop() {
          // nothing held: the bus unlinks the stage's stream
        },
      };
    },
  };
}
