/**
 * The running recorder: records requests opened with `record: true`, keeps the catalog in step with the files,
 * runs recovery and retention, and answers the record routes.
 */
import {
  aacVia,
  ErrCode,
  GatewayError,
  invalidParam,
  mediaTypOf,
  type Cancel,
  type Notice,
  type OpenParams,
  type PluginContext,
  type PluginInstance,
  type StreamTyp,
  type ReaderOptions,
} from '../../../plugin-sdk';
import type { RecordCatalog, StoredRecord } from './catalog';
import type { RecorderConfig } from './config';
import { parseRecordQuery } from './query-params';
import { findRecords } from './record-query';
import { registerRecordFileRoutes } from './record-file-routes';
import { Recording, type RecordingContext } from './recording';
import { flvFormatOf } from '../../../plugin-sdk/formats';
import type { AudioCodec } from '../../../plugin-sdk';

import { Maintenance } from './maintenance';
import { freeBytes, prepareStore, probeWrite } from './store-checks';
import { codeOf, describeError, unavailableReason } from './storage-errors';
import { toStoredAv } from './stored-av';

/**
 * Audio a recording keeps: every codec FLV carries. Its FLV form is the gateway's for these options (flvFormatOf):
 * flv-out's when flv-out carries the same, so one encoder per stream frames for players and files alike.
 */
const RECORDED_AUDIO: readonly AudioCodec[] = ['aac', 'g711a', 'g711u'];

/** What index.ts could open of the store at boot, and how to open the rest later. */
export interface RecorderStore {
  storeRoot: string;
  /** undefined when it could not be opened at boot (the recorder then starts degraded) */
  catalog: RecordCatalog | undefined;
  openCatalog(): Promise<RecordCatalog>;
  /** the embedded catalog's folder (created when called), whose file system needs free space too */
  catalogDir?: () => string;
  /** why the store or the catalog could not be used at boot (a storage failure: see storage-errors.ts) */
  unavailable?: unknown;
}

/** notices carry why a request that asked for a recording has none */
function withRecordingError(n: Notice, error: string): void {
  n.payload.recordingError = error;
}

