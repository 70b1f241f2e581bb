import * as fs from 'node:fs';

/** Where the process's descriptor count and limit come from (a fake one in tests). */
export interface FdProbe {
  /** the soft limit on open descriptors; undefined when unknown (not Linux) or unlimited */
  limit(): number | undefined;
  /** descriptors open now; undefined when it cannot be read */
  count(): number | undefined;
  /** count() costs microseconds, so it may be read per connection when the count is close to the limit */
  readonly cheap: boolean;
}

/** Reads a "Max open files" soft limit out of /proc/<pid>/limits text. */
export function parseFdLimit(text: string): number | undefined {
  const m = /^Max open files\s+(\S+)/m.exec(text);
  if (!m || m[1] === 'unlimited') return undefined;
  const n = Number(m[1]);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/**
 * The Linux probe. Since Linux 6.2 a stat of /proc/self/fd reports the number of open descriptors as its size, at
 * the cost of one syscall; before, the directory has to be listed (tens of ms at 20,000 descriptors), which also
 * needs a descriptor of its own and fails with EMFILE exactly when the count matters: that reads as full.
 */
export function procFdProbe(): FdProbe {
  let cheap = false;
  try {
    cheap = fs.statSync('/proc/self/fd').size > 0;
  } catch {
    // no /proc: limit() says undefined and the reserve is off
  }
  return {
    cheap,
    limit() {
      try {
        return parseFdLimit(fs.readFileSync('/proc/self/limits', 'utf8'));
      } catch {
        return undefined;
      }
    },
    count() {
      try {
        if (cheap) return fs.statSync('/proc/self/fd').size;
        // the listing's own descriptor is in it
        return fs.readdirSync('/proc/self/fd').length - 1;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        return code === 'EMFILE' || code === 'ENFILE' ? Number.MAX_SAFE_INTEGER : undefined;
      }
    },
  };
}

/**
 * The process's open descriptors, from a sample of the probe plus the connections the guard admitted and saw close
 * since: exact for what floods (connections), and fresh enough for the rest (files, outgoing sockets) because it is
 * sampled again every 10 ms when that is cheap; a slow probe (a directory listing) every second, every 250 ms once
 * the count nears the reserve.
 */
export class FdCount {
  private sample = 0;
  private sampledAt = -Infinity;
  private delta = 0;

  constructor(
    private readonly probe: FdProbe,
    private readonly nearAt: number,
  ) {}

  now(at: number): number {
    const maxAge = this.probe.cheap ? 10 : this.sample + this.delta >= this.nearAt ? 250 : 1000;
    if (at - this.sampledAt >= maxAge) {
      const c = this.probe.count();
      if (c !== undefined) {
        this.sample = c;
        this.delta = 0;
      }
      this.sampledAt = at;
    }
    return this.sample + this.delta;
  }

  opened(): void {
    this.delta++;
  }
  closed(): void {
    this.delta--;
  }
}
