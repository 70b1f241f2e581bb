/**
 * Example output: a request's video as raw Annex-B H.264 over HTTP, on a port of the plugin's own. Written only
 * against the SDK: the bus does the GOP cache, the slow-reader policy and late joiners; the sessions do auth and
 * players; this file only turns units into bytes on a socket.
 */
import type { ServerResponse } from 'node:http';
import { IsInt, Max, Min } from 'class-validator';
import { definePlugin } from '../../index';
import { parameterSetsAnnexB } from '../../formats';

export class AnnexbHttpConfig {
  @IsInt() @Min(0) @Max(65535)
  port = 7090;
  /** bytes a player may have in flight before the bus queues for it (and past its cap, skips a GOP) */
  @IsInt() @Min(16 * 1024)
  socketHighWater = 256 * 1024;
}

export default definePlugin({
  name: 'annexb-http',
  config: AnnexbHttpConfig,
  async setup(ctx) {
    const http = await ctx.net.listenHttp({ port: ctx.config.port, key: 'port' });
    const players = new Map<string, Set<ServerResponse>>();
    const refused = ctx.metrics.counter('plays_refused_total', 'plays refused (unknown request or wrong token)');
    ctx.metrics.gauge('players', 'players connected', [], (g) => g.set([...players.values()].reduce((n, s) => n + s.size, 0)));

    // no fmt: the URL goes into every open result as urls["annexb-http"]
    ctx.sessions.registerOutput({
      name: 'annexb-http',
      schemes: ['http'],
      playUrl: (a) => `http://${a.host}:${http.port}/annexb/${a.streamName}.h264?reqId=${encodeURIComponent(a.reqId)}&token=${encodeURIComponent(a.token)}`,
    });

    http.routes.raw('GET', '/annexb/*', (req, res) => {
      const name = req.rest.replace(/\.h264$/, '');
      const request = ctx.sessions.authorizePlay(name, req.query.get('reqId') ?? '', req.query.get('token') ?? '');
      const stream = request && ctx.sessions.getStreamByName(name);
      const player = request && ctx.sessions.attachPlayer(request.reqId, { protocol: 'annexb-http', remote: req.remote });
      if (!request || !stream || !player) {
        refused.inc();
        ctx.log.warn({ stream: name, remote: req.remote }, 'play refused');
        res.writeHead(401, { 'content-type': 'text/plain' }).end('unauthorized\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'video/h264', 'cache-control': 'no-store' });
      // video only; the bus starts it at the latest keyframe, after the track's parameter sets (a unit carries only
      // those its source sent with it): written first, and again when the track changes
      let sets: Buffer | undefined;
      const sub = stream.media.subscribe({
        tracks(list) {
          const v = list.find((t) => t.kind === 'video');
          if (v?.kind === 'video') sets = parameterSetsAnnexB(v);
        },
        write(unit) {
          if (sets !== undefined && sets.length > 0) {
            res.write(sets);
            player.sent(sets.length);
          }
          sets = undefined;
          res.write(unit.payload);
          player.sent(unit.payload.length);
        },
        writable: () => res.writableLength < ctx.config.socketHighWater,
        end: () => res.end(),
      }, { media: 'v' });
      res.on('drain', () => sub.resume());
      const mine = players.get(request.reqId) ?? new Set();
      players.set(request.reqId, mine.add(res));
      res.on('close', () => {
        sub.close();
        player.close();
        mine.delete(res);
        if (mine.size === 0 && players.get(request.reqId) === mine) players.delete(request.reqId);
      });
    }, { auth: 'none' });

    // a closed request takes its players with it
    ctx.sessions.onRequestClosed((r) => {
      for (const res of players.get(r.reqId) ?? []) res.end();
    });

    return {
      stop() {
        for (const set of players.values()) for (const res of set) res.destroy();
      },
    };
  },
});
