/**
 * The stored-media catalog: one row per recorded request, what GET /strm/record answers from and what
 * retention walks. Two implementations share this contract: catalog-sqlite.ts (embedded) and
 * catalog-postgres.ts (shared by several gateway instances).
 */
import { normaliseSimNo, SIM_NO_PATTERN } from './sim-no';
import { wallClockOf } from './zone-time';

export type MediaTyp = 'av' | 'a' | 'v';
export type RecordState = 'recording' | 'done' | 'failed';

export const MEDIA_TYPS: readonly MediaTyp[] = ['av', 'a', 'v'];
export const RECORD_STATES: readonly RecordState[] = ['recording', 'done', 'failed'];

export interface StoredRecord {
  reqId: string;
  appId: string;
  /** normalised (see normaliseSimNo) */
  simNo: string;
  chan: number;
  live: boolean;
  reqTm: Date;
  /** relative to the store root, `/`-separated: `{yyyy}/{MM}/{simNo}/{reqId}.flv` */
  path: string;
  ext: 'flv';
  sz: number;
  mediaTyp: MediaTyp | null;
  state: RecordState;
  endTm: Date | null;
  error: string | null;
  /**
   * The apiBase of the gateway node that recorded the file (its file url is `{apiBase}/strm/record/file/{path}`,
   * and only that node's store holds it); null for rows catalogued before the column existed.
   */
  apiBase: string | null;
}

/** What the recorder knows when a recording begins. */
export interface RecordStart {
  reqId: string;
  appId: string;
  simNo: string;
  chan: number;
  live: boolean;
  reqTm: Date;
  mediaTyp?: MediaTyp | null;
  /** the recording node's apiBase (ctx.site.apiBase), stored with the row; a trailing slash is dropped */
  apiBase?: string | null;
}

/** Fields the recorder changes as the file grows and when it ends; absent fields stay as they are. */
export interface RecordUpdate {
  sz?: number;
  mediaTyp?: MediaTyp | null;
  state?: RecordState;
  endTm?: Date | null;
  error?: string | null;
}

export interface RangeQuery {
  /** The caller's application (from its credentials); always applied. */
  appId: string;
  /** The `appId` query parameter: it can only narrow, so any other value than appId gives no rows. */
  appIdFilter?: string;
  /** Normalised here too, so `0138...` finds `138...`. */
  simNo?: string;
  /** reqTm >= start (inclusive) */
  start: Date;
  /** reqTm <= end (inclusive, milliseconds) */
  end: Date;
  /** from 1 */
  page: number;
  /** rows per page, >= 1 */
  limit: number;
  /** Only rows in these states; all states when absent. */
  states?: readonly RecordState[];
}

export interface RecordCatalog {
  /** Adds a row in state 'recording' with sz 0; rejects when reqId already exists. */
  insertStart(rec: RecordStart): Promise<StoredRecord>;
  /**
   * true when the row existed (with `ifRecording`: and was still in state 'recording', so that of several writers
   * closing the same orphan at once, one does).
   */
  update(reqId: string, patch: RecordUpdate, ifRecording?: boolean): Promise<boolean>;
  /** The caller's own record, or null for an unknown or another application's reqId. */
  getByReqId(appId: string, reqId: string): Promise<StoredRecord | null>;
  /** Ordered by reqTm ascending, then reqId; OFFSET paging. */
  queryRange(q: RangeQuery): Promise<StoredRecord[]>;
  /**
   * Rows still in state 'recording' (after a crash: files to finish or mark failed), oldest first. With a node:
   * only rows naming that node, and rows naming no node (see NodeScope).
   */
  listUnfinished(node?: NodeScope): Promise<StoredRecord[]>;
  /**
   * The n oldest rows that are not recording (retention candidates), reqTm then reqId ascending. With a node:
   * only rows naming that node (rows naming no node are not counted: see NodeScope).
   */
  oldest(n: number, node?: NodeScope): Promise<StoredRecord[]>;
  /**
   * Sum of sz over every row, recordings in progress included (they occupy the disk too). With a node: over the
   * rows naming that node only, as oldest().
   */
  totalBytes(node?: NodeScope): Promise<number>;
  /** Up to n rows naming no node (api_base null), reqId ascending, after the reqId `after` (keyset paging). */
  listUnnamed(after: string | null, n: number): Promise<StoredRecord[]>;
  /**
   * Names the node on rows that name none yet (a row already naming a node keeps it, so two nodes claiming at
   * once cannot take it from each other); returns how many it named.
   */
  claim(reqIds: readonly string[], apiBase: string): Promise<number>;
  /** Removes the rows; returns how many existed. */
  delete(reqIds: readonly string[]): Promise<number>;
  close(): Promise<void>;
}

