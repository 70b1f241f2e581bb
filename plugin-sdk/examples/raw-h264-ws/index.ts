/**
 * Example output: the H.264 of a request's stream as raw Annex-B over a WebSocket on the API port, one binary message
 * per frame, from the latest key frame on, the track's SPS and PPS sent first and again when they change.
 *
 * `servePlays` does what every play needs: the URL's reqId and token (a wrong one closes the socket with 4401), its
 * `via` (a stage's form of the stream, e.g. `&via=video-thinner`; an unknown one closes it with 4400), the player's
 * count in the request's status, backpressure (the bus queues while the socket holds 64 KiB and skips a GOP for a
 * player too far behind), payload reuse (the socket's backlog says when it holds no frame) and the socket's close
 * when its request closes. This file says where plays come from and which bytes a frame sends.
 */
import { definePlugin, servePlays, wsPlayerSocket } from '../..';
import { parameterSetsAnnexB } from '../../formats';

const PREFIX = '/raw-h264';

export default definePlugin({
  name: 'raw-h264-ws',
  setup(ctx) {
    const plays = servePlays(ctx, { protocol: 'raw-h264-ws' });
    ctx.metrics.gauge('players', 'players connected', [], (g) => g.set(plays.count));

    // auth 'none': the play URL's token is the play's credential
    ctx.routes.websocket(
      `${PREFIX}/*`,
      (ws, req) => {
        plays.play(req, wsPlayerSocket(ws, req), {
          media: 'v',
          // H.265 is not what this output promises: its frames send nothing
          bytes: (unit) => (unit.codec === 'h264' ? unit.payload : undefined),
          // key frames come as the terminal sent them: the parameter sets are the track's
          tracks: (tracks, play) => tracks.forEach((t) => t.kind === 'video' && t.codec === 'h264' && play.send(parameterSetsAnnexB(t))),
        });
      },
      { auth: 'none' },
    );

    // no fmt: the URL goes into every open result and status entry as urls["raw-h264-ws"]
    ctx.sessions.registerOutput({
      name: 'raw-h264-ws',
      schemes: [ctx.site.tls ? 'wss' : 'ws'],
      playUrl: (a) => ctx.routes.url(`${PREFIX}/${a.streamName}`, { host: a.host, scheme: a.scheme, query: { reqId: a.reqId, token: a.token } }),
    });
    ctx.log.info({ url: ctx.routes.url(`${PREFIX}/{stream}`, { scheme: ctx.site.tls ? 'wss' : 'ws' }) }, 'raw H.264 over WebSocket');
    // stop() drops the players (the kernel closes the sockets too)
    return plays;
  },
});
