import { aacVia, definePlugin, mediaTypOf, type AudioCodec, type ReaderOptions } from '../../plugin-sdk';
import type { HotCounter } from '../../plugin-sdk';
import { AudioSkips } from './src/audio-skips';
import { FlvOutConfig } from './src/config';
import { createFlvFormats } from './src/flv-format';
import { APP, FlvServer } from './src/server';
import { TickFlush } from './src/tick';
import { FLV_PLAYERS } from './service';

export { FlvOutConfig };

const LATENCY_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * HTTP-FLV and WS-FLV players for fmt 0, on flv-out's own port. Each player is a bus subscriber of the FLV format:
 * a stream's units are framed once (by one encoder per stream) for all its players; the bus's GOP cache starts a
 * joiner and its bounded per-reader queue holds back, skips or drops a slow one.
 */
const inc = (c: HotCounter) => ({ inc: () => c.add(1) });

export default definePlugin({
  name: 'flv-out',
  config: FlvOutConfig,
  env: { port: 'GW_FLV_PORT' },
  provides: [FLV_PLAYERS],
  async setup(ctx) {
    const c = ctx.config;
    const m = ctx.metrics;
    // both written per unit: hot metrics, folded into the registry at scrape time
    const tags = m.hotCounter('tags_total', 'FLV tags made (once per stream, whatever the number of players)', ['type']);
    const latency = m.hotHistogram(
      'added_latency_seconds',
      "time from a frame's arrival at the gateway (its last packet read) to its FLV tags handed to the players' sockets",
      LATENCY_BUCKETS,
    );
    const refused = m.counter('plays_refused_total', 'play attempts refused (unknown reqId or wrong token, or a via that names no stage)');
    // (hot: a stream without audio-aac skips 50 units a second)
    const audioSkipped = m.hotCounter('audio_skipped_total', 'audio units left out of the FLV (a codec FLV cannot carry, or not in audioCodecs)').child({});
    const skips = new AudioSkips(ctx.log, c.audioCodecs, ctx.bus);
    let streams = 0;
    const formats = createFlvFormats(
      {
        audioCodecs: c.audioCodecs,
        tags: { video: inc(tags.child({ type: 'video' })), audio: inc(tags.child({ type: 'audio' })), script: inc(tags.child({ type: 'script' })) },
        audioSkipped: inc(audioSkipped),
        audioSkipStarted: (stream, codec) => skips.note(stream, codec),
        encoders: (d) => {
          streams += d;
        },
      },
      ctx.bus,
    );

    const http = await ctx.net.listenHttp({ port: c.port, host: c.host, key: 'port', tls: c.tls, route: 'stream-path' });
    const schemes = c.schemes ?? (http.tls ? ['https', 'wss'] : ['http', 'ws']);
    if (http.tls && schemes.some((x) => x === 'http' || x === 'ws')) {
      throw new Error(
        `key schemes: this port serves TLS only (the site's tlsCertFile), so ${schemes.filter((x) => x === 'http' || x === 'ws').join(', ')} URLs would not play; list https, wss or set tls: false`,
      );
    }
    // G.711 listed in audioCodecs is what a site's own players take as received: the AAC stage passes it on
    const keep = c.audioCodecs.filter((x) => x !== 'aac') as AudioCodec[];
    const readFor = (reqId: string): Pick<ReaderOptions<unknown>, 'media' | 'via'> => {
      const r = ctx.sessions.getRequest(reqId);
      if (!r) return {};
      const media = mediaTypOf(r.params.typ, r.params.dataTyp);
      if (media === 'v' || c.audio !== 'aac') return { media };
      return { media, via: aacVia(ctx.bus, r.params.audioCfg, keep) };
    };
    const server = new FlvServer({
      log: ctx.log,
      requestLog: ctx.requestLog,
      sessions: ctx.sessions,
      bus: ctx.bus,
      formats,
      tick: new TickFlush(latency),
      maxBacklogBytes: c.maxPlayerBacklogBytes,
      refused: () => refused.inc(),
      readFor,
    });
    server.mount(http);
    m.gauge('players', 'connected FLV players', [], (g) => g.set(server.playerCount));
    m.gauge('bytes_out', 'bytes sent to FLV players', [], (g) => g.set(server.bytesOut));
    m.gauge('streams', 'streams with FLV players (an FLV encoder running)', [], (g) => g.set(streams));

    const publicPort = c.publicPort ?? http.port;
    ctx.sessions.registerOutput({
      name: 'flv-out',
      fmt: 0,
      schemes,
      playUrl: ({ streamName, reqId, token, scheme, host }) =>
        `${scheme}://${host}:${publicPort}/${APP}/${streamName}.flv?reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}`,
    });
    // a request's players go with it; the stream's closing ends every player through the bus
    ctx.sessions.onRequestClosed((r) => server.closeRequest(r.reqId));
    ctx.services.provide(FLV_PLAYERS, { port: http.port, playerStats: () => server.playerStats() });

    ctx.log.info({ port: http.port, schemes, tls: http.tls }, 'FLV players served');
    return { stop: () => server.stop() };
  },
});
