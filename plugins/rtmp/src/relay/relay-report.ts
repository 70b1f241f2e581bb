/**
 * What a relay tells: a log line per state change (never on every retry of an outage: a retry with the error of the
 * one before is a debug line) and a notice on publishing, retrying and stopped, at most one per relay per
 * noticeIntervalMs (a relay that flaps sends its latest state when the interval ends; stopped always goes at once).
 *
 * The notice is the callback body of decisions.md with `act` "relay" and the relay's fields (`Notices.emit`).
 */
import type { Logger } from 'pino';
import { mediaTypOf, type Cancel, type Clock, type NoticePayload, type Notices, type StrmRequest } from '../../../../plugin-sdk';
import type { Relay, RelayState } from './relay';

const NOTIFIED: ReadonlySet<RelayState> = new Set(['publishing', 'retrying', 'stopped']);

interface Told {
  logged?: string;
  notified?: RelayState;
  notifiedAt: number;
  deferred?: Cancel;
}

export class RelayReporter {
  private readonly told = new WeakMap<Relay, Told>();

  constructor(
    private readonly log: Logger,
    private readonly notices: Notices,
    private readonly clock: Clock,
    private readonly instId: string,
    private readonly noticeIntervalMs: number,
  ) {}

  changed(r: Relay, req: StrmRequest, prev: RelayState, why?: string): void {
    let t = this.told.get(r);
    if (!t) {
      t = { notifiedAt: -Infinity };
      this.told.set(r, t);
    }
    this.logLine(r, t, prev, why);
    if (NOTIFIED.has(r.state)) this.notice(r, req, t);
  }

  private logLine(r: Relay, t: Told, prev: RelayState, why: string | undefined): void {
    const v = r.view;
    const base = { reqId: r.reqId, appId: r.appId, relayId: r.id, url: v.url };
    const line = `${v.state} ${v.error ?? ''}`;
    if (v.state === 'connecting') {
      if (prev === 'connecting') this.log.info(base, 'relay started');
      return;
    }
    if (v.state === 'retrying' && prev !== 'publishing' && t.logged === line) {
      this.log.debug({ ...base, error: v.error, failures: r.failures }, 'relay still retrying');
      return;
    }
    t.logged = line;
    if (v.state === 'retrying') this.log.warn({ ...base, error: v.error, failures: r.failures }, 'relay retrying');
    else if (v.state === 'publishing') this.log.info(base, 'relay publishing');
    else this.log.info({ ...base, reason: why, bytesOut: v.bytesOut }, 'relay stopped');
  }

  private notice(r: Relay, req: StrmRequest, t: Told): void {
    const now = this.clock.now();
    const state = r.state;
    if (state !== 'stopped' && now - t.notifiedAt < this.noticeIntervalMs) {
      t.deferred ??= this.clock.setTimeout(
        () => {
          t.deferred = undefined;
          if (NOTIFIED.has(r.state) && r.state !== 'stopped' && r.state !== t.notified) this.send(r, req, t);
        },
        t.notifiedAt + this.noticeIntervalMs - now,
      );
      return;
    }
    t.deferred?.();
    t.deferred = undefined;
    if (state !== t.notified) this.send(r, req, t);
  }

  private send(r: Relay, req: StrmRequest, t: Told): void {
    t.notified = r.state;
    t.notifiedAt = this.clock.now();
    const p = req.params;
    const payload: NoticePayload = {
      instId: this.instId,
      act: 'relay',
      reqId: req.reqId,
      typ: p.typ,
      simNo: p.simNo,
      chan: p.chanId,
      mediaTyp: mediaTypOf(p.typ, p.dataTyp),
      relayId: r.id,
      relayState: r.state,
      relayUrl: r.view.url,
    };
    if (r.view.error !== undefined && r.state === 'retrying') payload.relayError = r.view.error;
    this.notices.emit({ payload, appId: req.appId, cb: p.cb, last: false });
  }
}
