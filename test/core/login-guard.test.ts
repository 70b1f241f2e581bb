/**
 * LoginGuard shared between workers (`shared` / `failureElsewhere`): guesses an address spreads over workers add up to
 * one limit, the block starts on every worker, the window still ends it, and a brake that is off shares nothing.
 * The real two-worker gateway: cluster-login.test.ts.
 */
import assert from 'node:assert/strict';
import { LoginGuard } from '../../core/http/login-guard';

function pair(failLimit: number) {
  let now = 1_000_000;
  const told: string[] = [];
  const guards: LoginGuard[] = [];
  for (let i = 0; i < 2; i++) {
    guards.push(
      new LoginGuard({
        failLimit,
        windowMs: 60_000,
        blockMs: 30_000,
        logIntervalMs: 10_000,
        now: () => now,
        // what the kernel does through BatchedBroadcast, here at once
        shared: (key) => {
          told.push(key);
          guards[1 - i].failureElsewhere(key);
        },
      }),
    );
  }
  return {
    a: guards[0],
    b: guards[1],
    told,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('LoginGuard across workers', () => {
  it('three guesses on each of two workers make the six that block, on both', () => {
    const { a, b, told } = pair(6);
    for (let i = 0; i < 3; i++) assert.equal(a.failure('10.0.0.7', 'bad-password', true).blocked, false);
    for (let i = 0; i < 2; i++) assert.equal(b.failure('10.0.0.7', 'bad-password', true).blocked, false);
    assert.equal(a.retryAfterSec('10.0.0.7'), 0);
    assert.equal(b.failure('10.0.0.7', 'bad-password', true).blocked, true, 'the sixth guess, wherever it lands');
    assert.equal(a.retryAfterSec('10.0.0.7'), 30);
    assert.equal(b.retryAfterSec('10.0.0.7'), 30);
    assert.equal(a.retryAfterSec('10.0.0.8'), 0, 'another address is not affected');
    assert.deepEqual(told, Array(6).fill('10.0.0.7'), 'the address key, once a guess');
  });

  it('an IPv6 client is told as its /64, and a request without credentials is no guess to share', () => {
    const { a, b, told } = pair(2);
    a.failure('2001:db8:1:2::17', 'unknown-user', true);
    a.failure('2001:db8:1:2::18', 'no-credentials', false);
    assert.deepEqual(told, ['2001:db8:1:2::/64']);
    b.failure('2001:db8:1:2:ffff::1', 'bad-password', true);
    assert.ok(a.retryAfterSec('2001:db8:1:2::99') > 0);
  });

  it('the window ends the count on every worker', () => {
    const { a, b, advance } = pair(4);
    for (let i = 0; i < 3; i++) a.failure('10.0.0.9', 'bad-password', true);
    advance(61_000);
    assert.equal(b.failure('10.0.0.9', 'bad-password', true).blocked, false, 'a new window on b');
    assert.equal(a.retryAfterSec('10.0.0.9'), 0);
  });

  it('a brake that is off shares nothing and counts nothing told', () => {
    const { a, b, told } = pair(0);
    for (let i = 0; i < 50; i++) a.failure('10.0.0.10', 'bad-password', true);
    b.failureElsewhere('10.0.0.10');
    assert.deepEqual(told, []);
    assert.equal(b.retryAfterSec('10.0.0.10'), 0);
  });
});