/**
 * The rows one node of a fleet (nodes sharing a PostgreSQL catalog, each with its own store) treats in its recovery
 * and retention passes: those naming its apiBase. Rows naming no node (catalogued before api_base existed) are
 * listed by listUnfinished() too, for recovery to close when this node's store holds their file (and leave
 * alone when it does not); oldest() and totalBytes() leave them out: a node claims (claim()) those whose file its
 * store holds before its first pass, and the rest are on some other node, or on none. Without a scope every row
 * is treated: a single node, whose store holds every file its catalog lists.
 */
export interface NodeScope {
  /** this node's apiBase (ctx.site.apiBase); a trailing slash is dropped */
  apiBase: string;
}

export interface CatalogOptions {
  /** IANA zone for the `{yyyy}/{MM}` of paths; default the process's local zone. */
  timeZone?: string;
}

/** decisions.md: 8..40 of these for client ids, 22 for generated ones; wider here only in length. */
const REQ_ID_PATTERN = /^[A-Za-z0-9_\-$.~]{1,64}$/;

/** gateway.apiBase is free text in the kernel's config: only what cannot be a URL prefix is refused */
// eslint-disable-next-line no-control-regex -- control characters are what it keeps out
const API_BASE_PATTERN = /^[^\x00-\x20\x7f]{1,2048}$/;

function checkRecordStart(rec: RecordStart): void {
  // reqId and simNo become file and directory names, so anything outside the open call's charsets is
  // refused here rather than trusted.
  if (typeof rec.reqId !== 'string' || !REQ_ID_PATTERN.test(rec.reqId))
    throw new TypeError(`record reqId ${JSON.stringify(rec.reqId)} is not a valid request id`);
  if (typeof rec.appId !== 'string' || rec.appId.length === 0) throw new TypeError('record appId must be a non-empty string');
  if (typeof rec.simNo !== 'string' || !SIM_NO_PATTERN.test(rec.simNo))
    throw new TypeError(`record simNo ${JSON.stringify(rec.simNo)} is not a valid SIM number`);
  if (!Number.isInteger(rec.chan) || rec.chan < 0 || rec.chan > 255) throw new TypeError(`record chan ${rec.chan} must be an integer 0..255`);
  if (typeof rec.live !== 'boolean') throw new TypeError('record live must be a boolean');
  if (!(rec.reqTm instanceof Date) || Number.isNaN(rec.reqTm.getTime())) throw new TypeError('record reqTm must be a valid Date');
  if (rec.mediaTyp != null && !MEDIA_TYPS.includes(rec.mediaTyp)) throw new TypeError(`record mediaTyp ${JSON.stringify(rec.mediaTyp)} is not av, a or v`);
  if (rec.apiBase != null && (typeof rec.apiBase !== 'string' || !API_BASE_PATTERN.test(rec.apiBase)))
    throw new TypeError(`record apiBase ${JSON.stringify(rec.apiBase)} must be a non-empty string of at most 2048 printable characters`);
}

/** apiBase as stored and compared: without trailing slashes, as the kernel hands it to plugins. */
export function normaliseApiBase(apiBase: string): string {
  return apiBase.replace(/\/+$/, '');
}

