/**
 * Example output: a request's video as raw Annex-B H.264 over HTTP, on a port of the plugin's own. Written only
 * against the SDK: the bus does the GOP cache, the slow-reader policy and late joiners; `servePlays` does the play
 * URL's token and `via`, the player's count, backpressure, payload reuse and the end with the request; this file says
 * where plays come from and what they read.
 */
import { IsInt, Max, Min } from 'class-validator';
import { definePlugin, httpPlayerSocket, servePlays } from '../..';
import { parameterSetsAnnexB } from '../../formats';

export class AnnexbHttpConfig {
  @IsInt()
  @Min(0)
  @Max(65535)
  port = 7090;
  /** bytes a player may have in flight before the bus queues for it (and past its cap, skips a GOP) */
  @IsInt()
  @Min(16 * 1024)
  socketHighWater = 256 * 1024;
}

export default definePlugin({
  name: 'annexb-http',
  config: AnnexbHttpConfig,
  async setup(ctx) {
    const http = await ctx.net.listenHttp({ port: ctx.config.port, key: 'port' });
    const refused = ctx.metrics.counter('plays_refused_total', 'plays refused (unknown request, wrong token, unknown via stage)');
    const plays = servePlays(ctx, { protocol: 'annexb-http', streamOf: (rest) => rest.replace(/\.h264$/, ''), onRefused: () => refused.inc() });
    ctx.metrics.gauge('players', 'players connected', [], (g) => g.set(plays.count));

    // no fmt: the URL goes into every open result as urls["annexb-http"]
    ctx.sessions.registerOutput({
      name: 'annexb-http',
      schemes: [http.tls ? 'https' : 'http'],
      playUrl: (a) => http.routes.url(`/annexb/${a.streamName}.h264`, { host: a.host, scheme: a.scheme, query: { reqId: a.reqId, token: a.token } }),
    });

    http.routes.raw(
      'GET',
      '/annexb/*',
      (req, res) => {
        const socket = httpPlayerSocket(res, req, { contentType: 'video/h264', highWaterBytes: ctx.config.socketHighWater });
        // video only, from the latest keyframe; the parameter sets are the track's, sent first and at each change
        plays.play(req, socket, { media: 'v', tracks: (tracks, play) => tracks.forEach((t) => t.kind === 'video' && play.send(parameterSetsAnnexB(t))) });
      },
      { auth: 'none' },
    );

    return plays;
  },
});
