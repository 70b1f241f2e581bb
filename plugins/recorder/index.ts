import * as fs from 'node:fs';
import * as path from 'node:path';
import { IsInt, IsNumber, IsOptional, IsString, Matches, Max, Min, MinLength } from 'class-validator';
import { definePlugin, ErrCode, GatewayError, invalidParam, type Cancel } from '../../plugin-sdk';
import type { RecordCatalog } from './src/catalog';
import { openPostgresCatalog } from './src/catalog-postgres';
import { openSqliteCatalog } from './src/catalog-sqlite';
import { recordFileHandler } from './src/file-route';
import { parseRecordQuery } from './src/query-params';
import { findRecords } from './src/record-query';
import { Recording, type RecordingContext } from './src/recording';
import { recoverUnfinished } from './src/recovery';
import { applyRetention, type RetentionPolicy } from './src/retention';
import { toStoredAv } from './src/stored-av';
import { assertTimeZone } from './src/zone-time';

export class RecorderConfig {
  /** where record files go; relative paths are taken from the data directory (default <dataDir>/records) */
  @IsOptional() @IsString() @MinLength(1)
  storeRoot: string | undefined = undefined;

  /** catalog in PostgreSQL (postgres://user:pwd@host/db) instead of the embedded SQLite file */
  @IsOptional() @IsString() @Matches(/^postgres(ql)?:\/\//, { message: 'postgresUrl must be a postgres:// or postgresql:// URL' })
  postgresUrl: string | undefined = undefined;

  /** table of the PostgreSQL catalog */
  @IsString() @Matches(/^[a-z_][a-z0-9_]{0,40}$/, { message: 'postgresTable must be a lower-case SQL identifier' })
  postgresTable = 'stored_av';

  /** IANA zone for the {yyyy}/{MM} of paths, query times without an offset, and reqTm in answers (default: the process's) */
  @IsOptional() @IsString()
  timeZone: string | undefined = undefined;

  /** records older than this many days are removed (0: no age limit) */
  @IsNumber() @Min(0)
  maxAgeDays = 0;

  /** oldest records are removed while all records together exceed this many bytes (0: no size limit) */
  @IsInt() @Min(0)
  maxTotalBytes = 0;

  /** how often retention (and recovery of orphaned rows) runs, besides at start */
  @IsInt() @Min(1) @Max(86400)
  retentionIntervalSec = 600;

  /** how often the catalog's sz follows the files being recorded */
  @IsInt() @Min(1) @Max(3600)
  sizeUpdateSec = 5;

  /** bytes a recording may hold for a slow disk before it fails */
  @IsInt() @Min(256 * 1024)
  maxPendingBytes = 16 * 1024 * 1024;

  /**
   * PostgreSQL only: a 'recording' row whose file has not changed for this long is taken as left behind by a
   * gateway that died (another gateway sharing the catalog may still be writing fresher ones)
   */
  @IsInt() @Min(0)
  orphanQuietSec = 300;
}

/**
 * Stores the media of requests opened with `record: true` as FLV files, catalogs them, answers GET /strm/record
 * and serves the files to their owners.
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
    const timeZone = cfg.timeZone;
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
        catalog = await openPostgresCatalog({ connectionString: cfg.postgresUrl, table: cfg.postgresTable, timeZone, poolConfig: { max: 4 } });
      } catch (err) {
        // the URL may hold a password: name the key, not the value
        throw new Error(`config key postgresUrl: cannot open the catalog (${(err as Error).message})`);
      }
    } else {
      catalog = openSqliteCatalog({ dir: ctx.stores.dir(), timeZone });
    }

    const m = {
      started: ctx.metrics.counter('recordings_started_total', 'recordings started (requests opened with record: true)'),
      ended: ctx.metrics.counter<'outcome'>('recordings_ended_total', 'recordings ended, by outcome (done, failed, empty, uncatalogued)', ['outcome']),
      bytes: ctx.metrics.counter('bytes_written_total', 'bytes of record files written to disk'),
      writeErrors: ctx.metrics.counter<'code'>('write_errors_total', 'recordings stopped by a file error, by error code', ['code']),
      catalogErrors: ctx.metrics.counter('catalog_errors_total', 'catalog calls that failed'),
      removed: ctx.metrics.counter('retention_removed_total', 'record files (and rows) removed by retention'),
      freed: ctx.metrics.counter('retention_freed_bytes_total', 'bytes freed by retention'),
      recovered: ctx.metrics.counter<'state'>('recovered_total', 'rows left in recording by an unclean stop and closed at a later pass', ['state']),
    };
    /** recordings in progress (until their final row is written) */
    const active = new Map<string, Recording>();
    /** recordings whose closed notice has not gone out yet */
    const awaitingNotice = new Map<string, Recording>();
    let downloads = 0;
    ctx.metrics.gauge('recordings_active', 'recordings in progress', [], (g) => g.set(active.size));
    ctx.metrics.gauge('downloads_active', 'record file downloads in progress', [], (g) => g.set(downloads));

    const recCtx: RecordingContext = {
      catalog,
      storeRoot,
      timeZone,
      log: ctx.log,
      now: () => new Date(ctx.clock.now()),
      maxPendingBytes: cfg.maxPendingBytes,
      onWriteError: (code) => m.writeErrors.inc({ code }),
      onCatalogError: () => m.catalogErrors.inc(),
      onBytesWritten: (n) => m.bytes.inc(n),
      // status then shows that this request's recording stopped, and why
      onStopped: (reqId, error) => {
        ctx.sessions.setRequestFlag(reqId, 'recording', false);
        ctx.sessions.setRequestFlag(reqId, 'recordingError', error);
      },
    };

