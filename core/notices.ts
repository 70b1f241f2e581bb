import type { Logger } from 'pino';
import type { Notice, Notices } from '../plugin-sdk/notices';
import type { RequestLog } from '../plugin-sdk/plugin';

/** Typed session events. Listeners run synchronously and must only queue work: media never waits on them. */
export class NoticeHub implements Notices {
  private listeners: Array<(n: Notice) => void> = [];
  private enrichers: Array<(n: Notice) => void> = [];
  /** `requestLog`: a notice is a per-request line, at the site's requestLogLevel */
  constructor(
    private readonly log: Logger,
    private readonly requestLog: RequestLog = (o, m) => log.info(o, m),
  ) {}

  on(cb: (n: Notice) => void): void {
    this.listeners.push(cb);
  }
  addEnricher(fn: (n: Notice) => void): void {
    this.enrichers.push(fn);
  }
  emit(n: Notice): void {
    for (const fn of this.enrichers) {
      try {
        fn(n);
      } catch (err) {
        this.log.error({ err, reqId: n.payload.reqId }, 'notice enricher failed');
      }
    }
    this.requestLog({ reqId: n.payload.reqId, act: n.payload.act, closeCause: n.payload.closeCause, appId: n.appId }, 'notice');
    for (const cb of this.listeners) {
      try {
        cb(n);
      } catch (err) {
        this.log.error({ err, reqId: n.payload.reqId }, 'notice listener failed');
      }
    }
  }
}
