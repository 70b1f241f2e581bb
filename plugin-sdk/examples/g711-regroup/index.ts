/**
 * Example stage and the output that reads it. Terminals send G.711 in whatever frame size they like (40 ms, 64 ms,
 * sometimes uneven); RTP and WebRTC want a fixed packet time. The stage `g711-frames` re-cuts a stream's G.711
 * audio into frames of `ms` milliseconds, timed exactly from the samples (8 ticks per ms), and passes video
 * through untouched. The bus runs one instance per (stream, ms) while some reader wants it.
 *
 * The output, `GET /g711/{stream}?reqId&token&ms=20` on the API port, streams that audio as raw G.711 bytes.
 */
import { audioStage, audioUnit, definePlugin, type AccessUnit, type AudioTransform, type StageRef } from '../../index';

const SAMPLES_PER_MS = 8;

/** The stage's params: frame length in ms, 10..60, default 20. */
function frameMs(given: Readonly<Record<string, unknown>>): { ms: number } {
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
        out.push(audioUnit({ codec: u.codec, dts: nextTicks / SAMPLES_PER_MS, timescale: 8000, duration: bytes, payload: Buffer.from(carry.subarray(0, bytes)), receivedAt: u.receivedAt }));
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
    ctx.bus.registerStage(audioStage({
      name: 'g711-frames',
      params: frameMs,
      create: ({ params }) => regrouper((params.ms as number) * SAMPLES_PER_MS, () => frames.inc()),
    }));

    ctx.routes.raw('GET', '/g711/*', (req, res) => {
      const name = req.rest;
      const request = ctx.sessions.authorizePlay(name, req.query.get('reqId') ?? '', req.query.get('token') ?? '');
      const stream = request && ctx.sessions.getStreamByName(name);
      if (!request || !stream) {
        res.writeHead(401, { 'content-type': 'text/plain' }).end('unauthorized\n');
        return;
      }
      const via: StageRef = { stage: 'g711-frames', params: { ms: Number(req.query.get('ms') ?? 20) } };
      let player: ReturnType<typeof ctx.sessions.attachPlayer>;
      try {
        const sub = stream.media.subscribe({
          tracks(list) {
            if (!res.headersSent && list.length) res.writeHead(200, { 'content-type': list[0].codec === 'g711u' ? 'audio/PCMU' : 'audio/PCMA' });
          },
          write(unit) {
            if (!res.headersSent) res.writeHead(200, { 'content-type': 'audio/PCMA' });
            res.write(unit.payload);
            player?.sent(unit.payload.length);
          },
          writable: () => res.writableLength < 64 * 1024,
          end: () => res.end(),
        }, { via, media: 'a' });
        res.on('drain', () => sub.resume());
        res.on('close', () => { sub.close(); player?.close(); });
      } catch (err) {
        // bad params: the stage refused them
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`);
        return;
      }
      player = ctx.sessions.attachPlayer(request.reqId, { protocol: 'g711-http', remote: req.remote });
    }, { auth: 'none' });
  },
});