    // --- maintenance: orphaned rows, then retention -------------------------------------------------
    const policy: RetentionPolicy = {
      ...(cfg.maxAgeDays > 0 ? { maxAgeDays: cfg.maxAgeDays } : {}),
      ...(cfg.maxTotalBytes > 0 ? { maxTotalBytes: cfg.maxTotalBytes } : {}),
    };
    let maintaining: Promise<void> | undefined;
    const maintain = (): Promise<void> => {
      maintaining ??= (async () => {
        try {
          const rec = await recoverUnfinished(catalog, storeRoot, {
            now: new Date(ctx.clock.now()),
            quietMs: cfg.postgresUrl ? cfg.orphanQuietSec * 1000 : 0,
            isActive: (id) => active.has(id),
          });
          for (const r of rec.recovered) {
            m.recovered.inc({ state: r.state });
            ctx.log.warn({ reqId: r.reqId, state: r.state, sz: r.sz, truncated: r.truncated || undefined }, 'closed a recording left unfinished by an unclean stop');
          }
          for (const e of rec.errors) ctx.log.error({ reqId: e.reqId, err: e.message }, 'could not examine an unfinished recording; will retry');
          if (policy.maxAgeDays !== undefined || policy.maxTotalBytes !== undefined) {
            const r = await applyRetention(catalog, storeRoot, policy, { now: new Date(ctx.clock.now()) });
            if (r.removed.length) {
              m.removed.inc(r.removed.length);
              m.freed.inc(r.freedBytes);
              ctx.log.info({ removed: r.removed.length, freedBytes: r.freedBytes, oldest: r.removed[0]?.reqId }, 'retention removed records');
            }
            if (r.error) ctx.log.error({ reqId: r.error.reqId, err: r.error.message }, 'retention could not remove a file; will retry');
          }
        } catch (err) {
          m.catalogErrors.inc();
          ctx.log.error({ err: (err as Error).message }, 'recorder maintenance failed; will retry');
        } finally {
          maintaining = undefined;
        }
      })();
      return maintaining;
    };
    await maintain();

    // --- recording ------------------------------------------------------------------------------------
    let stopping = false;
    ctx.sessions.onRequestOpened((r, s) => {
      if (!r.params.record || stopping) return;
      let rec: Recording;
      try {
        rec = new Recording(recCtx, {
          reqId: r.reqId, appId: r.appId, simNo: r.params.normSim, chan: r.params.chanId, live: r.params.typ === 'live', reqTm: r.openedAt,
        });
      } catch (err) {
        ctx.log.error({ reqId: r.reqId, err: (err as Error).message }, 'request cannot be recorded');
        return;
      }
      ctx.sessions.setRequestFlag(r.reqId, 'recording', true);
      active.set(r.reqId, rec);
      awaitingNotice.set(r.reqId, rec);
      m.started.inc();
      ctx.log.info({ reqId: r.reqId, path: rec.row.path }, 'recording started');
      rec.attach(s.media);
      void rec.ended.then((outcome) => {
        m.ended.inc({ outcome });
        if (active.get(r.reqId) === rec) active.delete(r.reqId);
      });
    });
    ctx.sessions.onRequestClosed((r) => {
      void active.get(r.reqId)?.finish('request closed');
    });
    ctx.notices.addEnricher((n) => {
      if (n.payload.act === 'ready') return;
      const rec = awaitingNotice.get(n.payload.reqId);
      if (!rec) return;
      if (n.last) awaitingNotice.delete(n.payload.reqId);
      const url = rec.noticeUrl(ctx.site.apiBase);
      if (url) n.payload.playedAvDumpUrl = url;
    });

    const timers: Cancel[] = [
      ctx.clock.setInterval(() => { for (const rec of active.values()) rec.tick(); }, cfg.sizeUpdateSec * 1000),
      ctx.clock.setInterval(() => { void maintain(); }, cfg.retentionIntervalSec * 1000),
    ];

    // --- routes -----------------------------------------------------------------------------------------
    ctx.routes.get('/strm/record', async (req) => {
      const parsed = parseRecordQuery(req.query, { now: new Date(ctx.clock.now()), timeZone });
      if (!parsed.ok) throw invalidParam(parsed.field);
      let recs;
      try {
        recs = await findRecords(catalog, req.app!.appId, parsed.query);
      } catch (err) {
        m.catalogErrors.inc();
        ctx.log.error({ err: (err as Error).message }, 'record query failed');
        throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record catalog is not available.');
      }
      return { data: recs.map((rec) => toStoredAv(rec, ctx.site.apiBase, { timeZone })) };
    }, { auth: 'api' });

    ctx.routes.raw('GET', '/strm/record/file/*', recordFileHandler({
      catalog, storeRoot, log: ctx.log,
      onStart: () => { downloads++; },
      onEnd: () => { downloads--; },
    }), { auth: 'api' });

    ctx.log.info({ storeRoot, catalog: cfg.postgresUrl ? 'postgresql' : 'sqlite', retention: policy }, 'recorder ready');
    return {
      async stop() {
        stopping = true;
        for (const cancel of timers) cancel();
        // the kernel closed every request before stopping plugins, so these are finishing already
        await Promise.all([...active.values()].map((rec) => rec.finish('gateway stopping')));
        await maintaining;
        awaitingNotice.clear();
        await catalog.close();
      },
    };
  },
});
