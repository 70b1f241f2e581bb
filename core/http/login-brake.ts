/**
 * The gateway's one brake on password guessing, shared by the API port and every plugin's own HTTP port: a second
 * port is no way around it. With several workers the primary deals API connections to the workers in turn, so an
 * address's failed logins are told to the other workers' guards; else the brake would allow authFailLimit guesses
 * per worker. (In a single process BatchedBroadcast sends and receives nothing.)
 */
import { BatchedBroadcast } from '../../plugin-sdk/batched-broadcast';
import type { Clock } from '../../plugin-sdk/clock';
import type { Metrics } from '../../plugin-sdk/metrics';
import type { Workers } from '../../plugin-sdk/plugin';
import type { GatewayConfig } from '../gateway-config';
import type { ApiServerOptions } from './api-server';
import { LoginGuard } from './login-guard';

/** what every API server of this gateway shares for credential checks */
export type AuthHooks = Pick<ApiServerOptions, 'loginGuard' | 'onAuthFailure' | 'onAuthThrottled'>;

export interface LoginBrake {
  guard: LoginGuard;
  /** the failed logins counted here, on their way to the other workers' guards; stopped with the gateway */
  share: BatchedBroadcast;
  hooks: AuthHooks;
}

/** The brake from the gateway's authFail* keys, its counters (auth_failures_total, auth_throttled_total) in `m`. */
export function loginBrake(gateway: GatewayConfig, clock: Clock, workers: Workers, m: Metrics): LoginBrake {
  const authFailures = m.counter('auth_failures_total', 'failed Basic logins, by reason', ['reason']);
  const authThrottled = m.counter('auth_throttled_total', 'requests refused (429) from addresses blocked after too many failed logins');
  const share = new BatchedBroadcast({
    workers,
    topic: 'login-failures',
    clock,
    batchMs: 10,
    maxBatch: 4096,
    maxItemLength: 128,
    received: (keys) => {
      for (const k of keys) guard.failureElsewhere(k);
    },
  });
  const guard = new LoginGuard({
    failLimit: gateway.authFailLimit,
    windowMs: gateway.authFailWindowSec * 1000,
    blockMs: gateway.authBlockSec * 1000,
    logIntervalMs: 10_000,
    now: () => clock.now(),
    shared: (key) => share.add(key),
  });
  const hooks: AuthHooks = { loginGuard: guard, onAuthFailure: (reason: string) => authFailures.inc({ reason }), onAuthThrottled: () => authThrottled.inc() };
  return { guard, share, hooks };
}
