/**
 * Push out: `POST /strm/relay` publishes an open request's stream to an RTMP(S) server. The relay reads
 * the stream's RTMP form (rtmp-format, shared with the RTMP players), audio as AAC through the site's AAC stage
 * (live platforms and CDNs take nothing else), and reconnects until the request closes.
 */
import * as fs from 'node:fs';
import * as tls from 'node:tls';
import { ByteTotal, aacVia, mediaTypOf, type PluginContext } from '../../../../plugin-sdk';
import { API_DOCS } from '../../../../plugin-sdk';
import type { RtmpConfig } from '../config';
import type { RtmpFormats } from '../rtmp-format';
import { RelayRegistry } from './relay-registry';
import { RelayReporter } from './relay-report';
import { relayApi } from './relay-api-doc';
import { relayRoutes } from './relay-routes';
import type { RelayEnv } from './relay';

export interface Relays {
  stop(): void;
}

function trustedCa(files: string[]): string[] | undefined {
  if (files.length === 0) return undefined;
  const extra = files.map((f, i) => {
    try {
      return fs.readFileSync(f, 'utf8');
    } catch (err) {
      throw new Error(`config key relayCaFiles[${i}]: ${(err as Error).message}`, { cause: err });
    }
  });
  // `ca` replaces Node's store: keep the public CAs beside the extra ones
  return [...tls.rootCertificates, ...extra];
}

export function setupRelays(ctx: PluginContext<RtmpConfig>, formats: RtmpFormats): Relays {
  const c = ctx.config;
  if (c.relayRetryMaxMs < c.relayRetryMinMs) throw new Error('config key relayRetryMaxMs: at least relayRetryMinMs');
  // added to on every message a relay sends: see ByteTotal
  const bytesOut = new ByteTotal();
  const env: Omit<RelayEnv, 'changed'> = {
    clock: ctx.clock,
    hosts: { blockInternal: c.relayBlockInternal, allowLoopback: c.relayAllowLoopback },
    ca: trustedCa(c.relayCaFiles),
    connectTimeoutMs: c.relayConnectTimeoutSec * 1000,
    retryMinMs: c.relayRetryMinMs,
    retryMaxMs: c.relayRetryMaxMs,
    highWaterBytes: c.socketHighWaterBytes,
    sent: (n) => bytesOut.add(n),
    source: (reqId) => {
      const r = ctx.sessions.getRequest(reqId);
      const s = r && ctx.sessions.getStreamByName(r.streamName);
      if (!r || !s) return undefined;
      const media = mediaTypOf(r.params.typ, r.params.dataTyp);
      // no `keep`: G.711 that players may get as it is goes to a platform as AAC
      const via = media === 'v' ? undefined : aacVia(ctx.bus, r.params.audioCfg);
      return { media: s.media, opts: { format: formats[media], media, via, maxQueueBytes: c.maxPlayerBacklogBytes } };
    },
  };
  const reporter = new RelayReporter(ctx.log, ctx.notices, ctx.clock, ctx.site.instId, c.relayNoticeIntervalSec * 1000);
  const registry = new RelayRegistry(ctx.sessions, env, reporter, c.maxRelaysPerApp);
  relayRoutes(ctx.routes, ctx.sessions, registry, env.hosts);
  ctx.sessions.onRequestClosed((r) => registry.stop(r.reqId, {}, 'the request closed'));

  const m = ctx.metrics;
  m.gauge('relays', 'relays (POST /strm/relay) by state', ['state'], (g) => {
    for (const state of ['connecting', 'publishing', 'retrying'] as const) g.set({ state }, registry.countBy(state));
  });
  m.gauge('relay_bytes_out', 'bytes relays sent to RTMP servers', [], (g) => g.set(bytesOut.n));
  ctx.services.find(API_DOCS)?.describe(relayApi());
  return { stop: () => registry.stopAll('the gateway is stopping') };
}
