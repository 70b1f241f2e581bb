import * as fs from 'node:fs';
import * as path from 'node:path';
import { definePlugin } from '../../plugin-sdk';
import type { RecordCatalog } from './src/catalog';
import { openPostgresCatalog } from './src/catalog-postgres';
import { openSqliteCatalog } from './src/catalog-sqlite';
import { RecorderConfig } from './src/config';
import { startRecorder } from './src/recorder';
import { assertTimeZone } from './src/zone-time';

export { RecorderConfig };

/**
 * Stores the media of requests opened with `record: true` as FLV files, catalogs them (SQLite in the data
 * directory, or PostgreSQL), answers GET /strm/record and serves the files to their owners.
 */
export default definePlugin({
  name: 'recorder',
  config: RecorderConfig,
  async setup(ctx) {
    const cfg = ctx.config;
    try {
      assertTimeZone(cfg.timeZone);
    } catch (err) {
      throw new Error(`config key timeZone: ${(err as Error).message}`);
    }
    const storeRoot = path.resolve(ctx.site.dataDir, cfg.storeRoot ?? 'records');
    try {
      fs.mkdirSync(storeRoot, { recursive: true });
      fs.accessSync(storeRoot, fs.constants.W_OK);
    } catch (err) {
      throw new Error(`config key storeRoot: cannot write to ${storeRoot} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }

    let catalog: RecordCatalog;
    if (cfg.postgresUrl) {
      try {
        catalog = await openPostgresCatalog({ connectionString: cfg.postgresUrl, table: cfg.postgresTable, timeZone: cfg.timeZone, poolConfig: { max: 4 } });
      } catch (err) {
        // the URL may hold a password: name the key, not the value
        throw new Error(`config key postgresUrl: cannot open the catalog (${(err as Error).message})`);
      }
    } else {
      catalog = openSqliteCatalog({ dir: ctx.stores.dir(), timeZone: cfg.timeZone });
    }
    try {
      return await startRecorder(ctx, catalog, storeRoot);
    } catch (err) {
      await catalog.close().catch(() => undefined);
      throw err;
    }
  },
});
