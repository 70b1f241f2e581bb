import { performance } from 'node:perf_hooks';
import { ArrayNotEmpty, IsArray, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { definePlugin, type AccessUnit, type ChannelStream, type FlvPublisher, type FlvTag, type Subscription, type TrackInfo } from '../../plugin-sdk';
import { FlvMuxer } from '../../plugin-sdk/formats/flv';
import { FLV_MAX_GOP_TAGS } from '../../plugin-sdk/flv-server';

/** the audio codecs FLV can carry */
const FLV_AUDIO_CODECS = ['aac', 'g711a', 'g711u'] as const;
type FlvAudioCodec = (typeof FLV_AUDIO_CODECS)[number];

export class FlvOutConfig {
  /** HTTP-FLV and WS-FLV port (decisions.md: 7081) */
  @IsInt() @Min(0) @Max(65535)
  port = 7081;

  @IsOptional() @IsString()
  host: string | undefined = undefined;

  /** port written into play URLs when a TLS front or NAT publishes this server elsewhere (default: port) */
  @IsOptional() @IsInt() @Min(1) @Max(65535)
  publicPort: number | undefined = undefined;

  /** schemes play URLs may use; add https/wss only when a TLS front serves them */
  @IsArray() @ArrayNotEmpty() @IsIn(['http', 'ws', 'https', 'wss'], { each: true })
  schemes: string[] = ['http', 'ws'];

  /** a player whose unsent backlog passes this skips to the next keyframe; past 4x it is dropped */
  @IsInt() @Min(64 * 1024)
  maxPlayerBacklogBytes = 2 * 1024 * 1024;

  /** GOP cache per stream for late joiners */
  @IsInt() @Min(64 * 1024)
  maxGopCacheBytes = 8 * 1024 * 1024;

  /**
   * Audio codecs put into the FLV; the rest is left out and counted. G.711 is out by default: browser players
   * (mpegts.js, flv.js) cannot decode it and, told by the FLV that audio is coming, never start the video either.
   */
  @IsArray() @IsIn(FLV_AUDIO_CODECS, { each: true })
  audioCodecs: FlvAudioCodec[] = ['aac'];
}

const APP = 'live';

interface Feed {
  muxer: FlvMuxer;
  publisher: FlvPublisher;
  sub: Subscription;
}

/**
 * A stream's GOP so far, for players that join mid-stream: what the muxer was fed since the latest video
 * keyframe (the bus's AccessUnits, by reference, and track changes) and a fork of the muxer taken at that
 * keyframe. Muxing them again through a fork of the fork gives the join the same tags, timestamps included,
 * as the live ones. The FLV server then keeps no GOP of tags: the frames are held once, not twice.
 */
interface Gop {
  start: FlvMuxer;
  fed: Array<AccessUnit | readonly TrackInfo[]>;
  /** what the live tags of this GOP came to: over the server's cache bounds, late joiners wait for the next keyframe */
  bytes: number;
  tags: number;
}

function replayGop(gop: Gop | undefined): FlvTag[] {
  if (!gop) return [];
  const m = gop.start.fork();
  const out: FlvTag[] = [];
  for (const x of gop.fed) {
    if ('payload' in x) for (const tag of m.push(x)) out.push(tag);
    else for (const t of x) m.setTrack(t);
  }
  return out;
}

/**
 * HTTP-FLV and WS-FLV players (through node-media-server) for fmt 0. One bus subscription per channel stream feeds
 * one NMS publisher; NMS fans it out to players, each with its own bounded backlog.
 */
export default definePlugin({
  name: 'flv-out',
  config: FlvOutConfig,
  env: { port: 'GW_FLV_PORT' },
  async setup(ctx) {
    const flv = await ctx.flvServer({
      port: ctx.config.port, host: ctx.config.host, key: 'port',
      maxPlayerBacklogBytes: ctx.config.maxPlayerBacklogBytes, maxGopCacheBytes: ctx.config.maxGopCacheBytes,
    });
    const publicPort = ctx.config.publicPort ?? flv.port;
    const feeds = new Map<string, Feed>();
    const playersByReq = new Map<string, number>();
    const refused = ctx.metrics.counter('plays_refused_total', 'play attempts refused (unknown reqId or wrong token)');
    const tags = ctx.metrics.counter('tags_total', 'FLV tags handed to node-media-server', ['type']);
    // label children resolved once: a labelled inc() hashes its label object on every call, and this runs per tag
    const tagsByType = { video: tags.labels('video'), audio: tags.labels('audio'), script: tags.labels('script') };
    const latency = ctx.metrics.histogram(
      'added_latency_seconds',
      'time from a frame\'s arrival at the gateway (its last packet read) to its FLV tags handed to the players\' sockets',
      [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    );
    ctx.metrics.gauge('players', 'connected FLV players', [], (g) => g.set(flv.stats().players));
    ctx.metrics.gauge('bytes_out', 'bytes sent to FLV players', [], (g) => g.set(flv.stats().bytesOut));
    ctx.metrics.gauge('streams', 'channel streams published to players', [], (g) => g.set(feeds.size));

    ctx.sessions.registerOutput({
      name: 'flv-out',
      fmt: 0,
      schemes: ctx.config.schemes,
      playUrl: ({ streamName, reqId, token, scheme, host }) =>
        `${scheme}://${host}:${publicPort}/${APP}/${streamName}.flv?reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}`,
    });

    flv.setPlayAuthorizer((p) => {
      const ok = p.app === APP && !!ctx.sessions.authorizePlay(p.stream, p.query.reqId ?? '', p.query.token ?? '');
      if (!ok) {
        refused.inc();
        ctx.log.warn({ stream: p.stream, reqId: p.query.reqId, remote: p.remote, protocol: p.protocol }, 'play refused: unknown request or wrong token');
      }
      return ok;
    });
    flv.onPlayer('start', (p) => {
      const reqId = p.query.reqId ?? '';
      playersByReq.set(reqId, (playersByReq.get(reqId) ?? 0) + 1);
      ctx.sessions.playerStarted(reqId);
      ctx.log.info({ stream: p.stream, reqId, remote: p.remote, protocol: p.protocol }, 'player started');
    });
    flv.onPlayer('stop', (p) => {
      const reqId = p.query.reqId ?? '';
      playersByReq.set(reqId, Math.max(0, (playersByReq.get(reqId) ?? 1) - 1));
      ctx.sessions.playerStopped(reqId);
      ctx.log.info({ stream: p.stream, reqId, remote: p.remote }, 'player stopped');
    });

    const audioSkipped = ctx.metrics.counter('audio_skipped_total', 'audio units left out of the FLV (a codec FLV cannot carry, or not in audioCodecs)');
    /** streams whose left-out audio was logged already: once per stream and codec, not per unit */
    const audioSkipLogged = new Set<string>();
    const noteSkippedAudio = (stream: string, codec: string) => {
      audioSkipped.inc();
      const key = `${stream}/${codec}`;
      if (audioSkipLogged.has(key)) return;
      audioSkipLogged.add(key);
      const why = !FLV_AUDIO_CODECS.includes(codec as never) ? 'FLV cannot carry it (no transcoding yet)'
        : ctx.config.audioCodecs.includes(codec as never) ? 'no usable AAC config yet'
        : `not in audioCodecs ${JSON.stringify(ctx.config.audioCodecs)}`;
      ctx.log.info({ stream, codec, why }, 'audio left out of the FLV; players get video only');
    };

    const startFeed = (s: ChannelStream) => {
      if (feeds.has(s.name)) return;
      const muxer = new FlvMuxer({ audioCodecs: ctx.config.audioCodecs });
      let gop: Gop | undefined;
      const publisher = flv.publish(APP, s.name, { joinTags: () => replayGop(gop) });
      const sub = s.media.subscribe({
        tracks(list) {
          for (const t of list) muxer.setTrack(t);
          gop?.fed.push(list); // (the bus hands a new list on each change, never the same one changed)
        },
        write(au) {
          const out = muxer.push(au);
          if (out.some((t) => t.type === 9 && t.keyframe)) {
            // forked after the keyframe went through: fed it again, the fork makes the same keyframe tag (its
            // clock is at that timestamp already), minus the sequence header, which the server caches anyway
            gop = { start: muxer.fork(), fed: [], bytes: 0, tags: 0 };
          }
          if (gop) {
            gop.fed.push(au);
            // counted like the server's own cache, the few config tags aside (11-byte header + 4-byte size each)
            for (const tag of out) gop.bytes += tag.body.length + 15;
            gop.tags += out.length;
            if (gop.bytes > ctx.config.maxGopCacheBytes || gop.tags > FLV_MAX_GOP_TAGS) gop = undefined;
          }
          if (out.length === 0) {
            if (au.kind === 'audio') noteSkippedAudio(s.name, au.codec);
            return;
          }
          for (const tag of out) {
            publisher.sendTag(tag);
            (tag.type === 9 ? tagsByType.video : tag.type === 8 ? tagsByType.audio : tagsByType.script).inc();
          }
          // sendTag returns after node-media-server wrote the tag to every player, so this is the full added delay
          if (au.receivedAt !== undefined) latency.observe((performance.now() - au.receivedAt) / 1000);
        },
        end: () => stopFeed(s.name),
      });
      feeds.set(s.name, { muxer, publisher, sub });
    };
    const stopFeed = (name: string) => {
      const f = feeds.get(name);
      if (!f) return;
      feeds.delete(name);
      for (const key of [...audioSkipLogged]) if (key.startsWith(name + '/')) audioSkipLogged.delete(key);
      f.sub.close();
      f.publisher.end();
      flv.closePlayers(APP, name);
      const st = f.muxer.stats;
      if (st.skippedAudio) ctx.log.info({ stream: name, skippedAudio: st.skippedAudio, codecs: st.skippedAudioCodecs }, 'audio FLV cannot carry, or not in audioCodecs, was left out');
    };

    ctx.sessions.onRequestOpened((r, s) => {
      if (r.params.fmt === 0) startFeed(s);
    });
    ctx.sessions.onRequestClosed((r) => {
      if (r.params.fmt !== 0) return;
      // players of this request go; the channel's other requests keep theirs
      flv.closePlayers(APP, r.streamName, (p) => p.query.reqId === r.reqId);
      playersByReq.delete(r.reqId);
    });
    ctx.sessions.onStreamClosed((s) => stopFeed(s.name));

    // bytes out per stream for GET /strm/status, from the players' running totals
    const lastBytes = new Map<string, number>();
    const cancelBytes = ctx.clock.setInterval(() => {
      const seen = new Set<string>();
      for (const p of flv.playerStats()) {
        seen.add(p.id);
        const delta = p.bytesOut - (lastBytes.get(p.id) ?? 0);
        lastBytes.set(p.id, p.bytesOut);
        if (delta > 0) ctx.sessions.addBytesOut(p.stream, delta);
      }
      for (const id of lastBytes.keys()) if (!seen.has(id)) lastBytes.delete(id);
    }, 1000);

    ctx.log.info({ port: flv.port, schemes: ctx.config.schemes }, 'FLV players served');
    return {
      stop() {
        cancelBytes();
        for (const name of [...feeds.keys()]) stopFeed(name);
      },
    };
  },
});
