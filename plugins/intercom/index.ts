import { closeReasonOf, definePlugin, INTERCOM_TALKS, LogLimiter, TERMINAL_LINKS } from '../../plugin-sdk';
import { IntercomConfig } from './src/config';
import { createMeters } from './src/meters';
import { TalkServer } from './src/server';

export { IntercomConfig };

/**
 * Two-way intercom (live dataTyp 2): taUrl (binary audio over WebSocket) and wsUrl (STOMP 1.2) on the API port.
 * The client's audio goes down the terminal's own push connection through jt1078-ingest's terminal-links service,
 * encoded to the terminal's codec and paced in real time; the terminal's audio comes back on the same socket.
 */
export default definePlugin({
  name: 'intercom',
  config: IntercomConfig,
  requires: ['jt1078-ingest'],
  needs: [TERMINAL_LINKS],
  provides: [INTERCOM_TALKS],
  setup(ctx) {
    const c = ctx.config;
    if (c.jitterMs > c.maxBufferMs) throw new Error(`config key jitterMs: ${c.jitterMs} is over maxBufferMs (${c.maxBufferMs})`);
    if (c.frameMs > c.maxBufferMs) throw new Error(`config key frameMs: ${c.frameMs} is over maxBufferMs (${c.maxBufferMs})`);
    const base = talkBase(c.publicBase, ctx.site.apiBase);
    let server: TalkServer | undefined;
    const meters = createMeters(ctx.metrics, () => server?.count ?? 0);
    server = new TalkServer({
      sessions: ctx.sessions,
      log: ctx.log,
      requestLog: ctx.requestLog,
      limiter: new LogLimiter({ intervalMs: 10_000, now: () => ctx.clock.now() }),
      meters,
      talkerHost: {
        config: c,
        sessions: ctx.sessions,
        links: ctx.services.get(TERMINAL_LINKS),
        meters,
        log: ctx.log,
        requestLog: ctx.requestLog,
        now: () => ctx.clock.now(),
      },
      stompHeartBeatMs: c.stompHeartBeatMs,
      maxMessageBytes: c.maxMessageBytes,
      setInterval: (fn, ms) => ctx.clock.setInterval(fn, ms),
    });
    const talk = server;
    talk.mount(ctx.routes);
    ctx.services.provide(INTERCOM_TALKS, { start: (req, o, conn) => talk.external(req, o.fmt, o.protocol, o.remote, conn) });
    ctx.sessions.registerTalk({
      name: 'intercom',
      talkUrls: ({ streamName, reqId, token }) => {
        const q = `reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}`;
        return { taUrl: `${base}/talk/${streamName}?${q}`, wsUrl: `${base}/talk-stomp?${q}` };
      },
    });
    ctx.sessions.onRequestClosed((r, cause) => talk.requestClosed(r.reqId, closeReasonOf[cause]));
    // one clock for every talker: half a frame, so a slot is never more than that late
    const cancelPacer = ctx.clock.setInterval(
      () => {
        if (talk.count > 0) talk.tick(ctx.clock.now());
      },
      Math.max(5, Math.floor(c.frameMs / 2)),
    );
    return {
      stop() {
        cancelPacer();
        talk.closeAll('gateway stopping');
      },
    };
  },
});

/** ws(s)://host:port of the talk sockets: the configured one, else the API base with its scheme made ws/wss. */
export function talkBase(publicBase: string | undefined, apiBase: string): string {
  if (publicBase) {
    if (!/^wss?:\/\/[^/?#]+$/.test(publicBase.replace(/\/+$/, ''))) throw new Error('config key publicBase: a ws:// or wss:// URL with a host, no path');
    return publicBase.replace(/\/+$/, '');
  }
  const u = new URL(apiBase);
  // a front that publishes the API under a path publishes the talk sockets there too
  return `${u.protocol === 'https:' ? 'wss' : 'ws'}://${u.host}${u.pathname.replace(/\/+$/, '')}`;
}
