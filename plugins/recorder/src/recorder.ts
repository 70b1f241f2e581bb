/**
 * The running recorder: records requests opened with `record: true`, keeps the catalog in step with the files,
 * runs recovery and retention, and answers the record routes.
 */
import {
  aacVia, ErrCode, GatewayError, invalidParam, mediaTypOf, type Cancel, type OpenParams, type PluginContext, type PluginInstance, type StreamTyp,
  type SubscribeOptions,
} from '../../../plugin-sdk';
import type { RecordCatalog, StoredRecord } from './catalog';
import type { RecorderConfig } from './config';
import { recordFileHandler } from './file-route';
import { parseRecordQuery } from './query-params';
import { findRecords } from './record-query';
import { Recording, type RecordingContext } from './recording';
import { recoverUnfinished } from './recovery';
import { applyRetention, type RetentionPolicy } from './retention';
import { toStoredAv } from './stored-av';

export async function startRecorder(ctx: PluginContext<RecorderConfig>, catalog: RecordCatalog, storeRoot: string): Promise<PluginInstance> {
  const cfg = ctx.config;
  const timeZone = cfg.timeZone;
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
  /** the tracks a request wants and how its audio reaches the file (see RecorderConfig.audio) */
  const readFor = (typ: StreamTyp, dataTyp: number, audioCfg: OpenParams['audioCfg']): Pick<SubscribeOptions, 'media' | 'via'> => {
    const media = mediaTypOf(typ, dataTyp);
    if (media === 'v' || cfg.audio === 'as-received') return { media };
    return { media, via: aacVia(ctx.bus, audioCfg, cfg.audio === 'auto' ? ['g711a', 'g711u'] : []) };
  };
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
    rec.attach(s.media, readFor(r.params.typ, r.params.dataTyp, r.params.audioCfg));
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
    let recs: StoredRecord[];
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
}
