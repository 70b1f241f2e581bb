/**
 * Wall-clock conversions in "the server's time zone". By default that is the process's local zone (TZ);
 * an explicit IANA name (e.g. 'Asia/Shanghai') can be given so a site, or a test, does not depend on TZ.
 */

export interface WallClock {
  year: number;
  month: number; // 1..12
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    // Throws RangeError for an unknown zone name, which is what a bad config should get.
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Throws a RangeError naming the zone when it is not a zone this runtime knows. */
export function assertTimeZone(timeZone: string | undefined): void {
  if (timeZone === undefined) return;
  try {
    formatterFor(timeZone);
  } catch {
    throw new RangeError(`unknown time zone '${timeZone}'`);
  }
}

export function wallClockOf(date: Date, timeZone?: string): WallClock {
  if (timeZone === undefined) {
    return {
      year: date.getFullYear(),
      month: date.getMonth() + 1,
      day: date.getDate(),
      hour: date.getHours(),
      minute: date.getMinutes(),
      second: date.getSeconds(),
    };
  }
  if (timeZone === 'UTC' || timeZone === 'Etc/UTC') {
    // Intl formatting costs microseconds per call; bulk path building (imports, the benchmark) notices.
    return {
      year: date.getUTCFullYear(),
      month: date.getUTCMonth() + 1,
      day: date.getUTCDate(),
      hour: date.getUTCHours(),
      minute: date.getUTCMinutes(),
      second: date.getUTCSeconds(),
    };
  }
  const parts = formatterFor(timeZone).formatToParts(date);
  const get = (t: Intl.DateTimeFormatPartTypes): number => Number(parts.find((p) => p.type === t)?.value);
  return { year: get('year'), month: get('month'), day: get('day'), hour: get('hour'), minute: get('minute'), second: get('second') };
}

/** Offset of the zone from UTC at that instant, in whole minutes, east positive (+480 for UTC+8). */
export function offsetMinutesAt(date: Date, timeZone?: string): number {
  if (timeZone === undefined) return -Math.round(date.getTimezoneOffset());
  const w = wallClockOf(date, timeZone);
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  const wholeSeconds = Math.floor(date.getTime() / 1000) * 1000;
  return Math.round((asUtc - wholeSeconds) / 60000);
}

export function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * The instant a wall-clock time names in the zone, or null when the fields are out of range (Feb 30, 24:00).
 * A time skipped by a DST jump resolves the way JavaScript's Date does (moved forward by the gap).
 */
export function instantOfWallClock(w: WallClock, timeZone?: string, ms = 0): Date | null {
  if (!(w.month >= 1 && w.month <= 12) || !(w.day >= 1 && w.day <= daysInMonth(w.year, w.month))) return null;
  if (!(w.hour >= 0 && w.hour <= 23 && w.minute >= 0 && w.minute <= 59 && w.second >= 0 && w.second <= 59)) return null;
  if (timeZone === undefined) {
    const d = new Date(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, ms);
    if (w.year < 100) d.setFullYear(w.year); // Date() maps years 0..99 to 1900..1999
    return d;
  }
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, ms);
  // The offset at the guessed instant may differ from the one at the answer across a DST change; one
  // correction step settles it.
  let t = asUtc - offsetMinutesAt(new Date(asUtc), timeZone) * 60000;
  const off2 = offsetMinutesAt(new Date(t), timeZone);
  t = asUtc - off2 * 60000;
  return new Date(t);
}

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** `+08:00`, `-05:00`, `+00:00` */
export function formatOffset(minutesEast: number): string {
  const sign = minutesEast < 0 ? '-' : '+';
  const abs = Math.abs(minutesEast);
  return `${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/** `yyyy-mm-ddTHH:mm:ss+08:00` in the zone, seconds precision (the spec's reqTm form). */
export function formatWithOffset(date: Date, timeZone?: string): string {
  const w = wallClockOf(date, timeZone);
  return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}` + formatOffset(offsetMinutesAt(date, timeZone));
}
