import type { Logger } from 'pino';

/**
 * Repeated warnings, rate-limited per source. Whatever a remote peer can trigger (a datagram, a connection, a bad
 * token) must not write a line each time: a flood of valid-looking 1078 headers from random UDP ports wrote 96,000
 * lines in 30 s. A key (usually the source address plus what happened) writes at most `burst` lines per
 * `intervalMs`; the next line written for it carries `suppressed`, the count left out since. Keys are bounded: past
 * `maxKeys` the stalest are forgotten, and while every tracked key is fresh (a flood from many addresses) new keys
 * share one overflow bucket, so memory stays flat and the log still says how much was left out.
 */
export interface LogLimiterOptions {
  /** default 10 s */
  intervalMs?: number;
  /** lines per key per interval; default 1 */
  burst?: number;
  /** default 10,000 */
  maxKeys?: number;
  now?: () => number;
}

/** What to do with one occurrence: write it (with the count left out before it) or count it. */
export interface LogVerdict {
  write: boolean;
  /** occurrences of this key not written since the last line written for it (only when write) */
  suppressed: number;
}

interface KeyState {
  windowStart: number;
  lines: number;
  suppressed: number;
  touched: number;
}

/** the key floods from more sources than maxKeys share */
export const OVERFLOW_KEY = '(other sources)';

export class LogLimiter {
  private readonly keys = new Map<string, KeyState>();
  /** kept outside the map, so it always has room */
  private readonly overflow: KeyState = { windowStart: -Infinity, lines: 0, suppressed: 0, touched: 0 };
  private readonly intervalMs: number;
  private readonly burst: number;
  private readonly maxKeys: number;
  private readonly now: () => number;
  /** every occurrence left out, for a metric or a stop line */
  suppressedTotal = 0;

  constructor(o: LogLimiterOptions = {}) {
    this.intervalMs = o.intervalMs ?? 10_000;
    this.burst = Math.max(1, o.burst ?? 1);
    this.maxKeys = Math.max(1, o.maxKeys ?? 10_000);
    this.now = o.now ?? Date.now;
  }

  take(key: string): LogVerdict {
    const now = this.now();
    let s = key === OVERFLOW_KEY ? this.overflow : this.keys.get(key);
    if (!s) {
      if (this.keys.size >= this.maxKeys) this.makeRoom(now);
      if (this.keys.size >= this.maxKeys) {
        s = this.overflow;
      } else {
        s = { windowStart: now, lines: 0, suppressed: 0, touched: now };
        this.keys.set(key, s);
      }
    } else if (s !== this.overflow) {
      // Map order is the eviction order: most recently touched last
      this.keys.delete(key);
      this.keys.set(key, s);
    }
    s.touched = now;
    if (now - s.windowStart >= this.intervalMs) {
      s.windowStart = now;
      s.lines = 0;
    }
    if (s.lines < this.burst) {
      s.lines++;
      const suppressed = s.suppressed;
      s.suppressed = 0;
      return { write: true, suppressed };
    }
    s.suppressed++;
    this.suppressedTotal++;
    return { write: false, suppressed: 0 };
  }

  /**
   * Writes `msg` at `level` unless the key is over its rate; the line carries `suppressed` when some were left out.
   * Returns whether it wrote.
   */
  log(log: Logger, level: 'warn' | 'info' | 'error' | 'debug', key: string, obj: Record<string, unknown>, msg: string): boolean {
    const v = this.take(key);
    if (!v.write) return false;
    log[level](v.suppressed > 0 ? { ...obj, suppressed: v.suppressed } : obj, msg);
    return true;
  }

  /** counts left out and not yet told in a line, by key (for a summary line at stop) */
  pending(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [k, s] of this.keys) if (s.suppressed > 0) out.set(k, s.suppressed);
    if (this.overflow.suppressed > 0) out.set(OVERFLOW_KEY, this.overflow.suppressed);
    return out;
  }

  get tracked(): number {
    return this.keys.size;
  }

  private makeRoom(now: number): void {
    for (const [k, s] of this.keys) {
      if (now - s.touched < this.intervalMs) break;
      // a key with untold counts is kept until told, unless the map is full of them
      if (s.suppressed === 0) this.keys.delete(k);
    }
    if (this.keys.size < this.maxKeys) return;
    for (const [k, s] of this.keys) {
      if (now - s.touched < this.intervalMs) break;
      this.keys.delete(k);
      if (this.keys.size < this.maxKeys) return;
    }
  }
}
