/**
 * Rows left in state 'recording' by a gateway that stopped without finishing them (kill -9, power loss): each is
 * closed with what its file really holds: size up to the last complete tag, end time from the file's mtime.
 */
import * as fs from 'node:fs';
import type { MediaTyp, RecordCatalog, StoredRecord } from './catalog';
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
  /** rows left for a later pass because their file was written to recently */
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
    // Shared catalog: another gateway may have opened this request a moment ago and not written its file yet.
    if (opts.quietMs > 0 && opts.now.getTime() - rec.reqTm.getTime() < opts.quietMs) return null;
    // A request that ends before any media leaves no record; one cut short before any media must not either,
    // or it would be listed for ever with a url that answers 404.
    await catalog.delete([rec.reqId]);
    return { reqId: rec.reqId, state: 'removed', sz: 0, truncated: 0 };
  }
  // mtimes are wall-clock time, whatever clock the gateway runs on
  if (opts.quietMs > 0 && Date.now() - st.mtimeMs < opts.quietMs) return null;
  const endTm = st.mtime;
  const ext = await flvExtent(file);
  if (!ext.flv) {
    await catalog.update(rec.reqId, { state: 'failed', sz: ext.size, endTm, error: 'the gateway stopped while recording and the file holds no FLV data' });
    return { reqId: rec.reqId, state: 'failed', sz: ext.size, truncated: 0 };
  }
  let sz = ext.size;
  if (ext.length < ext.size) {
    // A torn last tag: cut it so the file ends where the playable part ends.
    await fs.promises.truncate(file, ext.length);
    await fs.promises.utimes(file, endTm, endTm);
    sz = ext.length;
  }
  await catalog.update(rec.reqId, { state: 'done', sz, endTm, mediaTyp: rec.mediaTyp ?? typOf(ext.hasVideo, ext.hasAudio), error: null });
  return { reqId: rec.reqId, state: 'done', sz, truncated: ext.size - sz };
}

/** One pass over the catalog's unfinished rows. A row that cannot be examined now is left for the next pass. */
export async function recoverUnfinished(catalog: RecordCatalog, storeRoot: string, opts: RecoveryOptions): Promise<RecoveryResult> {
  const result: RecoveryResult = { recovered: [], skipped: 0, errors: [] };
  for (const rec of await catalog.listUnfinished()) {
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
