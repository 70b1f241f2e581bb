import * as net from 'node:net';

export interface LoginGuardOptions {
  /** failed logins (unknown user or wrong password) from one address that start a block; 0 turns the brake off */
  failLimit: number;
  /** the failures counted against failLimit are those within this window of the first one */
  windowMs: number;
  /** how long a blocked address is refused without a credential check */
  blockMs: number;
  /** at most one 'authentication failed' line per address and reason this often; the ones in between are counted */
  logIntervalMs: number;
  now: () => number;
  /** addresses tracked at once; past it the stalest are forgotten */
  maxTracked?: number;
  /**
   * With several workers: a counted failure of the address `key` (an addressKey), for the other workers' guards
   * (`failureElsewhere`), so the limit holds for an address whose guesses land on different workers.
   */
  shared?: (key: string) => void;
}

interface LogState {
  at: number;
  /** attempts of this kind not logged since `at` */
  suppressed: number;
}

interface Entry {
  windowStart: number;
  failures: number;
  blockedUntil: number;
  /**
   * by failure reason, plus 'blocked' for the block lines (whose suppressed count is the refused requests): a
   * browser's credential-less first request must not hide the wrong password that follows it
   */
  logs: Map<string, LogState>;
  touched: number;
}

/** What the caller should do about one failed login. */
export interface FailureVerdict {
  /** write the warning line now (else it was counted in `suppressed` of a later one) */
  log: boolean;
  /** attempts of the same kind from this address not logged since its previous line (for a block line: refusals) */
  suppressed: number;
  /** this failure started a block */
  blocked: boolean;
}

/**
 * IPv6 clients usually hold a whole /64, so counting per address would let one host rotate past the brake; an
 * IPv4-mapped address is the IPv4 client it maps.
 */
export function addressKey(remote: string): string {
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remote);
  if (v4) return v4[1];
  if (net.isIPv6(remote)) {
    const groups = expandV6(remote);
    return groups ? `${groups.slice(0, 4).join(':')}::/64` : remote;
  }
  return remote;
}

function expandV6(a: string): string[] | undefined {
  const zoneless = a.split('%')[0];
  const [head, tail] = zoneless.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  if (zoneless.includes('.')) return undefined;
  const fill = zoneless.includes('::') ? 8 - h.length - t.length : 0;
  const all = [...h, ...Array<string>(fill).fill('0'), ...t];
  return all.length === 8 ? all.map((g) => g.toLowerCase().replace(/^0+(?=.)/, '')) : undefined;
}

/**
 * Per-address brake on Basic password guessing. A blocked address gets no credential check at all, right or wrong,
 * so guessing during a block learns nothing; a success does not clear the count, so one valid tenant credential
 * cannot be interleaved to keep guessing another's.
 */
export class LoginGuard {
  private readonly entries = new Map<string, Entry>();
  private readonly maxTracked: number;

  constructor(private readonly o: LoginGuardOptions) {
    this.maxTracked = o.maxTracked ?? 10_000;
  }

  /** seconds until the address may try again; 0 when it may try now */
  retryAfterSec(remote: string): number {
    const e = this.entries.get(addressKey(remote));
    if (!e) return 0;
    const left = e.blockedUntil - this.o.now();
    return left > 0 ? Math.ceil(left / 1000) : 0;
  }

  /** a request refused by a block: counted for the next block line, never logged itself */
  refused(remote: string): void {
    const e = this.entries.get(addressKey(remote));
    if (e) this.logState(e, 'blocked').suppressed++;
  }

  /**
   * A failed login for `reason`. `counts` is false for a request without credentials (a browser's first try): it
   * is rate-limited in the log but no guess.
   */
  failure(remote: string, reason: string, counts: boolean): FailureVerdict {
    const now = this.o.now();
    const key = addressKey(remote);
    const e = this.entry(key, now);
    const guess = counts && this.o.failLimit > 0;
    const blocked = guess && this.count(e, now);
    if (guess) this.o.shared?.(key);
    const l = this.logState(e, blocked ? 'blocked' : reason);
    if (blocked || now - l.at >= this.o.logIntervalMs) {
      const suppressed = l.suppressed;
      l.suppressed = 0;
      l.at = now;
      return { log: true, suppressed, blocked };
    }
    l.suppressed++;
    return { log: false, suppressed: 0, blocked };
  }

  /**
   * A failed login another worker counted for the address `key` (its `shared`): counted here too, so the block starts
   * on every worker. Not logged: the worker that checked the credentials did.
   */
  failureElsewhere(key: string): void {
    if (this.o.failLimit <= 0) return;
    const now = this.o.now();
    this.count(this.entry(key, now), now);
  }

  private entry(key: string, now: number): Entry {
    let e = this.entries.get(key);
    if (!e) {
      this.makeRoom(now);
      e = { windowStart: now, failures: 0, blockedUntil: 0, logs: new Map(), touched: now };
      this.entries.set(key, e);
    } else {
      // Map order is the eviction order: most recently touched last
      this.entries.delete(key);
      this.entries.set(key, e);
    }
    e.touched = now;
    return e;
  }

  /** one more guess from the entry's address; true when it started a block */
  private count(e: Entry, now: number): boolean {
    if (now - e.windowStart >= this.o.windowMs || (e.blockedUntil > 0 && now >= e.blockedUntil)) {
      e.windowStart = now;
      e.failures = 0;
      e.blockedUntil = 0;
    }
    e.failures++;
    if (e.failures >= this.o.failLimit && e.blockedUntil === 0) {
      e.blockedUntil = now + this.o.blockMs;
      return true;
    }
    return false;
  }

  private logState(e: Entry, kind: string): LogState {
    let l = e.logs.get(kind);
    if (!l) {
      l = { at: -Infinity, suppressed: 0 };
      e.logs.set(kind, l);
    }
    return l;
  }

  get tracked(): number {
    return this.entries.size;
  }

  private makeRoom(now: number): void {
    if (this.entries.size < this.maxTracked) return;
    const horizon = Math.max(this.o.windowMs, this.o.blockMs, this.o.logIntervalMs);
    for (const [k, e] of this.entries) {
      if (now - e.touched > horizon && e.blockedUntil <= now) this.entries.delete(k);
    }
    // still full: an attacker with many addresses; forgetting the stalest keeps memory bounded
    while (this.entries.size >= this.maxTracked) {
      const first = this.entries.keys().next().value;
      if (first === undefined) break;
      this.entries.delete(first);
    }
  }
}