/** n of oldest() and listUnnamed(): a non-negative integer */
export function checkLimit(method: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${method}(n): n ${n} must be a non-negative integer`);
}

/** The apiBase claim() writes, normalised as insertStart's. */
export function checkClaim(apiBase: string): string {
  const base = typeof apiBase === 'string' ? normaliseApiBase(apiBase) : '';
  if (!API_BASE_PATTERN.test(base))
    throw new TypeError(`claim apiBase ${JSON.stringify(apiBase)} must be a non-empty string of at most 2048 printable characters`);
  return base;
}

export function checkRecordUpdate(patch: RecordUpdate): void {
  if (patch.sz !== undefined && (!Number.isSafeInteger(patch.sz) || patch.sz < 0)) throw new TypeError(`record sz ${patch.sz} must be a non-negative integer`);
  if (patch.mediaTyp != null && !MEDIA_TYPS.includes(patch.mediaTyp))
    throw new TypeError(`record mediaTyp ${JSON.stringify(patch.mediaTyp)} is not av, a or v`);
  if (patch.state !== undefined && !RECORD_STATES.includes(patch.state))
    throw new TypeError(`record state ${JSON.stringify(patch.state)} is not recording, done or failed`);
  if (patch.endTm != null && (!(patch.endTm instanceof Date) || Number.isNaN(patch.endTm.getTime())))
    throw new TypeError('record endTm must be a valid Date or null');
}

export function checkRangeQuery(q: RangeQuery): void {
  if (!Number.isSafeInteger(q.page) || q.page < 1) throw new RangeError(`page ${q.page} must be an integer from 1`);
  if (!Number.isSafeInteger(q.limit) || q.limit < 1) throw new RangeError(`limit ${q.limit} must be a positive integer`);
  if (!Number.isSafeInteger((q.page - 1) * q.limit)) throw new RangeError('page * limit is too large');
  if (Number.isNaN(q.start.getTime()) || Number.isNaN(q.end.getTime())) throw new RangeError('start and end must be valid Dates');
}

/** A directory name that can never be `.` or `..`, whatever simNo the open call allowed. */
function safeSegment(s: string): string {
  return /^\.+$/.test(s) ? s.replace(/\./g, '_') : s;
}

/** `{yyyy}/{MM}/{simNo}/{reqId}.flv`, year and month of reqTm in the zone; simNo normalised. */
export function recordPath(simNo: string, reqId: string, reqTm: Date, timeZone?: string): string {
  const w = wallClockOf(reqTm, timeZone);
  return `${String(w.year).padStart(4, '0')}/${String(w.month).padStart(2, '0')}/${safeSegment(normaliseSimNo(simNo))}/${reqId}.flv`;
}

/** The row a fresh recording starts with; both implementations insert exactly this. */
export function startedRecord(rec: RecordStart, timeZone?: string): StoredRecord {
  checkRecordStart(rec);
  const simNo = normaliseSimNo(rec.simNo);
  return {
    reqId: rec.reqId,
    appId: rec.appId,
    simNo,
    chan: rec.chan,
    live: rec.live,
    reqTm: new Date(rec.reqTm.getTime()),
    path: recordPath(simNo, rec.reqId, rec.reqTm, timeZone),
    ext: 'flv',
    sz: 0,
    mediaTyp: rec.mediaTyp ?? null,
    state: 'recording',
    endTm: null,
    error: null,
    apiBase: rec.apiBase == null ? null : normaliseApiBase(rec.apiBase) || null,
  };
}

/** The narrowing rule of decisions.md: a filter naming another application matches nothing. */
export function appFilterExcludesAll(appId: string, appIdFilter: string | undefined): boolean {
  return appIdFilter !== undefined && appIdFilter !== appId;
}

/** insertStart of a reqId the catalog already holds (both implementations throw this). */
export class DuplicateRecordError extends Error {
  readonly reqId: string;
  constructor(reqId: string) {
    super(`a stored record with reqId '${reqId}' already exists`);
    this.name = 'DuplicateRecordError';
    this.reqId = reqId;
  }
}
