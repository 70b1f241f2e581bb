import type { Logger } from 'pino';
import type { Notice, Notices } from '../plugin-sdk/notices';

/** Typed session events. Listeners run synchronously and must only queue work: media never waits on them. */
export class NoticeHub implements Notices {
  private listeners: Array<(n: Notice) => void> = [];
  private enrichers: Array<(n: Notice) => void> = [];
  constructor(private readonly log: Logger) {}

  on(cb: (n: Notice) => void): void {
    this.listeners.push(cb);
  }
  addEnricher(fn: (n: Notice) => void): void {
    this.enrichers.push(fn);
  }
  emit(n: Notice): void {
    for (const fn of this.enrichers) {
      try { fn(n); } catch (err) { this.log.error({ err, reqId: n.payload.reqId }, 'notice enricher failed'); }
    }
    this.log.info({ reqId: n.payload.reqId, act: n.payload.act, closeCause: n.payload.closeCause, appId: n.appId }, 'notice');
    for (const cb of this.listeners) {
      try { cb(n); } catch (err) { this.log.error({ err, reqId: n.payload.reqId }, 'notice listener failed'); }
    }
  }
}
