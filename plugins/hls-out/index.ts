import { definePlugin } from '../../plugin-sdk';
import { HlsOutConfig } from './src/config';
import { HlsForms } from './src/forms';
import { HLS_PREFIX, HlsServer } from './src/server';

export { HlsOutConfig };

/**
 * HLS for fmt 1 on the API port: fMP4 (default, with LL-HLS parts) or MPEG-TS segments of H.264 / H.265 with AAC
 * audio from the AAC stage. Each stream form is cut once by one segmenter (a bus reader) into a bounded live
 * window in memory; players fetch playlists and segments from it.
 */
export default definePlugin({
  name: 'hls-out',
  config: HlsOutConfig,
  setup(ctx) {
    const c = ctx.config;
    const m = ctx.metrics;
    const parts = m.counter('parts_total', 'parts made (once per stream form, whatever the number of players)');
    const segments = m.counter('segments_total', 'segments completed (once per stream form)');
    const memoryDrops = m.counter('memory_drops_total', 'segments dropped early to keep a stream form within maxStreamBytes');
    const leftOut = m.counter('units_left_out_total', 'units left out: audio that is not AAC, video without usable parameter sets');
    const fetches = m.counter('fetches_total', 'HLS fetches, by what was asked', ['kind']);
    const refused = m.counter('fetches_refused_total', 'HLS fetches refused (unknown request or wrong token, or a via that names no stage)');
    const blockTimeouts = m.counter('block_timeouts_total', 'blocking playlist reloads answered 503: the part asked for did not come in time');
    const prepared = m.counter(
      'playlists_prepared_total',
      'playlist texts made: once per change of a stream form that is read, for all its players (fetches_total{kind="playlist"} counts those served)',
    );
    const verdictsKept = m
      .hotCounter(
        'fetches_verdict_kept_total',
        "HLS fetches authorised by their connection's earlier verdict (same request, token and stream; no token digest)",
      )
      .child({});
    const fetched = { playlist: fetches.labels('playlist'), init: fetches.labels('init'), segment: fetches.labels('segment'), part: fetches.labels('part') };

    const forms = new HlsForms(
      c,
      ctx.bus,
      ctx.log,
      {
        parts: () => parts.inc(),
        segments: () => segments.inc(),
        memoryDrops: () => memoryDrops.inc(),
        unitsLeftOut: () => leftOut.inc(),
      },
      (reqId) => ctx.sessions.outputReady(reqId),
    );
    const server = new HlsServer(c, ctx.sessions, ctx.bus, forms, ctx.clock, ctx.log, {
      fetched: (k) => fetched[k].inc(),
      refused: () => refused.inc(),
      blockTimeouts: () => blockTimeouts.inc(),
      verdictKept: () => verdictsKept.add(1),
      playlistPrepared: () => prepared.inc(),
    });
    server.mount(ctx.routes);
    m.gauge('streams', 'stream forms being segmented (one per stream, tracks, audio form and container)', [], (g) => g.set(forms.size));
    m.gauge('players', 'HLS players counted (fetched within playerIdleSec)', [], (g) => g.set(server.players.count));
    m.gauge('parked_fetches', 'fetches held until what they ask for exists (blocking reloads, hinted parts, segments being made, early players)', [], (g) =>
      g.set(server.parking.size),
    );
    m.gauge('memory_bytes', 'media held by all HLS windows (segments, parts, units waiting for their part)', [], (g) => g.set(forms.memory().total));
    m.gauge('largest_stream_bytes', 'media held by the largest HLS window (bounded by maxStreamBytes)', [], (g) => g.set(forms.memory().largest));

    const apiPort = Number(new URL(ctx.site.apiBase).port) || undefined;
    const port = c.publicPort ?? apiPort;
    ctx.sessions.registerOutput({
      name: 'hls-out',
      fmt: 1,
      schemes: c.schemes ?? (ctx.site.tls ? ['https'] : ['http']),
      // ready (open result, status, notice) means playable in HLS: the request's first segment exists
      readyWhen: 'own',
      playUrl: ({ streamName, reqId, token, scheme, host }) =>
        `${scheme}://${host}${port ? `:${port}` : ''}${HLS_PREFIX}/${streamName}/index.m3u8?reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}`,
    });
    ctx.sessions.onRequestOpened((r, s) => forms.requestOpened(r, s));
    ctx.sessions.onRequestClosed((r) => {
      server.players.closeRequest(r.reqId);
      forms.requestClosed(r.reqId);
    });
    ctx.log.info({ lowLatency: c.lowLatency, targetDurationSec: c.targetDurationSec, partTargetSec: c.partTargetSec }, 'HLS served on the API port');
    return {
      stop() {
        server.stop();
        forms.stop();
      },
    };
  },
});
