/**
 * The credential check of every authenticated route and upgrade: HTTP Basic against the site's applications, behind
 * the login brake (login-guard.ts). A blocked address is refused before its credentials are looked at, so guessing
 * costs nothing more than a 429; failures and refusals are counted for /metrics, while their log lines are
 * rate-limited by the guard.
 */
import type * as http from 'node:http';
import type { Logger } from 'pino';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Application, AuthMode } from '../../plugin-sdk/http';
import type { ApplicationRegistry } from '../apps';
import { LoginGuard } from './login-guard';

/** 429 for an address blocked after too many failed logins */
export class LoginThrottled extends GatewayError {
  constructor(readonly retryAfterSec: number) {
    super(ErrCode.AUTHENTICATION_FAILED, `Too many failed logins from this address; retry in ${retryAfterSec} s.`, 429);
  }
}

export interface CredentialCheckOptions {
  apps: ApplicationRegistry;
  log: Logger;
  /** the brake on password guessing; one shared by every listener, so a second port is no way around it */
  loginGuard?: LoginGuard;
  /** counts for /metrics (the log lines are rate-limited, these are not) */
  onAuthFailure?: (reason: string) => void;
  onAuthThrottled?: () => void;
}

export class CredentialCheck {
  private readonly guard: LoginGuard;

  constructor(private readonly o: CredentialCheckOptions) {
    this.guard = o.loginGuard ?? new LoginGuard({ failLimit: 20, windowMs: 60_000, blockMs: 60_000, logIntervalMs: 10_000, now: Date.now });
  }

  /**
   * The application of a request's Basic credentials, for `mode`. Throws 401/-9 (bad or missing), 429/-9 (the address
   * is blocked after too many failures: no check is made) or -11 (not admin).
   */
  authenticate(req: http.IncomingMessage, mode: AuthMode): Application | undefined {
    if (mode === 'none') return undefined;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- Node's docs: a request's socket may be internally nulled, which its type does not say
    const remote = req.socket?.remoteAddress ?? '';
    const path = (req.url ?? '').split('?')[0];
    const wait = this.guard.retryAfterSec(remote);
    if (wait > 0) {
      this.guard.refused(remote);
      this.o.onAuthThrottled?.();
      throw new LoginThrottled(wait);
    }
    const r = this.o.apps.authenticate(req.headers.authorization);
    if (!r.ok) {
      this.o.onAuthFailure?.(r.reason);
      const v = this.guard.failure(remote, r.reason, r.reason === 'unknown-user' || r.reason === 'bad-password');
      if (v.blocked) {
        // refusals are not logged one by one: the next block line of the address says how many there were
        this.o.log.warn(
          { remote, path, reason: r.reason, blockedSec: this.guard.retryAfterSec(remote), refusedBefore: v.suppressed },
          'too many failed logins: address blocked',
        );
      } else if (v.log) {
        this.o.log.warn({ remote, path, reason: r.reason, ...(v.suppressed ? { suppressed: v.suppressed } : {}) }, 'authentication failed');
      }
      throw new GatewayError(ErrCode.AUTHENTICATION_FAILED, 'Authentication failed.', 401);
    }
    if (mode === 'admin' && !r.app.admin) {
      this.o.log.warn({ appId: r.app.appId, path }, 'administrative route refused to a non-admin application');
      throw new GatewayError(ErrCode.ACCESS_DENIED, 'Access denied.');
    }
    return r.app;
  }
}
