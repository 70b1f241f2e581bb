/**
 * Example stage and the output that reads it. Terminals send G.711 in whatever frame size they like (40 ms, 64 ms,
 * sometimes uneven); RTP and WebRTC want a fixed packet time. The stage `g711-frames` re-cuts a stream's G.711
 * audio into frames of `ms` milliseconds, timed exactly from the samples (8 ticks per ms), and passes video
 * through untouched. The bus runs one instance per (stream, ms) while some reader wants it.
 *
 * The output, `GET /g711/{stream}?reqId&token&ms=20` on the API port, streams that audio as raw G.711 bytes.
 */
import { audioStage, audioUnit, definePlugin, httpPlayerSocket, servePlays, type AccessUnit, type AudioTransform } from '../..';

const SAMPLES_PER_MS = 8;

/** The stage's params: frame length in ms, 10..60, default 20. */
export function frameMs(given: Readonly<Record<string, unknown>>): { ms: number } {
  const ms = given.ms ?? 20;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 10 || ms > 60) throw new TypeError('g711-frames: ms must be an integer from 10 to 60');
  return { ms };
}

/** Re-cuts G.711 frames into `bytes`-sized ones; a gap in the input starts the timeline again from the input. */
export function regrouper(bytes: number, counted: () => void): AudioTransform {
  let carry: Buffer = Buffer.alloc(0);
  let nextTicks = -1;
  return {
    track: (t) => (t.codec === 'g711a' || t.codec === 'g711u' ? { ...t, frameSamples: bytes } : undefined),
    unit(u) {
      if (u.codec !== 'g711a' && u.codec !== 'g711u') return [];
      const at = Math.round((u.dtsTicks * 8000) / u.timescale);
      // more than a frame away from where the carried samples end: loss or a new publisher, so start over there
      if (nextTicks < 0 || Math.abs(at - (nextTicks + carry.length)) > bytes) {
        carry = Buffer.alloc(0);
        nextTicks = at;
      }
      carry = carry.length ? Buffer.concat([carry, u.payload]) : u.payload;
      const out: AccessUnit[] = [];
      while (carry.length >= bytes) {
        out.push(
          audioUnit({
            codec: u.codec,
            dts: nextTicks / SAMPLES_PER_MS,
            timescale: 8000,
            duration: bytes,
            payload: Buffer.from(carry.subarray(0, bytes)),
            receivedAt: u.receivedAt,
          }),
        );
        carry = carry.subarray(bytes);
        nextTicks += bytes;
        counted();
      }
      return out;
    },
  };
}

export default definePlugin({
  name: 'g711-regroup',
  setup(ctx) {
    const frames = ctx.metrics.counter('frames_total', 'G.711 frames made by the g711-frames stage');
    ctx.bus.registerStage(
      audioStage({
        name: 'g711-frames',
        params: frameMs,
        // (params.ms is a number: frameMs made it)
        create: ({ params }) => regrouper(params.ms * SAMPLES_PER_MS, () => frames.inc()),
      }),
    );

    const plays = servePlays(ctx, { protocol: 'g711-http' });
    ctx.routes.raw(
      'GET',
      '/g711/*',
      (req, res) => {
        const codec = ctx.bus.get(req.rest)?.tracks.find((t) => t.kind === 'audio')?.codec;
        const socket = httpPlayerSocket(res, req, { contentType: codec === 'g711u' ? 'audio/PCMU' : 'audio/PCMA' });
        // bad params (ms=7) make the stage's check throw a TypeError: the play is refused with 400
        plays.play(req, socket, { media: 'a', via: { stage: 'g711-frames', params: { ms: Number(req.query.get('ms') ?? 20) } } });
      },
      { auth: 'none' },
    );
    return plays;
  },
});
