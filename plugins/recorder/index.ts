import * as path from 'node:path';
import { definePlugin } from '../../plugin-sdk';
import { API_DOCS } from '../../plugin-sdk';
import { recorderApi } from './src/api-doc';
import type { RecordCatalog } from './src/catalog';
import { openPostgresCatalog } from './src/catalog-postgres';
import { openSqliteCatalog } from './src/catalog-sqlite';
import { RecorderConfig } from './src/config';
import { startRecorder } from './src/recorder';
import { prepareStore } from './src/store-checks';
import { isStorageFailure } from './src/storage-errors';
import { assertTimeZone } from './src/zone-time';

export { RecorderConfig };

/**
 * Stores the media of requests opened with `record: true` as FLV files, catalogs them (SQLite in the data
 * directory, or PostgreSQL), answers GET /strm/record and serves the files to their owners.
 */
export default definePlugin({
  name: 'recorder',
  config: RecorderConfig,
  // the OpenAPI document (console plugin), when the site serves one
  uses: [API_DOCS],
  async setup(ctx) {
    const cfg = ctx.config;
    ctx.services.find(API_DOCS)?.describe(recorderApi());
    try {
      assertTimeZone(cfg.timeZone);
    } catch (err) {
      throw new Error(`config key timeZone: ${(err as Error).message}`, { cause: err });
    }
    const storeRoot = path.resolve(ctx.site.dataDir, cfg.storeRoot ?? 'records');
    // A full or failing disk must not take live play down with the recorder: those errors leave the recorder
    // degraded (it retries by itself); anything else is a configuration error that stops the boot.
    let unavailable: unknown;
    try {
      prepareStore(storeRoot);
    } catch (err) {
      if (!isStorageFailure(err))
        throw new Error(`config key storeRoot: cannot write to ${storeRoot} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, {
          cause: err,
        });
      unavailable = err;
    }

    let openCatalog: () => Promise<RecordCatalog>;
    let catalog: RecordCatalog | undefined;
    let catalogDir: (() => string) | undefined;
    if (cfg.postgresUrl) {
      const url = cfg.postgresUrl;
      openCatalog = () => openPostgresCatalog({ connectionString: url, table: cfg.postgresTable, timeZone: cfg.timeZone, poolConfig: { max: 4 } });
      try {
        catalog = await openCatalog();
      } catch (err) {
        // the URL may hold a password: name the key, not the value
        throw new Error(`config key postgresUrl: cannot open the catalog (${(err as Error).message})`, { cause: err });
      }
    } else {
      catalogDir = () => ctx.stores.dir();
      openCatalog = async () => openSqliteCatalog({ dir: ctx.stores.dir(), timeZone: cfg.timeZone });
      try {
        catalog = await openCatalog();
      } catch (err) {
        if (!isStorageFailure(err)) throw err;
        unavailable ??= err;
      }
    }
    try {
      return await startRecorder(ctx, { catalog, openCatalog, catalogDir, storeRoot, unavailable });
    } catch (err) {
      await catalog?.close().catch(() => undefined);
      throw err;
    }
  },
});