export async function startRecorder(ctx: PluginContext<RecorderConfig>, store: RecorderStore): Promise<PluginInstance> {
  const cfg = ctx.config;
  const sharedCatalog = !!cfg.postgresUrl || ctx.workers.count > 1;
  if (ctx.workers.count > 1 && cfg.orphanQuietSec === 0) {
    throw new Error(
      `config key orphanQuietSec: 0 with ${ctx.workers.count} workers would let each worker close the others' live recordings as orphans; use a time longer than any pause in a recorded stream (default 300)`,
    );
  }
  const timeZone = cfg.timeZone;
  const storeRoot = store.storeRoot;
  let catalog = store.catalog;
  const m = {
    started: ctx.metrics.counter('recordings_started_total', 'recordings started (requests opened with record: true)'),
    ended: ctx.metrics.counter<'outcome'>('recordings_ended_total', 'recordings ended, by outcome (done, failed, empty, uncatalogued)', ['outcome']),
    skipped: ctx.metrics.counter('recordings_skipped_total', 'requests opened with record: true while the recorder was degraded: played live, not recorded'),
    bytes: ctx.metrics.counter('bytes_written_total', 'bytes of record files written to disk'),
    writeErrors: ctx.metrics.counter<'code'>('write_errors_total', 'recordings stopped by a file error, by error code', ['code']),
    catalogErrors: ctx.metrics.counter('catalog_errors_total', 'catalog calls that failed'),
    noSpace: ctx.metrics.counter<'outcome'>(
      'no_space_total',
      'writes that found the disk full, by what the retention pass run for them did: freed (the write went on) or none (it gave up)',
      ['outcome'],
    ),
    removed: ctx.metrics.counter('retention_removed_total', 'record files (and rows) removed by retention'),
    freed: ctx.metrics.counter('retention_freed_bytes_total', 'bytes freed by retention'),
    recovered: ctx.metrics.counter<'state'>('recovered_total', 'rows left in recording by an unclean stop and closed at a later pass', ['state']),
  };
  /** recordings in progress (until their final row is written) */
  const active = new Map<string, Recording>();
  /** recordings whose closed notice has not gone out yet */
  const awaitingNotice = new Map<string, Recording>();
  /** ended recordings whose final row the catalog has not taken yet (written at each maintenance pass) */
  const unsettled = new Map<string, Recording>();
  /** requests opened with record: true but not recorded (the recorder was degraded), with the reason their notices give */
  const unrecorded = new Map<string, string>();
  /** set while the recorder cannot record: the store or the catalog is full or failing */
  let degraded: { reason: string; since: number } | undefined;
  let downloads = 0;
  ctx.metrics.gauge('recordings_active', 'recordings in progress', [], (g) => g.set(active.size));
  ctx.metrics.gauge('downloads_active', 'record file downloads in progress', [], (g) => g.set(downloads));
  ctx.metrics.gauge('degraded', '1 while the recorder cannot record (its disk or catalog is full or failing); live play goes on', [], (g) =>
    g.set(degraded ? 1 : 0),
  );
  let stopping = false;

  const enterDegraded = (cause: unknown): void => {
    if (degraded) return;
    degraded = { reason: unavailableReason(cause), since: ctx.clock.now() };
    ctx.health.degraded(`not recording: ${degraded.reason}`);
    ctx.log.error(
      { reason: degraded.reason, err: describeError(cause), retrySec: cfg.degradedRetrySec },
      'recorder degraded: requests opened with record: true are played live without recording until the store can be written again',
    );
  };

  const recCtx: RecordingContext = {
    // only recordings started while the catalog was open exist, and it stays open until stop
    get catalog() {
      return catalog!;
    },
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
    makeRoom: (cause) => makeRoom(cause),
    settleLater: (rec) => {
      unsettled.set(rec.reqId, rec);
    },
  };

  // --- maintenance: final rows still to write, orphaned rows, then retention (maintenance.ts) -------------
  const maintenance = new Maintenance({
    ctx,
    storeRoot,
    catalog: () => catalog,
    active,
    unsettled,
    sharedCatalog,
    metrics: { catalogErrors: m.catalogErrors, recovered: m.recovered, removed: m.removed, freed: m.freed },
  });
  const policy = maintenance.policy;
  const maintain = (): Promise<number> => maintenance.run();

  // Writers that find the disk full at the same moment share one retention pass and its answer.
  let room: Promise<boolean> | undefined;
  const makeRoom = (cause: unknown): Promise<boolean> => {
    if (stopping) return Promise.resolve(false);
    room ??= (async () => {
      try {
        const freed = await maintain();
        if (freed > 0) {
          m.noSpace.inc({ outcome: 'freed' });
          ctx.log.warn({ code: codeOf(cause), freedBytes: freed }, 'the disk was full: retention made room');
          return true;
        }
        m.noSpace.inc({ outcome: 'none' });
        ctx.log.error({ code: codeOf(cause), retention: policy }, 'the disk is full and retention has nothing to remove');
        enterDegraded(cause);
        return false;
      } finally {
        room = undefined;
      }
    })();
    return room;
  };

  /**
   * While degraded: the catalog opened (if it could not be), maintenance (retention frees space, final rows are
   * written), then free space and a test write. Recording resumes for requests opened from then on.
   */
  let resuming: Promise<void> | undefined;
  const tryResume = (): Promise<void> => {
    if (!degraded || stopping) return Promise.resolve();
    resuming ??= (async () => {
      try {
        prepareStore(storeRoot);
        if (!catalog) {
          const opened = await store.openCatalog();
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the plugin may stop while the catalog opens
          if (stopping) {
            await opened.close();
            return;
          }
          catalog = opened;
          ctx.log.info('record catalog opened');
        }
        await maintain();
        if (unsettled.size > 0) {
          ctx.log.debug({ rows: unsettled.size }, 'recorder still degraded: final rows not written yet');
          return;
        }
        for (const dir of [storeRoot, ...(store.catalogDir ? [store.catalogDir()] : [])]) {
          const free = await freeBytes(dir);
          if (free < cfg.resumeFreeBytes) {
            ctx.log.debug({ free, resumeFreeBytes: cfg.resumeFreeBytes }, 'recorder still degraded: not enough free space');
            return;
          }
        }
        await probeWrite(storeRoot);
        const was = degraded!;
        degraded = undefined;
        ctx.health.ok();
        ctx.log.warn(
          { reason: was.reason, degradedSec: Math.round((ctx.clock.now() - was.since) / 1000) },
          'recorder recovered: requests opened with record: true are recorded again',
        );
      } catch (err) {
        ctx.log.debug({ err: describeError(err) }, 'recorder still degraded');
      } finally {
        resuming = undefined;
      }
    })();
    return resuming;
  };

  if (catalog) await maintain();
  if (store.unavailable !== undefined) enterDegraded(store.unavailable);

  // --- recording ------------------------------------------------------------------------------------
  /** the tracks a request wants and how its audio reaches the file (see RecorderConfig.audio) */
  const readFor = (typ: StreamTyp, dataTyp: number, audioCfg: OpenParams['audioCfg']): Pick<ReaderOptions, 'media' | 'via'> => {
    const media = mediaTypOf(typ, dataTyp);
    if (media === 'v' || cfg.audio === 'as-received') return { media };
    return { media, via: aacVia(ctx.bus, audioCfg, cfg.audio === 'auto' ? ['g711a', 'g711u'] : []) };
  };
  ctx.sessions.onRequestOpened((r, s) => {
    if (!r.params.record || stopping) return;
    if (degraded || !catalog) {
      // Live play first: the request opens as asked, without `recording` in its result (the spec's "not
      // recording"), and its status and notices say why.
      const reason = `not recorded: ${degraded?.reason ?? 'the record catalog is not open'}`;
      ctx.sessions.setRequestFlag(r.reqId, 'recording', false);
      ctx.sessions.setRequestFlag(r.reqId, 'recordingError', reason);
      unrecorded.set(r.reqId, reason);
      m.skipped.inc();
      ctx.log.info({ reqId: r.reqId, reason }, 'request not recorded: the recorder is degraded');
      return;
    }
    let rec: Recording;
    try {
      rec = new Recording(recCtx, {
        reqId: r.reqId,
        appId: r.appId,
        simNo: r.params.normSim,
        chan: r.params.chanId,
        live: r.params.typ === 'live',
        reqTm: r.openedAt,
        // the row names this node: its url points here from any node sharing the catalog
        apiBase: ctx.site.apiBase,
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
    const read = readFor(r.params.typ, r.params.dataTyp, r.params.audioCfg);
    const only = read.media === 'v' ? 'video' : read.media === 'a' ? 'audio' : undefined;
    rec.attach(s.media, flvFormatOf(ctx.bus, { audioCodecs: RECORDED_AUDIO, only }), read);
    void rec.ended.then((outcome) => {
      m.ended.inc({ outcome });
      if (active.get(r.reqId) === rec) active.delete(r.reqId);
    });
  });
  ctx.sessions.onRequestClosed((r) => {
    void active.get(r.reqId)?.finish('request closed');
  });
  ctx.notices.addEnricher((n) => {
    const skipped = unrecorded.get(n.payload.reqId);
    if (skipped !== undefined) {
      withRecordingError(n, skipped);
      if (n.last) unrecorded.delete(n.payload.reqId);
      return;
    }
    const rec = awaitingNotice.get(n.payload.reqId);
    if (!rec) return;
    const error = rec.error;
    if (error !== undefined) withRecordingError(n, error);
    if (n.payload.act === 'ready') return;
    if (n.last) awaitingNotice.delete(n.payload.reqId);
    const url = rec.noticeUrl(ctx.site.apiBase);
    if (url) n.payload.playedAvDumpUrl = url;
  });

  const timers: Cancel[] = [
    ctx.clock.setInterval(() => {
      for (const rec of active.values()) rec.tick();
    }, cfg.sizeUpdateSec * 1000),
    ctx.clock.setInterval(() => {
      void maintain();
    }, cfg.retentionIntervalSec * 1000),
    // a final row that failed while the recorder stayed healthy (retention made room) must not wait for retention's interval
    ctx.clock.setInterval(() => {
      if (degraded) void tryResume();
      else if (unsettled.size) void maintain();
    }, cfg.degradedRetrySec * 1000),
  ];

  // --- routes -----------------------------------------------------------------------------------------
  ctx.routes.get(
    '/strm/record',
    async (req) => {
      const parsed = parseRecordQuery(req.query, { now: new Date(ctx.clock.now()), timeZone });
      if (!parsed.ok) throw invalidParam(parsed.field);
      // not opened yet (degraded since boot): said in the log and the metric already, not at every query
      if (!catalog) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record catalog is not available.');
      let recs: StoredRecord[];
      try {
        recs = await findRecords(catalog, req.app!.appId, parsed.query);
      } catch (err) {
        m.catalogErrors.inc();
        ctx.log.error({ err: (err as Error).message }, 'record query failed');
        throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record catalog is not available.');
      }
      return { data: recs.map((rec) => toStoredAv(rec, ctx.site.apiBase, { timeZone })) };
    },
    { auth: 'api' },
  );

  // the file as stored, its MP4 form (format=mp4), and signed links to both
  const fileRoutes = await registerRecordFileRoutes(ctx, {
    catalog: () => catalog,
    storeRoot,
    apiBase: ctx.site.apiBase,
    onStart: () => {
      downloads++;
    },
    onEnd: () => {
      downloads--;
    },
  });

  ctx.log.info({ storeRoot, catalog: cfg.postgresUrl ? 'postgresql' : 'sqlite', retention: policy, degraded: degraded?.reason }, 'recorder ready');
  return {
    async stop() {
      stopping = true;
      for (const cancel of timers) cancel();
      // the kernel closed every request before stopping plugins, so these are finishing already
      await Promise.all([...active.values()].map((rec) => rec.finish('gateway stopping')));
      await resuming;
      await maintenance.idle();
      for (const rec of [...unsettled.values()]) if (await rec.settle()) unsettled.delete(rec.reqId);
      // recovery at the next start closes these from their files (size to the last whole tag)
      if (unsettled.size) ctx.log.warn({ reqIds: [...unsettled.keys()] }, 'final rows not written at stop; the next start recovers them from their files');
      awaitingNotice.clear();
      unrecorded.clear();
      await fileRoutes.close();
      await catalog?.close();
    },
  };
}
