/**
 * The relays of one rtmp plugin: at most one per (reqId, URL), at most maxPerApp per application, each shown in its
 * request's `relays` flag (status) and stopped with its request, by the stop route, or at the plugin's stop.
 */
import { randomBytes } from 'node:crypto';
import { ErrCode, GatewayError, type Sessions, type StrmRequest } from '../../../../plugin-sdk';
import { Relay, type RelayEnv, type RelayState } from './relay';
import type { RelayReporter } from './relay-report';
import type { RelayTarget } from './relay-url';

/** a request's flag that lists its relays in status */
export const RELAYS_FLAG = 'relays';

interface Held {
  req: StrmRequest;
  /** by canonical URL */
  relays: Map<string, Relay>;
}

export class RelayRegistry {
  private readonly byReq = new Map<string, Held>();
  private readonly perApp = new Map<string, number>();
  private readonly why = new WeakMap<Relay, string>();
  private stopped = false;

  constructor(
    private readonly sessions: Sessions,
    private readonly env: Omit<RelayEnv, 'changed'>,
    private readonly reporter: RelayReporter,
    private readonly maxPerApp: number,
  ) {}

  get size(): number {
    let n = 0;
    for (const h of this.byReq.values()) n += h.relays.size;
    return n;
  }

  countBy(state: RelayState): number {
    let n = 0;
    for (const h of this.byReq.values()) for (const r of h.relays.values()) if (r.state === state) n++;
    return n;
  }

  find(reqId: string, target: RelayTarget): Relay | undefined {
    return this.byReq.get(reqId)?.relays.get(target.canonical);
  }

  /** a new relay of an open request (the caller checked it is the application's); -3 past maxPerApp */
  add(req: StrmRequest, target: RelayTarget): Relay {
    const held = this.byReq.get(req.reqId) ?? { req, relays: new Map<string, Relay>() };
    const existing = held.relays.get(target.canonical);
    if (existing) return existing;
    const count = this.perApp.get(req.appId) ?? 0;
    if (this.stopped) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The gateway is stopping.');
    if (count >= this.maxPerApp) {
      throw new GatewayError(ErrCode.EXECUTION_ERROR, `This application already has ${this.maxPerApp} relays (maxRelaysPerApp): stop one first.`);
    }
    const id = randomBytes(9).toString('base64url');
    const handle = this.sessions.attachPlayer(req.reqId, { protocol: 'rtmp-relay', remote: target.redacted });
    if (!handle) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The request closed.');
    const relay = new Relay(
      id,
      req.reqId,
      req.appId,
      target,
      { ...this.env, changed: (r, prev) => this.reporter.changed(r, req, prev, this.why.get(r)) },
      handle,
    );
    held.relays.set(target.canonical, relay);
    this.byReq.set(req.reqId, held);
    this.perApp.set(req.appId, count + 1);
    this.showFlag(held);
    relay.start();
    return relay;
  }

  /** stops the request's relays to `canonical` (all of them when undefined, or the one with relayId); returns them */
  stop(reqId: string, match: { canonical?: string; relayId?: string }, why: string): Relay[] {
    const held = this.byReq.get(reqId);
    if (!held) return [];
    const out: Relay[] = [];
    for (const [url, r] of held.relays) {
      if (match.canonical !== undefined && url !== match.canonical) continue;
      if (match.relayId !== undefined && r.id !== match.relayId) continue;
      held.relays.delete(url);
      this.perApp.set(r.appId, (this.perApp.get(r.appId) ?? 1) - 1);
      this.why.set(r, why);
      r.stop();
      out.push(r);
    }
    if (held.relays.size === 0) this.byReq.delete(reqId);
    if (out.length > 0) this.showFlag(held);
    return out;
  }

  stopAll(why: string): void {
    this.stopped = true;
    for (const reqId of [...this.byReq.keys()]) this.stop(reqId, {}, why);
  }

  private showFlag(held: Held): void {
    const views = [...held.relays.values()].map((r) => r.view);
    this.sessions.setRequestFlag(held.req.reqId, RELAYS_FLAG, views.length > 0 ? views : undefined);
  }
}
