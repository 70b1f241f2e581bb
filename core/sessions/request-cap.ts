import type { Logger } from 'pino';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Clock } from '../../plugin-sdk/clock';
import type { SessionTimings } from './session-state';

/** a refused open past the per-application cap is logged at most this often per application */
const CAP_LOG_INTERVAL_MS = 60_000;

/** The per-application cap on open requests: this worker's count of each application's requests and its limit. */
export class RequestCap {
  /** open requests by appId, for the per-application cap */
  private perApp = new Map<string, number>();
  private capLog = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly t: Pick<SessionTimings, 'maxRequestsPerApp' | 'requestLimits'>,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  limitFor(appId: string): number {
    return this.t.requestLimits?.get(appId) ?? this.t.maxRequestsPerApp;
  }

  /** open requests of one application */
  countOf(appId: string): number {
    return this.perApp.get(appId) ?? 0;
  }

  added(appId: string): void {
    this.perApp.set(appId, (this.perApp.get(appId) ?? 0) + 1);
  }

  removed(appId: string): void {
    const left = (this.perApp.get(appId) ?? 1) - 1;
    if (left > 0) this.perApp.set(appId, left);
    else this.perApp.delete(appId);
  }

  /** `held`: the application's open requests, when known better than this worker's count (the cluster's) */
  check(appId: string, held = this.countOf(appId)): void {
    const limit = this.limitFor(appId);
    if (held < limit) return;
    const now = this.clock.now();
    const l = this.capLog.get(appId);
    if (!l || now - l.at >= CAP_LOG_INTERVAL_MS) {
      this.log.warn({ appId, limit, suppressed: l?.suppressed ?? 0 }, 'open refused: the application holds its maximum of open requests');
      this.capLog.set(appId, { at: now, suppressed: 0 });
    } else {
      l.suppressed++;
    }
    // -3 (other failures): decisions.md has no quota code, and -11 is an HTTP 403 for routes, which would read as
    // "these credentials may not open at all"; -3 stays HTTP 200 like every business error
    throw new GatewayError(ErrCode.EXECUTION_ERROR, `Too many open requests: this application holds its maximum of ${limit}; close some first.`);
  }
}
