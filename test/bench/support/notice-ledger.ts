/**
 * The soak's bookkeeping of callback notices: what each request should get (from what its opener saw: the open's
 * `ready`, a later status or player that saw the stream ready, who ended it and how) against what the callback
 * receiver got. Pure logic, no I/O, so the rules are unit-tested (soak-support.test.ts).
 *
 * The rules follow core/sessions/session-manager.ts and the callback-notifier README:
 * - every request gets exactly one final notice, `closed` or `failed`, once it has ended;
 * - a request whose open answered ready:false gets one `ready` if the stream was ready while it lived (the soak
 *   only claims that when it saw it: a status answer with ready:true or a player reading video on its URL);
 *   a request opened on a ready stream gets no `ready` at all;
 * - per request, in order: `ready` before the final, nothing after the final;
 * - a request the client closed (close answered closed:true) ends with closeCause 1; one the gateway ended on its own
 *   with the cause the soak provoked (2: terminal away past the grace; 6: nobody pushed within the open timeout).
 */

export type Act = 'ready' | 'closed' | 'failed';

export interface ReceivedNotice {
  reqId: string;
  act: string;
  closeCause?: number;
  /** ms, the soak's clock (performance.now()) */
  at: number;
}

interface Tracked {
  owner: string;
  openedAt: number;
  /** the open's `ready`; undefined while the open is under way or when its answer was lost (ready not judged) */
  readyAtOpen: boolean | undefined;
  sawReady: boolean;
  /** who ended it and when: the client (its close answered closed:true) or the gateway (the soak found it gone) */
  end: { by: 'client' | 'gateway'; at: number; why: string } | undefined;
  /** causes acceptable for a request the gateway ended (empty: any) */
  allowedCauses: number[];
  notices: Array<{ act: string; cause?: number; at: number }>;
  /** first protocol problem seen on it (order, duplicate), for the report */
  problem?: string;
}

export interface LedgerSummary {
  requests: number;
  /** requests ended (by either side) */
  ended: number;
  noticesReceived: number;
  finalsReceived: number;
  readyReceived: number;
  /** ended requests whose final has not come (yet): ids with the age of their end, oldest first */
  pendingFinals: Array<{ reqId: string; owner: string; ageMs: number }>;
  /** ready notices owed (open said not ready, the soak saw it ready) and not received */
  missingReady: Array<{ reqId: string; owner: string }>;
  /** the same act twice for one request */
  duplicates: Array<{ reqId: string; act: string }>;
  /** ready after a final, anything after a final, a failed after a ready, a ready where none is due */
  orderViolations: Array<{ reqId: string; what: string }>;
  /** notices for reqIds the soak never opened */
  unknown: number;
  /** final notices by closeCause ('none' when absent) */
  causes: Record<string, number>;
  /** finals whose cause does not match how the request ended */
  unexpectedCauses: Array<{ reqId: string; owner: string; cause: number | undefined; expected: string }>;
  /** ms from a request's end to its final notice: p50, p99, max (NaN without any) */
  finalDelayMs: { p50: number; p99: number; max: number };
}

const FINAL = new Set(['closed', 'failed']);

export class NoticeLedger {
  private readonly byId = new Map<string, Tracked>();
  private unknown = 0;
  private received = 0;

  get size(): number {
    return this.byId.size;
  }

  has(reqId: string): boolean {
    return this.byId.has(reqId);
  }

  /**
   * Before the open is sent (the soak picks its reqIds): a notice can then never arrive for a request the ledger
   * does not know yet, and an open whose answer was lost can still be closed and accounted for.
   */
  opening(reqId: string, owner: string, at: number): void {
    if (this.byId.has(reqId)) throw new Error(`reqId ${reqId} opened twice`);
    this.byId.set(reqId, { owner, openedAt: at, readyAtOpen: undefined, sawReady: false, end: undefined, allowedCauses: [], notices: [] });
  }

  /** the open answered errCode 0 with this `ready` */
  opened(reqId: string, readyAtOpen: boolean): void {
    const t = this.byId.get(reqId);
    if (!t) throw new Error(`reqId ${reqId} opened without opening()`);
    t.readyAtOpen = readyAtOpen;
    if (readyAtOpen) t.sawReady = true;
  }

  /** the open was refused: no request exists; notices that came for it anyway count as unknown */
  notOpened(reqId: string): void {
    const t = this.byId.get(reqId);
    if (!t) return;
    this.unknown += t.notices.length;
    this.byId.delete(reqId);
  }

  /** the soak saw the request's stream ready while the request was open */
  sawReady(reqId: string): void {
    const t = this.byId.get(reqId);
    if (t && !t.end) t.sawReady = true;
  }

  /** the client's close answered closed:true: a final with closeCause 1 is owed */
  closedByClient(reqId: string, at: number): void {
    const t = this.byId.get(reqId);
    if (t && !t.end) t.end = { by: 'client', at, why: 'close' };
  }

