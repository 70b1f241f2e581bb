import { ByteTotal, aacVia, definePlugin, invalidParam, mediaTypOf, type AudioCodec, type ReaderOptions } from '../../plugin-sdk';
import { RtmpConfig } from './src/config';
import { createRtmpFormats, type RtmpFrame } from './src/rtmp-format';
import { PLAY_APP, PUBLISH_APP, RtmpServer } from './src/server';
import { setupRelays } from './src/relay';
import { RTMP_SERVER } from './service';
import { API_DOCS } from '../../plugin-sdk';

export { RtmpConfig };

/**
 * RTMP on node-media-server's protocol code (handshake, chunk stream, AMF0 commands), with our bus, limits and
 * authorisation around it:
 * - play: fmt 0 with scheme `rtmp` gives `rtmp://host:port/live/{stream}?reqId&token`; any open request's token
 *   plays it, as the FLV URL. H.264 and AAC (through the site's AAC stage); H.265 as Enhanced RTMP to clients that
 *   say they read it.
 * - publish in: an encoder publishing `rtmp://host:port/push/{simNo}_{chanId}?key=…` feeds that application's live
 *   virtual channel, which opens address like a terminal's.
 */
export default definePlugin({
  name: 'rtmp',
  config: RtmpConfig,
  env: { port: 'GW_RTMP_PORT' },
  provides: [RTMP_SERVER],
  uses: [API_DOCS],
  async setup(ctx) {
    const c = ctx.config;
    const m = ctx.metrics;
    for (const [i, k] of c.publishKeys.entries()) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the site's JSON can put anything in this array: this is its check
      if (typeof k?.appId !== 'string' || typeof k.key !== 'string' || k.key.length < 8) {
        throw new Error(`config key publishKeys[${i}]: give { appId, key } with a key of at least 8 characters`);
      }
    }
    const messages = m.hotCounter('messages_total', 'RTMP media messages made (once per stream, whatever the number of players)', []).child({});
    const refused = m.counter('refused_total', 'plays and publishes refused (unknown request, wrong token or key, bad name)', ['what']);
    const dropped = m.counter('dropped_total', 'connections dropped for breaking the protocol or a limit, or for going quiet');
    const badMedia = m.counter('bad_media_total', 'publishers dropped for media that does not parse');
    const moved = m.counter('connections_moved_total', 'with workers: connections moved to the worker of their stream once their play or publish named it');
    // added to on every message: see ByteTotal
    const bytesIn = new ByteTotal();
    const bytesOut = new ByteTotal();
    let streams = 0;
    const formats = createRtmpFormats({
      audioCodecs: c.audioCodecs,
      encoders: (d) => {
        streams += d;
      },
      messages: (n) => messages.add(n),
    });
    const keep = c.audioCodecs.filter((x) => x !== 'aac') as AudioCodec[];
    const readFor = (reqId: string): Pick<ReaderOptions<RtmpFrame>, 'media' | 'via'> => {
      const r = ctx.sessions.getRequest(reqId);
      if (!r) return {};
      const media = mediaTypOf(r.params.typ, r.params.dataTyp);
      if (media === 'v') return { media };
      return { media, via: aacVia(ctx.bus, r.params.audioCfg, keep) };
    };
    const server = new RtmpServer({
      log: ctx.log,
      requestLog: ctx.requestLog,
      sessions: ctx.sessions,
      net: ctx.net,
      config: c,
      formats,
      now: () => ctx.clock.now(),
      readFor,
      counts: {
        refused: (what) => refused.inc({ what }),
        dropped: () => dropped.inc(),
        bytesIn: (n) => bytesIn.add(n),
        bytesOut: (n) => bytesOut.add(n),
        badMedia: () => badMedia.inc(),
        moved: () => moved.inc(),
      },
    });
    // with workers, a connection starts on any worker and moves to its stream's once its play or publish names it
    const tcp = await ctx.net.listenTcp({ port: c.port, host: c.host, key: 'port', route: 'late' }, (socket) => server.onConnection(socket));
    const addr = tcp.address();
    const port = typeof addr === 'object' && addr ? addr.port : c.port;
    const publicPort = c.publicPort ?? port;
    m.gauge('players', 'connected RTMP players', [], (g) => g.set(server.playerCount));
    m.gauge('publishers', 'RTMP encoders publishing', [], (g) => g.set(server.publisherCount));
    m.gauge('streams', 'streams with RTMP players (an RTMP encoder of the bus running)', [], (g) => g.set(streams));
    m.gauge('bytes_in', 'bytes read from RTMP clients', [], (g) => g.set(bytesIn.n));
    m.gauge('bytes_out', 'media bytes sent to RTMP players', [], (g) => g.set(bytesOut.n));

    ctx.sessions.registerOutput({
      name: 'rtmp',
      fmt: 0,
      schemes: ['rtmp'],
      playUrl: ({ streamName, reqId, token, host }) =>
        `rtmp://${host}:${publicPort}/${PLAY_APP}/${streamName}?reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}`,
    });
    // an open of a channel another application's encoder publishes would show that application's media
    ctx.sessions.addOpenGuard((app, params) => {
      if (params.typ !== 'live' || params.rtspSrc) return;
      const owner = server.publisherApp(`${params.normSim}_${params.chanId}_1`);
      if (owner !== undefined && owner !== app.appId) throw invalidParam('simNo', 'Another application publishes this channel over RTMP.');
    });
    ctx.sessions.onStreamOpened((s) => {
      if (s.typ === 'live')
        server.streamOpened(
          s.name,
          s.media,
          s.requests.map((r) => r.appId),
        );
    });
    ctx.sessions.onRequestClosed((r) => server.closeRequest(r.reqId));
    ctx.services.provide(RTMP_SERVER, {
      port,
      publishUrl: (appId, simNo, chanId) => {
        const key = c.publishKeys.find((k) => k.appId === appId)?.key;
        return key === undefined ? undefined : `rtmp://${ctx.site.publicHost}:${publicPort}/${PUBLISH_APP}/${simNo}_${chanId}?key=${encodeURIComponent(key)}`;
      },
      playerStats: () => server.playerStats(),
      publisherStats: () => server.publisherStats(),
    });
    ctx.log.info({ port, publishKeys: c.publishKeys.length }, 'RTMP served');
    const relays = setupRelays(ctx, formats);
    return {
      stop: () => {
        relays.stop();
        server.stop();
      },
    };
  },
});
