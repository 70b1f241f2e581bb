/**
 * Example stage: a stream's key frames only (a preview that costs a frame a second), audio as it is. Any play asks for
 * it with `via=video-thinner` in its URL (`http://…/live/{stream}.flv?reqId=…&token=…&via=video-thinner`), and a bus
 * reader with `subscribe(sink, { via: 'video-thinner' })`, or `{ via: { stage: 'video-thinner', params: { every: 5 } } }`
 * for one key frame in five.
 *
 * `filterStage` keeps what the predicate keeps, by reference (no copy, payload reuse stays on), and the bus passes
 * the audio. The bus runs one instance per (stream, params) while some reader wants it.
 */
import { definePlugin, filterStage } from '../..';

/** the stage's params, as its check completes them: `ctx.params.every` is a number */
export interface ThinnerParams {
  /** keep one key frame in this many (default 1: every key frame) */
  every: number;
}

export function thinnerParams(given: Readonly<Record<string, unknown>>): ThinnerParams {
  const every = given.every ?? 1;
  if (typeof every !== 'number' || !Number.isInteger(every) || every < 1 || every > 100) {
    throw new TypeError('video-thinner: every must be an integer from 1 to 100');
  }
  return { every };
}

export default definePlugin({
  name: 'video-thinner',
  setup(ctx) {
    // hot: added to on the publisher's path, folded in at scrape time
    const kept = ctx.metrics.hotCounter('key_frames_total', 'key frames the video-thinner stage kept').child({});
    ctx.bus.registerStage(
      filterStage<ThinnerParams>({
        name: 'video-thinner',
        params: thinnerParams,
        create({ params }) {
          let seen = -1;
          return (unit) => {
            if (!unit.keyframe || ++seen % params.every !== 0) return false;
            kept.add(1);
            return true;
          };
        },
      }),
    );
  },
});
