/**
 * The deadlines that end requests and streams nobody closes: a request not kept within its keepIntv (plus a grace
 * of a quarter of it, at least 5 s), a request no player consumed within consumptionTimeoutSec, and a stream whose
 * terminal did not push within openTimeoutSec. One sweep a second checks them all, rather than a timer per request.
 */
import type { Logger } from 'pino';
import type { Clock, Cancel } from '../../plugin-sdk/clock';
import { CloseCause, type CloseCauseValue } from '../../plugin-sdk/sessions';
import type { RequestState, SessionTimings, StreamState } from './session-state';

/** what the sweep walks and closes */
export interface SweepTarget {
  /** copies: closing while walking changes the maps */
  requests(): RequestState[];
  streams(): StreamState[];
  closeRequest(reqId: string, cause: CloseCauseValue): void;
  closeStream(streamName: string, cause: CloseCauseValue): void;
}

/** how long a request is held after an open or keep: its keepIntv and a grace of a quarter of it, at least 5 s */
export function holdMs(keepIntv: number): number {
  return (keepIntv + Math.max(5, keepIntv / 4)) * 1000;
}

export class RequestTimers {
  private sweepCancel: Cancel | undefined;

  constructor(
    private readonly t: Pick<SessionTimings, 'openTimeoutSec' | 'consumptionTimeoutSec'>,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly target: SweepTarget,
  ) {}

  start(): void {
    this.sweepCancel = this.clock.setInterval(() => this.sweep(), 1000);
  }

  stop(): void {
    this.sweepCancel?.();
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const r of this.target.requests()) {
      if (r.closed) continue;
      if (now > r.keepDeadline) this.target.closeRequest(r.reqId, CloseCause.keepTimeout);
      else if (!r.consumed && now - r.openedAtMs >= this.t.consumptionTimeoutSec * 1000) this.target.closeRequest(r.reqId, CloseCause.consumptionTimeout);
    }
    for (const s of this.target.streams()) {
      if (s.state === 'waiting' && now - s.openedAtMs >= this.t.openTimeoutSec * 1000) {
        this.log.warn({ stream: s.name, openTimeoutSec: this.t.openTimeoutSec }, 'terminal did not push within the open timeout');
        this.target.closeStream(s.name, CloseCause.termDataTimeout);
      }
    }
  }
}
