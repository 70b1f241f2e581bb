/**
 * Which errors mean "the disk (or the catalog's) is full or failing" rather than "this gateway is misconfigured":
 * the first kind degrades the recorder and is worth a retention pass, the second still stops the gateway at boot.
 */

/** err.code of an fs, SQLite (better-sqlite3) or PostgreSQL (pg) error, when it has one. */
export function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && code.length > 0 ? code : undefined;
}

// 53100 is PostgreSQL's disk_full; SQLITE_FULL is SQLite's "database or disk is full"; SQLITE_IOERR_SHMSIZE is
// what opening an existing WAL catalog gives on a full disk (its -shm file cannot be allocated), though SQLite
// words it "disk I/O error".
const NO_SPACE = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL', 'SQLITE_IOERR_SHMSIZE', '53100']);

/** Out of space: a retention pass may cure it. */
export function isNoSpace(err: unknown): boolean {
  const code = codeOf(err);
  return code !== undefined && NO_SPACE.has(code);
}

/**
 * The storage under the recorder failed (full, or an I/O error): the recorder starts degraded instead of stopping
 * the gateway, and tries again on its own. Permission and configuration errors are not in this set.
 */
export function isStorageFailure(err: unknown): boolean {
  if (isNoSpace(err)) return true;
  const code = codeOf(err);
  return code === 'EIO' || (code?.startsWith('SQLITE_IOERR') ?? false);
}

/**
 * Why recording is unavailable, in words an application may be shown: the error code, never a path of the
 * server's disk (fs messages carry them).
 */
export function unavailableReason(err: unknown): string {
  const code = codeOf(err);
  if (isNoSpace(err)) return `the record store is out of space (${code})`;
  if (code) return `the record store failed (${code})`;
  return `the record store failed (${String((err as Error | undefined)?.message ?? err)})`;
}

/** An error for the log and the catalog row: its code and message. */
export function describeError(err: unknown): string {
  const e = err as NodeJS.ErrnoException | undefined;
  return e?.code && !String(e.message).startsWith(e.code) ? `${e.code}: ${e.message}` : String(e?.message ?? err);
}

/**
 * The same for an application (request status, notices): without the quoted paths node puts into fs messages
 * ("ENOSPC: no space left on device, open '/srv/records/…'"), which are the server's business.
 */
export function publicError(err: unknown): string {
  return describeError(err).replace(/ ?'[^']*'(?: -> '[^']*')?/g, '');
}
