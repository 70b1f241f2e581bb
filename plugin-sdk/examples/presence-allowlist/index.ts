import { IsArray, IsString } from 'class-validator';
import { definePlugin } from '../..';

/**
 * Example plugin: a presence provider that knows a fixed set of offline terminals, plus a route to list them.
 * Copy this folder to start a plugin of your own: config class, setup, routes, metrics, stop.
 */
export class PresenceAllowlistConfig {
  /** SIM numbers (normalised: no leading zeros) to report as offline */
  @IsArray()
  @IsString({ each: true })
  offline: string[] = [];
}

export default definePlugin({
  name: 'presence-allowlist',
  config: PresenceAllowlistConfig,
  setup(ctx) {
    const offline = new Set(ctx.config.offline);
    const refusals = ctx.metrics.counter('refusals_total', 'opens refused because the terminal is offline');

    ctx.sessions.setPresenceProvider({
      name: 'presence-allowlist',
      presence(simNo) {
        if (!offline.has(simNo)) return 'unknown';
        refusals.inc();
        ctx.log.info({ simNo }, 'terminal listed offline: open refused');
        return 'offline';
      },
    });

    ctx.routes.get('/presence/offline', () => ({ data: [...offline] }), { auth: 'api' });

    ctx.log.info({ offline: offline.size }, 'presence list loaded');
    return {
      stop() {
        offline.clear();
      },
    };
  },
});
