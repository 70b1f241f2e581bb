import { LogLimiter, TERMINAL_LINKS, definePlugin, type TerminalLinks } from '../../plugin-sdk';
import { ChannelSources } from './src/channel-source';
import { Jt1078IngestConfig } from './src/config';
import { ingestMetrics } from './src/ingest-metrics';
import { TerminalLinkSet } from './src/link-set';
import { TerminalLinksService } from './src/links-service';
import { listenForTerminals } from './src/listeners';
import { RefusalLog } from './src/refusal-log';
import { StreamClaims } from './src/takeover';
import type { LinkHost } from './src/terminal-link';

export { Jt1078IngestConfig, terminalAudioProblem, type TerminalAudioOverride } from './src/config';

/**
 * JT/T 1078 terminals push here: four listeners (live/replay x 2013/2019), TCP and UDP on each port (src/listeners.ts).
 * Each link detects its layout from the packets; each channel it carries feeds the bus stream that requests opened,
 * one publisher link per stream (src/takeover.ts). The links are offered to other plugins as the terminal-links
 * service (src/links-service.ts; intercom sends audio down them).
 */
export default definePlugin({
  name: 'jt1078-ingest',
  config: Jt1078IngestConfig,
  provides: [TERMINAL_LINKS],
  // with several workers, a terminal's connection goes to the worker of its channel (src/route.ts, loaded alone by
  // the primary)
  routers: { jt1078: './src/route' },
  async setup(ctx) {
    const c = ctx.config;
    const links = new TerminalLinkSet();
    const service = new TerminalLinksService(ctx.log);
    // the per-stream gauges read the publishing sources at scrape time, once setup is over
    const m = ingestMetrics(ctx.metrics, links, () => takeover.publishing());
    const takeover = new StreamClaims({
      disconnectGraceMs: c.disconnectGraceMs,
      pinFirstAddress: c.pinFirstAddress,
      clock: ctx.clock,
      log: ctx.log,
      sessions: ctx.sessions,
      metrics: m,
      refusals: new RefusalLog(ctx.log),
      sources: new ChannelSources(c, ctx.log),
      service,
    });
    const logLimit = new LogLimiter({ intervalMs: 10_000, now: () => ctx.clock.now() });
    const host: LinkHost = {
      sessions: ctx.sessions,
      log: ctx.log,
      logLimit,
      unknownGraceMs: c.unknownGraceMs,
      downlink: { maxPendingBytes: c.downlinkMaxPendingBytes, hisilicon: c.hisiliconDownlink },
      unmatched: (link) => m.unmatched.inc({ listener: link.listener }),
      setTimer: (fn, ms) => ctx.clock.setTimeout(fn, ms),
      now: () => ctx.clock.now(),
      sent: (link, packets, bytes) => {
        m.downPackets.inc({ transport: link.transport }, packets);
        m.downBytes.inc({ transport: link.transport }, bytes);
      },
      refused: (_link, why) => m.downRefused.inc({ reason: why }),
      attach: (link, stream) => takeover.attach(link, stream),
      attached: (src) => service.attached(src),
      detach: (src, why) => takeover.detach(src, why),
    };
    // other plugins get find and onAttach alone, not the bookkeeping of who publishes
    const offered: TerminalLinks = { find: (normSim, chanId, typ) => service.find(normSim, chanId, typ), onAttach: (cb) => service.onAttach(cb) };
    ctx.services.provide(TERMINAL_LINKS, offered);

    const listening = await listenForTerminals(ctx, host, links, m);
    const { bound } = listening;
    ctx.sessions.registerIngest({
      name: 'jt1078-ingest',
      source: 'terminal',
      pushAddress: (typ) => ({
        host: ctx.site.publicHost,
        port: bound.get(typ === 'live' ? 'live2013' : 'replay2013')!,
        tcp: c.advertise === 'tcp',
        port2019: bound.get(typ === 'live' ? 'live2019' : 'replay2019')!,
        tcp2019: c.advertise === 'tcp',
      }),
    });
    ctx.log.info({ ports: Object.fromEntries(bound), udp: c.udp }, 'listening for terminals');

    return {
      stop() {
        listening.stop();
        takeover.clear();
        links.closeAll('gateway stopping');
        service.stop();
        if (logLimit.suppressedTotal > 0) {
          ctx.log.info(
            { suppressed: logLimit.suppressedTotal, untold: logLimit.pending().size },
            'lines left out by the per-source log rate limit since start',
          );
        }
      },
    };
  },
});