  /**
   * The gateway ended it on its own (keep or close answered false, status no longer lists it, a player was cut
   * off): a final is owed, with one of `allowedCauses` (empty: not judged).
   */
  goneAtGateway(reqId: string, at: number, why: string, allowedCauses: number[]): void {
    const t = this.byId.get(reqId);
    if (!t || t.end) return;
    t.end = { by: 'gateway', at, why };
    t.allowedCauses = allowedCauses;
  }

  isEnded(reqId: string): boolean {
    return this.byId.get(reqId)?.end !== undefined;
  }

  /** whether a final notice came for it (the gateway told the application it is over) */
  hasFinal(reqId: string): boolean {
    return this.byId.get(reqId)?.notices.some((n) => FINAL.has(n.act)) ?? false;
  }

  receive(n: ReceivedNotice): void {
    this.received++;
    const t = this.byId.get(n.reqId);
    if (!t) {
      this.unknown++;
      return;
    }
    t.notices.push({ act: n.act, cause: n.closeCause, at: n.at });
  }

  /**
   * Requests that ended between `from` and `to` (ms, the soak's clock), e.g. during a callback outage, with when
   * their final notice arrived (undefined: not yet).
   */
  endedBetween(from: number, to: number): Array<{ reqId: string; endAt: number; finalAt: number | undefined }> {
    const out: Array<{ reqId: string; endAt: number; finalAt: number | undefined }> = [];
    for (const [reqId, t] of this.byId) {
      if (!t.end || t.end.at < from || t.end.at > to) continue;
      out.push({ reqId, endAt: t.end.at, finalAt: t.notices.find((n) => FINAL.has(n.act))?.at });
    }
    return out;
  }

  summary(now: number): LedgerSummary {
    const s: LedgerSummary = {
      requests: this.byId.size,
      ended: 0,
      noticesReceived: this.received,
      finalsReceived: 0,
      readyReceived: 0,
      pendingFinals: [],
      missingReady: [],
      duplicates: [],
      orderViolations: [],
      unknown: this.unknown,
      causes: {},
      unexpectedCauses: [],
      finalDelayMs: { p50: NaN, p99: NaN, max: NaN },
    };
    const delays: number[] = [];
    for (const [reqId, t] of this.byId) {
      if (t.end) s.ended++;
      const seen = new Map<string, number>();
      let finalAt = -1;
      let readyAt = -1;
      t.notices.forEach((n, i) => {
        const count = (seen.get(n.act) ?? 0) + 1;
        seen.set(n.act, count);
        if (count === 2) s.duplicates.push({ reqId, act: n.act });
        if (n.act === 'ready') {
          s.readyReceived++;
          if (finalAt >= 0) s.orderViolations.push({ reqId, what: 'ready after its final notice' });
          else if (t.readyAtOpen === true && count === 1) s.orderViolations.push({ reqId, what: 'ready for a request opened on a ready stream (none is due)' });
          if (readyAt < 0) readyAt = i;
        } else if (FINAL.has(n.act)) {
          if (finalAt >= 0 && count === 1) s.orderViolations.push({ reqId, what: `${n.act} after ${t.notices[finalAt].act}` });
          if (n.act === 'failed' && readyAt >= 0) s.orderViolations.push({ reqId, what: 'failed after ready (failed means never ready)' });
          if (finalAt < 0) {
            finalAt = i;
            s.finalsReceived++;
            const key = n.cause === undefined ? 'none' : String(n.cause);
            s.causes[key] = (s.causes[key] ?? 0) + 1;
            if (t.end) delays.push(Math.max(0, n.at - t.end.at));
            const expected = expectedCauses(t);
            if (expected && !expected.includes(n.cause ?? -1)) {
              s.unexpectedCauses.push({ reqId, owner: t.owner, cause: n.cause, expected: expected.join(' or ') });
            }
          }
        } else {
          s.orderViolations.push({ reqId, what: `unknown act '${n.act}'` });
        }
      });
      if (t.end && finalAt < 0) s.pendingFinals.push({ reqId, owner: t.owner, ageMs: now - t.end.at });
      if (t.readyAtOpen === false && t.sawReady && readyAt < 0) {
        // a failed final says the gateway never saw it ready: the ready is not owed then (and the soak's claim was wrong)
        if (!(finalAt >= 0 && t.notices[finalAt].act === 'failed')) s.missingReady.push({ reqId, owner: t.owner });
      }
    }
    s.pendingFinals.sort((a, b) => b.ageMs - a.ageMs);
    if (delays.length > 0) {
      delays.sort((a, b) => a - b);
      const q = (p: number) => delays[Math.min(delays.length - 1, Math.max(0, Math.ceil(p * delays.length) - 1))];
      s.finalDelayMs = { p50: q(0.5), p99: q(0.99), max: delays[delays.length - 1] };
    }
    return s;
  }
}

/**
 * The closeCauses a request's final may carry, or undefined when it is not judged. A final that came before the
 * soak noticed the end (a long terminal drop's closed reaching the receiver before the keep loop saw it) is judged
 * by how the request ended once the soak knows.
 */
function expectedCauses(t: Tracked): number[] | undefined {
  if (!t.end) return undefined;
  if (t.end.by === 'client') return [1];
  return t.allowedCauses.length > 0 ? t.allowedCauses : undefined;
}
