/**
 * Query parameters of GET /strm/record (spec "Stored media query parameters", decisions.md "Stored media").
 * The result names the first bad field so the route can answer -7 "Invalid parameter `field`.".
 */
import { SIM_NO_PATTERN, normaliseSimNo } from './sim-no';
import { instantOfWallClock } from './zone-time';

export const MAX_SPAN_MS = 100 * 24 * 3600 * 1000;
export const DEFAULT_PAGE = 1;
export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 2000;
/** Beyond this a page is certainly empty; the bound keeps (page - 1) * limit an exact integer. */
export const MAX_PAGE = 2 ** 31 - 1;

export interface RecordQueryByReqId {
  mode: 'reqId';
  reqId: string;
  appIdFilter?: string;
  page: number;
  limit: number;
}

export interface RecordQueryByRange {
  mode: 'range';
  /** inclusive */
  start: Date;
  /** inclusive; a second-precision endTm covers its whole second (…:59.999) */
  end: Date;
  appIdFilter?: string;
  /** normalised */
  simNo?: string;
  page: number;
  limit: number;
}

export type RecordQuery = RecordQueryByReqId | RecordQueryByRange;
export type RecordQueryParse = { ok: true; query: RecordQuery } | { ok: false; field: string };

export type QueryInput = URLSearchParams | Record<string, string | string[] | undefined>;

export interface ParseOptions {
  /** "now" for a missing endTm; default the current time. */
  now?: Date;
  /** IANA zone for times without an offset; default the process's local zone. */
  timeZone?: string;
}

/** Ids the open call can hand out (decisions.md rule 1, plus generated base64url ids). */
export const REQ_ID_PATTERN = /^[A-Za-z0-9_\-$.~]{8,40}$/;
export const MAX_APP_ID_LENGTH = 128;

// `yyyy-mm-dd HH:mm:ss`, `yyyy-mm-ddTHH:mm:ssZ`, optional fraction, optional `±HH:mm` / `±HHmm`.
// A space where the offset sign should be is a `+` that an unencoded query string turned into a space.
export const TIME_PATTERN = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+\- ])(\d{2}):?(\d{2}))?$/;

interface ParsedTime {
  at: Date;
  /** the value named a whole second (no fraction), so as an end bound it covers that second */
  wholeSecond: boolean;
}

/** Parses one of the accepted time forms; null when the text or the date is not valid. */
export function parseQueryTime(text: string, timeZone?: string): ParsedTime | null {
  const m = TIME_PATTERN.exec(text.trim());
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (year < 1000) return null;
  const fraction = m[7];
  const ms = fraction ? Number(fraction.slice(0, 3).padEnd(3, '0')) : 0;
  const w = { year, month, day, hour, minute, second };
  let at: Date | null;
  if (m[8] || m[9]) {
    at = instantOfWallClock(w, 'UTC', ms);
    if (at && m[9]) {
      const offH = Number(m[10]);
      const offM = Number(m[11]);
      if (offH > 23 || offM > 59) return null;
      const sign = m[9] === '-' ? -1 : 1;
      at = new Date(at.getTime() - sign * (offH * 60 + offM) * 60000);
    }
  } else {
    at = instantOfWallClock(w, timeZone, ms);
  }
  if (!at || Number.isNaN(at.getTime())) return null;
  return { at, wholeSecond: fraction === undefined };
}

type Lookup = (name: string) => string | undefined | null;

function lookupOf(input: QueryInput): Lookup {
  if (input instanceof URLSearchParams) {
    return (name) => {
      const all = input.getAll(name);
      if (all.length > 1) return null;
      return all[0];
    };
  }
  return (name) => {
    const v = Object.prototype.hasOwnProperty.call(input, name) ? input[name] : undefined;
    if (Array.isArray(v)) return v.length === 1 ? v[0] : v.length === 0 ? undefined : null;
    return v;
  };
}

const bad = (field: string): RecordQueryParse => ({ ok: false, field });

function parseInteger(text: string, min: number, max: number): number | null {
  if (!/^[0-9]{1,12}$/.test(text)) return null;
  const n = Number(text);
  return n >= min && n <= max ? n : null;
}

/**
 * Validates the query. reqId mode when `reqId` is given (startTm, endTm and simNo are then ignored);
 * otherwise time-range mode, which needs startTm. Empty values count as absent; a parameter given twice
 * is invalid. Checked in order: reqId, startTm, endTm, appId, simNo, __page, __limit.
 */
export function parseRecordQuery(input: QueryInput, opts: ParseOptions = {}): RecordQueryParse {
  const raw = lookupOf(input);
  // undefined: absent; null: invalid (repeated)
  const get = (name: string): string | undefined | null => {
    const v = raw(name);
    return v === '' ? undefined : v;
  };

  const reqId = get('reqId');
  if (reqId === null || (reqId !== undefined && !REQ_ID_PATTERN.test(reqId))) return bad('reqId');

  let range: { start: Date; end: Date; simNo?: string } | undefined;
  if (reqId === undefined) {
    const startText = get('startTm');
    if (startText == null) return bad('startTm');
    const start = parseQueryTime(startText, opts.timeZone);
    if (!start) return bad('startTm');

    const endText = get('endTm');
    if (endText === null) return bad('endTm');
    let endAt: Date;
    let endBound: Date;
    if (endText === undefined) {
      endAt = opts.now ?? new Date();
      endBound = endAt;
    } else {
      const end = parseQueryTime(endText, opts.timeZone);
      if (!end) return bad('endTm');
      endAt = end.at;
      endBound = end.wholeSecond ? new Date(end.at.getTime() + 999) : end.at;
    }
    // When endTm defaulted to now, the caller only wrote startTm, so that is the field to blame.
    const spanField = endText === undefined ? 'startTm' : 'endTm';
    const span = endAt.getTime() - start.at.getTime();
    if (span < 0 || span > MAX_SPAN_MS) return bad(spanField);
    range = { start: start.at, end: endBound };
  }

  const appId = get('appId');
  if (appId === null || (appId !== undefined && appId.length > MAX_APP_ID_LENGTH)) return bad('appId');

  if (range) {
    const simNo = get('simNo');
    if (simNo === null || (simNo !== undefined && !SIM_NO_PATTERN.test(simNo))) return bad('simNo');
    if (simNo !== undefined) range.simNo = normaliseSimNo(simNo);
  }

  const pageText = get('__page');
  const page = pageText === undefined ? DEFAULT_PAGE : pageText === null ? null : parseInteger(pageText, 1, MAX_PAGE);
  if (page === null) return bad('__page');
  const limitText = get('__limit');
  const limit = limitText === undefined ? DEFAULT_LIMIT : limitText === null ? null : parseInteger(limitText, 1, MAX_LIMIT);
  if (limit === null) return bad('__limit');

  const appIdFilter = appId === undefined ? {} : { appIdFilter: appId };
  if (reqId !== undefined) return { ok: true, query: { mode: 'reqId', reqId, ...appIdFilter, page, limit } };
  const r = range!;
  return {
    ok: true,
    query: { mode: 'range', start: r.start, end: r.end, ...appIdFilter, ...(r.simNo !== undefined ? { simNo: r.simNo } : {}), page, limit },
  };
}
