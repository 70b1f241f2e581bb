/** The StoredAv JSON of the spec, built from a catalog record. */
import type { MediaTyp, StoredRecord } from './catalog';
import { formatWithOffset } from './zone-time';

export interface StoredAv {
  reqId: string;
  /** `yyyy-mm-ddTHH:mm:ss+08:00`: the server's zone with its numeric offset */
  reqTm: string;
  appId: string;
  simNo: string;
  chan: number;
  live: boolean;
  path: string;
  ext: string;
  sz: number;
  url: string;
  /** omitted when the type could not be recognised */
  mediaTyp?: MediaTyp;
}

export interface StoredAvOptions {
  /** IANA zone for reqTm; default the process's local zone. */
  timeZone?: string;
}

// Unreserved and sub-delim characters (RFC 3986 pchar) stay readable; anything else is escaped, though
// catalog paths only ever hold [0-9A-Za-z._~$-] and '/'.
function encodePath(p: string): string {
  return p
    .split('/')
    .map((seg) => encodeURIComponent(seg).replace(/%24/g, '$'))
    .join('/');
}

/** `{apiBase}/strm/record/file/{path}`; a trailing slash on apiBase is ignored. */
export function recordFileUrl(apiBase: string, relPath: string): string {
  return `${apiBase.replace(/\/+$/, '')}/strm/record/file/${encodePath(relPath)}`;
}

/**
 * The record's url: on the node that recorded it (the row's apiBase), whichever node is asked; a row catalogued
 * before rows named their node uses `fallbackApiBase`, the asking node's.
 */
export function storedRecordUrl(rec: Pick<StoredRecord, 'apiBase' | 'path'>, fallbackApiBase: string): string {
  return recordFileUrl(rec.apiBase ?? fallbackApiBase, rec.path);
}

/** `apiBase`: the querying node's, for rows that do not name the node that recorded them. */
export function toStoredAv(rec: StoredRecord, apiBase: string, opts: StoredAvOptions = {}): StoredAv {
  // Field order follows the spec's table, which is what clients that print the JSON see.
  const av: StoredAv = {
    reqId: rec.reqId,
    reqTm: formatWithOffset(rec.reqTm, opts.timeZone),
    appId: rec.appId,
    simNo: rec.simNo,
    chan: rec.chan,
    live: rec.live,
    path: rec.path,
    ext: rec.ext,
    sz: rec.sz,
    url: storedRecordUrl(rec, apiBase),
  };
  if (rec.mediaTyp !== null) av.mediaTyp = rec.mediaTyp;
  return av;
}
