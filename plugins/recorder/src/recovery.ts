/**
 * Rows left in state 'recording' by a gateway that stopped without finishing them (kill -9, power loss): each is
 * closed with what its file really holds: size up to the last complete tag, end time from the file's mtime.
 */
import * as fs from 'node:fs';
import type { MediaTyp, NodeScope, RecordCatalog, StoredRecord } from './catalog';
import { flvExtent } from './flv-tail';
import { fileOf } from './retention';

export interface RecoveryOptions {
  /** end time for rows whose file is missing */
  now: Date;
  /**
   * A file written to within this many ms may still be recorded by another gateway sharing the catalog
   * (PostgreSQL) or another worker of this one: it is left for a later pass. 0 for a catalog no one else writes to.
   */
  quietMs: number;
  /** rows this gateway is recording right now */
  isActive(reqId: string): boolean;
  /**
   * A node of a fleet (a catalog shared by nodes that each keep their own store): only rows naming this node, and
   * rows naming none, are looked at; of the latter, one whose file is not in this store is left as it is (it may
   * be on another node), never removed. Absent: every row (one node's catalog).
   */
  node?: NodeScope;
}

export interface RecoveredRow {
  reqId: string;
  /** removed: no file was ever written (stopped before the first keyframe), so no record is kept either */
  state: 'done' | 'failed' | 'removed';
  sz: number;
  /** bytes cut from a torn last tag */
  truncated: number;
}

export interface RecoveryResult {
  recovered: RecoveredRow[];
  /** rows left as they are: their file was written to recently (a later pass looks again), or another writer of the catalog closed them meanwhile */
  skipped: number;
  /** rows that could not be examined (left as they are for the next pass) */
  errors: Array<{ reqId: string; message: string }>;
}

function typOf(hasVideo: boolean | undefined, hasAudio: boolean | undefined): MediaTyp | null {
  if (hasVideo && hasAudio) return 'av';
  if (hasVideo) return 'v';
  if (hasAudio) return 'a';
  return null;
}

async function recoverOne(catalog: RecordCatalog, storeRoot: string, rec: StoredRecord, opts: RecoveryOptions): Promise<RecoveredRow | null> {
  const file = fileOf(storeRoot, rec);
  let st: fs.Stats | undefined;
  if (file) {
    try {
      st = await fs.promises.lstat(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  if (!file || !st || !st.isFile()) {
    // A row from before rows named their node, in a fleet: its file may be in another node's store.
    if (opts.node && rec.apiBase === null) return null;
    // Shared catalog: another gateway may have opened this request a moment ago and not written its file yet.
    if (opts.quietMs > 0 && opts.now.getTime() - rec.reqTm.getTime() < opts.quietMs) return null;
    // A request that ends before any media leaves no record; one cut short before any media must not either,
    // or it would be listed for ever with a url that answers 404.
    if ((await catalog.delete([rec.reqId])) === 0) return null;
    return { reqId: rec.reqId, state: 'removed', sz: 0, truncated: 0 };
  }
  // mtimes are wall-clock time, whatever clock the gateway runs on
  if (opts.quietMs > 0 && Date.now() - st.mtimeMs < opts.quietMs) return null;
  // the file is here: a row naming no node becomes this node's (its retention then counts it)
  if (opts.node && rec.apiBase === null) await catalog.claim([rec.reqId], opts.node.apiBase);
  const endTm = st.mtime;
  const ext = await flvExtent(file);
  // Each close is made only while the row is still 'recording': another writer of a shared catalog (a worker, a
  // node) may list the same orphan in the same moment, and then only one of them closes it, logs and counts it.
  if (!ext.flv) {
    const error = 'the gateway stopped while recording and the file holds no FLV data';
    if (!(await catalog.update(rec.reqId, { state: 'failed', sz: ext.size, endTm, error }, true))) return null;
    return { reqId: rec.reqId, state: 'failed', sz: ext.size, truncated: 0 };
  }
  let sz = ext.size;
  if (ext.length < ext.size) {
    // A torn last tag: cut it so the file ends where the playable part ends.
    await fs.promises.truncate(file, ext.length);
    await fs.promises.utimes(file, endTm, endTm);
    sz = ext.length;
  }
  const closed = await catalog.update(rec.reqId, { state: 'done', sz, endTm, mediaTyp: rec.mediaTyp ?? typOf(ext.hasVideo, ext.hasAudio), error: null }, true);
  if (!closed) return null;
  return { reqId: rec.reqId, state: 'done', sz, truncated: ext.size - sz };
}

/** One pass over the catalog's unfinished rows. A row that cannot be examined now is left for the next pass. */
export async function recoverUnfinished(catalog: RecordCatalog, storeRoot: string, opts: RecoveryOptions): Promise<RecoveryResult> {
  const result: RecoveryResult = { recovered: [], skipped: 0, errors: [] };
  for (const rec of await catalog.listUnfinished(opts.node)) {
    if (opts.isActive(rec.reqId)) continue;
    try {
      const r = await recoverOne(catalog, storeRoot, rec, opts);
      if (r) result.recovered.push(r);
      else result.skipped++;
    } catch (err) {
      result.errors.push({ reqId: rec.reqId, message: (err as Error).message });
    }
  }
  return result;
}

export interface ClaimResult {
  /** rows naming no node whose file this store holds: they now name this node */
  claimed: number;
  /** rows naming no node whose file is not here (left as they are) */
  left: number;
  /** rows whose file could not be looked at (left for the next try) */
  errors: Array<{ reqId: string; message: string }>;
}

/**
 * A node of a fleet claims the rows naming no node (catalogued before api_base existed) whose files its store
 * holds: from then on its recovery and retention treat them as its own, and they list with its url. Run once per
 * start, before the first recovery and retention pass (rows naming no node are only written by gateways of the
 * previous version, which claim theirs when they start as this version). Rows whose file is in no store stay as
 * they are: no node's retention counts or removes them, and recovery never removes them.
 */
export async function claimUnnamed(catalog: RecordCatalog, storeRoot: string, node: NodeScope, batchSize = 500): Promise<ClaimResult> {
  const result: ClaimResult = { claimed: 0, left: 0, errors: [] };
  let after: string | null = null;
  for (;;) {
    const batch: StoredRecord[] = await catalog.listUnnamed(after, batchSize);
    const mine: string[] = [];
    for (const rec of batch) {
      const file = fileOf(storeRoot, rec);
      if (!file) {
        result.left++;
        continue;
      }
      try {
        if ((await fs.promises.lstat(file)).isFile()) mine.push(rec.reqId);
        else result.left++;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') result.left++;
        else result.errors.push({ reqId: rec.reqId, message: (err as Error).message });
      }
    }
    if (mine.length > 0) {
      const n = await catalog.claim(mine, node.apiBase);
      result.claimed += n;
      // claimed meanwhile by another node sharing this store
      result.left += mine.length - n;
    }
    if (batch.length < batchSize) return result;
    after = batch[batch.length - 1]!.reqId;
  }
}
