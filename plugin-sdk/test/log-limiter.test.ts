import assert from 'node:assert/strict';
import { LogLimiter, OVERFLOW_KEY } from '../log-limiter';

describe('LogLimiter: repeated lines per source', () => {
  it('writes the first line of a key, counts the rest of its interval, and tells the count with the next line', () => {
    let now = 0;
    const l = new LogLimiter({ intervalMs: 10_000, now: () => now });
    assert.deepEqual(l.take('a'), { write: true, suppressed: 0 });
    for (let i = 0; i < 99; i++) assert.equal(l.take('a').write, false);
    assert.deepEqual(l.take('b'), { write: true, suppressed: 0 }, 'another source has its own allowance');
    now = 9_999;
    assert.equal(l.take('a').write, false);
    now = 10_000;
    assert.deepEqual(l.take('a'), { write: true, suppressed: 100 });
    assert.equal(l.suppressedTotal, 100);
  });

  it('a burst allows that many lines per interval', () => {
    let now = 0;
    const l = new LogLimiter({ intervalMs: 1000, burst: 3, now: () => now });
    const writes = Array.from({ length: 10 }, () => l.take('k').write);
    assert.deepEqual(writes, [true, true, true, false, false, false, false, false, false, false]);
    now = 1000;
    assert.deepEqual(l.take('k'), { write: true, suppressed: 7 });
  });

  it('keeps memory flat under a flood of new keys: stale ones go, fresh ones past maxKeys share the overflow key', () => {
    let now = 0;
    const l = new LogLimiter({ intervalMs: 1000, maxKeys: 100, now: () => now });
    let written = 0;
    for (let i = 0; i < 10_000; i++) if (l.take(`10.0.${i >> 8}.${i & 255}`).write) written++;
    assert.equal(l.tracked, 100);
    // 100 keys each wrote once; then the overflow bucket once
    assert.equal(written, 101);
    assert.equal(l.pending().get(OVERFLOW_KEY), 10_000 - 101);
    now = 5000;
    // the stale keys without untold counts make room again
    assert.deepEqual(l.take('fresh'), { write: true, suppressed: 0 });
    assert.ok(l.tracked <= 100);
  });

  it('log() adds suppressed to the line only when some were left out', () => {
    let now = 0;
    const lines: Array<[Record<string, unknown>, string]> = [];
    const fake = { warn: (o: Record<string, unknown>, m: string) => lines.push([o, m]) } as never;
    const l = new LogLimiter({ intervalMs: 10, now: () => now });
    assert.equal(l.log(fake, 'warn', 'x', { remote: '1.2.3.4:5' }, 'refused'), true);
    assert.equal(l.log(fake, 'warn', 'x', { remote: '1.2.3.4:6' }, 'refused'), false);
    now = 10;
    l.log(fake, 'warn', 'x', { remote: '1.2.3.4:7' }, 'refused');
    assert.deepEqual(lines, [
      [{ remote: '1.2.3.4:5' }, 'refused'],
      [{ remote: '1.2.3.4:7', suppressed: 1 }, 'refused'],
    ]);
  });
});
