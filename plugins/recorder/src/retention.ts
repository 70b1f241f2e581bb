/**
 * Stored-media retention: removes the oldest finished recordings (file and catalog row together) until
 * no record is older than maxAgeDays and the catalog's total size is within maxTotalBytes.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NodeScope, RecordCatalog, StoredRecord } from './catalog';

export interface RetentionPolicy {
  /** Records whose reqTm is more than this many days before now are removed. */
  maxAgeDays?: number;
  /** Oldest records are removed while the sum of sz over all records exceeds this. */
  maxTotalBytes?: number;
}

export interface RetentionOptions {
  now?: Date;
  /** rows fetched per round; default 200 */
  batchSize?: number;
  /**
   * Bytes on disk the catalog does not show yet (recordings whose size update is due or failed), added to its
   * total: on a full disk the file being written is what pushed the store past maxTotalBytes.
   */
  uncataloguedBytes?: number;
  /**
   * A node of a fleet (a catalog shared by nodes that each keep their own store): the limits count, and the pass
   * removes, only the rows naming this node (see NodeScope). Absent: every row (one node's catalog).
   */
  node?: NodeScope;
}

export interface RetentionResult {
  removed: StoredRecord[];
  freedBytes: number;
  /**
   * Bytes of files removed whose rows could not be deleted (a catalog on a full disk): the space is free, the
   * rows go at the next pass (their files are gone by then, which that pass accepts).
   */
  unlinkedBytes?: number;
  /** A file that could not be removed stops the pass (its row stays, so no file is orphaned); the next
   * pass tries again. */
  error?: { reqId: string; message: string };
}

export function checkRetentionPolicy(policy: RetentionPolicy): void {
  if (policy.maxAgeDays !== undefined && !(Number.isFinite(policy.maxAgeDays) && policy.maxAgeDays > 0)) {
    throw new RangeError(`retention maxAgeDays ${policy.maxAgeDays} must be a positive number`);
  }
  if (policy.maxTotalBytes !== undefined && !(Number.isSafeInteger(policy.maxTotalBytes) && policy.maxTotalBytes >= 0)) {
    throw new RangeError(`retention maxTotalBytes ${policy.maxTotalBytes} must be a non-negative integer`);
  }
}

/** Absolute path of a record's file, or null when its catalog path would lead outside the store root. */
export function fileOf(storeRoot: string, rec: Pick<StoredRecord, 'path'>): string | null {
  const root = path.resolve(storeRoot);
  const abs = path.resolve(root, ...rec.path.split('/'));
  // Catalog paths are built by recordPath, but a row edited by hand must still not delete outside the root.
  return abs.startsWith(root + path.sep) ? abs : null;
}

/**
 * One retention pass. Recordings in progress (state 'recording') are never candidates: catalog.oldest()
 * skips them, though their bytes count toward the total. Not safe to run twice concurrently on one store.
 */
export async function applyRetention(
  catalog: RecordCatalog,
  storeRoot: string,
  policy: RetentionPolicy,
  opts: RetentionOptions = {},
): Promise<RetentionResult> {
  checkRetentionPolicy(policy);
  const result: RetentionResult = { removed: [], freedBytes: 0 };
  if (policy.maxAgeDays === undefined && policy.maxTotalBytes === undefined) return result;
  const now = (opts.now ?? new Date()).getTime();
  const cutoff = policy.maxAgeDays === undefined ? -Infinity : now - policy.maxAgeDays * 86_400_000;
  const batchSize = opts.batchSize ?? 200;
  let total = policy.maxTotalBytes === undefined ? 0 : (await catalog.totalBytes(opts.node)) + Math.max(0, opts.uncataloguedBytes ?? 0);
  const overSize = (): boolean => policy.maxTotalBytes !== undefined && total > policy.maxTotalBytes;

  for (;;) {
    const batch = await catalog.oldest(batchSize, opts.node);
    const doomed: StoredRecord[] = [];
    let stop = batch.length < batchSize;
    for (const rec of batch) {
      if (!(rec.reqTm.getTime() < cutoff || overSize())) {
        stop = true;
        break;
      }
      const file = fileOf(storeRoot, rec);
      if (file !== null) {
        try {
          await fs.promises.unlink(file);
        } catch (err) {
          // Already gone (e.g. a crash after the unlink last time): the row still goes.
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
            result.error = { reqId: rec.reqId, message: (err as Error).message };
            stop = true;
            break;
          }
        }
      }
      doomed.push(rec);
      total -= rec.sz;
    }
    // Files first, rows after: a crash in between leaves rows whose files are gone, which the next pass
    // clears, rather than files nothing points to.
    if (doomed.length > 0) {
      try {
        await catalog.delete(doomed.map((r) => r.reqId));
      } catch (err) {
        result.unlinkedBytes = doomed.reduce((n, r) => n + r.sz, 0);
        result.error = { reqId: doomed[0]!.reqId, message: (err as Error).message };
        return result;
      }
      for (const r of doomed) {
        result.removed.push(r);
        result.freedBytes += r.sz;
      }
    }
    if (stop) return result;
  }
}
