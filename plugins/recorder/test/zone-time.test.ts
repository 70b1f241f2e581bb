import assert from 'node:assert/strict';
import { formatOffset, instantOfWallClock, offsetMinutesAt, wallClockOf } from '../src/zone-time';

const w = (year: number, month: number, day: number, hour = 0, minute = 0, second = 0) => ({ year, month, day, hour, minute, second });

describe('server time zone helpers', () => {
  it('converts wall clock to instant and back in a named zone', () => {
    assert.deepEqual(instantOfWallClock(w(2024, 5, 1, 0, 30), 'Asia/Shanghai'), new Date('2024-04-30T16:30:00Z'));
    assert.deepEqual(wallClockOf(new Date('2024-04-30T16:30:00Z'), 'Asia/Shanghai'), w(2024, 5, 1, 0, 30));
    assert.equal(offsetMinutesAt(new Date('2024-04-30T16:30:00Z'), 'Asia/Shanghai'), 480);
  });

  it('picks the right offset on both sides of a daylight-saving change', () => {
    // New York: 2024-03-10 02:00 EST jumps to 03:00 EDT.
    assert.deepEqual(instantOfWallClock(w(2024, 3, 10, 1, 59, 59), 'America/New_York'), new Date('2024-03-10T06:59:59Z'));
    assert.deepEqual(instantOfWallClock(w(2024, 3, 10, 3, 0, 0), 'America/New_York'), new Date('2024-03-10T07:00:00Z'));
    assert.equal(offsetMinutesAt(new Date('2024-03-10T06:59:59Z'), 'America/New_York'), -300);
    assert.equal(offsetMinutesAt(new Date('2024-03-10T07:00:00Z'), 'America/New_York'), -240);
  });

  it('refuses impossible dates and times', () => {
    assert.equal(instantOfWallClock(w(2023, 2, 29), 'UTC'), null);
    assert.ok(instantOfWallClock(w(2024, 2, 29), 'UTC'));
    assert.equal(instantOfWallClock(w(2024, 4, 31)), null);
    assert.equal(instantOfWallClock(w(2024, 1, 1, 24)), null);
    assert.equal(instantOfWallClock(w(2024, 0, 1)), null);
  });

  it('formats offsets with sign, hours and minutes', () => {
    assert.equal(formatOffset(480), '+08:00');
    assert.equal(formatOffset(-210), '-03:30');
    assert.equal(formatOffset(0), '+00:00');
    assert.equal(formatOffset(345), '+05:45');
  });
});
