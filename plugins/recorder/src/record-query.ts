/** Runs a parsed GET /strm/record query against the catalog for the calling application. */
import { appFilterExcludesAll, type RecordCatalog, type RecordState, type StoredRecord } from './catalog';
import type { RecordQuery } from './query-params';

export interface FindOptions {
  /** Only records in these states; default all (a recording in progress already has a playable file). */
  states?: readonly RecordState[];
}

/**
 * The caller's records for the query: an unknown, foreign or filtered-out reqId gives [] (decisions.md:
 * errCode 0, data []), and in reqId mode only page 1 can hold the one record.
 */
export async function findRecords(catalog: RecordCatalog, callerAppId: string, query: RecordQuery, opts: FindOptions = {}): Promise<StoredRecord[]> {
  if (query.mode === 'reqId') {
    if (query.page !== 1 || appFilterExcludesAll(callerAppId, query.appIdFilter)) return [];
    const rec = await catalog.getByReqId(callerAppId, query.reqId);
    if (!rec || (opts.states && !opts.states.includes(rec.state))) return [];
    return [rec];
  }
  return catalog.queryRange({
    appId: callerAppId,
    ...(query.appIdFilter !== undefined ? { appIdFilter: query.appIdFilter } : {}),
    ...(query.simNo !== undefined ? { simNo: query.simNo } : {}),
    start: query.start,
    end: query.end,
    page: query.page,
    limit: query.limit,
    ...(opts.states ? { states: opts.states } : {}),
  });
}
