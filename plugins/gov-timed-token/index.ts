import { IsArray } from 'class-validator';
import { definePlugin, ErrCode, GatewayError, invalidParam } from '../../plugin-sdk';
import { API_DOCS } from '../../plugin-sdk';
import { timedTokenApi } from './src/api-doc';
import { TimedTokenStore } from './src/token-store';
import { parseTimedTokenBody } from './src/timed-token-body';

export class GovTimedTokenConfig {
  /** initial valid tokens: [{"token": "..", "expiredAt": "yyyy-mm-ddTHH:mm:ssZ"}] */
  @IsArray()
  tokens: unknown[] = [];
}

/**
 * Government-platform plays: an application marked `gov` must send a valid `timedToken` on open.
 * Tokens come from config or from an admin application's POST /strm/timed_token, and survive restarts.
 */
export default definePlugin({
  name: 'gov-timed-token',
  config: GovTimedTokenConfig,
  // the OpenAPI document (console plugin), when the site serves one
  uses: [API_DOCS],
  async setup(ctx) {
    ctx.services.find(API_DOCS)?.describe(timedTokenApi());
    const seed = ctx.config.tokens.length ? parseTimedTokenBody({ tokens: ctx.config.tokens }) : { ok: true as const, tokens: [] };
    if (!seed.ok) throw new Error(`config key tokens: ${seed.message}`);
    const keyv = ctx.stores.keyv('timed-tokens');
    let store: TimedTokenStore;
    let cancelRetry: (() => void) | undefined;
    try {
      store = await TimedTokenStore.open(keyv, seed.tokens);
    } catch (err) {
      // A store that cannot be read (a full disk, a broken file) must not take the gateway down: check with the
      // config tokens meanwhile and load the stored set once the store answers again.
      const why = (err as Error).message;
      ctx.log.error({ err: why }, 'timed token store unavailable: checking with the config tokens until it is back');
      store = TimedTokenStore.unsaved(seed.tokens, why);
      cancelRetry = ctx.clock.setInterval(() => {
        TimedTokenStore.open(keyv, seed.tokens).then(
          (s) => {
            if (!cancelRetry) return;
            cancelRetry();
            cancelRetry = undefined;
            store = s;
            ctx.log.info({ tokens: s.list().length }, 'timed token store back: tokens loaded');
          },
          () => undefined,
        );
      }, 10_000);
    }
    const refused = ctx.metrics.counter('refused_total', 'gov opens refused', ['reason']);
    const updates = ctx.metrics.counter('updates_total', 'timed token sets replaced by an admin call');

    ctx.sessions.addOpenGuard((app, params) => {
      if (!app.gov) return;
      const verdict = store.check(params.timedToken, new Date(ctx.clock.now()));
      if (verdict === 'ok') return;
      refused.inc({ reason: verdict });
      ctx.log.warn({ appId: app.appId, reqId: params.reqId, reason: verdict }, 'gov open refused: timedToken ' + verdict);
      if (verdict === 'missing') throw invalidParam('timedToken', 'Required for this application.');
      throw new GatewayError(ErrCode.INVALID_TOKEN, 'Invalid timedToken.');
    });

    ctx.routes.post(
      '/strm/timed_token',
      async (req) => {
        const parsed = parseTimedTokenBody(req.body);
        if (!parsed.ok) throw new GatewayError(ErrCode.INVALID_PARAM, parsed.message);
        try {
          await store.setTokens(parsed.tokens);
        } catch (err) {
          ctx.log.error({ err: (err as Error).message }, 'timed tokens not replaced: the store failed');
          throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The timed token store is not available; the tokens in use are unchanged.');
        }
        updates.inc();
        // every worker checks opens: they all take the new set now, not at their next start
        ctx.workers.broadcast('tokens', store.digests());
        ctx.log.info(
          { appId: req.app!.appId, count: parsed.tokens.length, expiries: parsed.tokens.map((t) => t.expiredAt.toISOString()) },
          'timed tokens replaced',
        );
        return { data: store.list().map((t) => ({ fingerprint: t.fingerprint, expiredAt: t.expiredAt.toISOString() })) };
      },
      { auth: 'admin' },
    );

    ctx.workers.on('tokens', (set) => {
      const n = store.adopt(set);
      ctx.log.info({ count: n }, 'timed tokens replaced by an admin call on another worker');
    });
    ctx.log.info({ tokens: store.list().length }, 'timed tokens loaded');
    return { stop: () => cancelRetry?.() };
  },
});
