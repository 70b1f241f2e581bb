/**
 * One recorded request: its own bus subscription to the stream's FLV form (a bus format: framed once per stream for
 * all its FLV readers, see formats/flv-form.ts), one append-only file whose tag times start at 0 (file-tags.ts),
 * and the catalog row that follows the file (size as it grows, media type, end state).
 */
import * as path from 'node:path';
import type { Logger } from 'pino';
import type { AccessUnit, MediaStream, ReaderOptions, ReaderHandle, UnitFormat } from '../../../plugin-sdk';
import type { FlvForm } from '../../../plugin-sdk/formats';
import { startedRecord, type MediaTyp, type RecordCatalog, type RecordStart, type RecordUpdate, type StoredRecord } from './catalog';
import { FileTags } from './file-tags';
import { FlvFileWriter } from './flv-file-writer';
import { describeError as describe, isNoSpace, publicError } from './storage-errors';
import { storedRecordUrl } from './stored-av';

/** What a recording needs from the plugin around it. */
export interface RecordingContext {
  catalog: RecordCatalog;
  storeRoot: string;
  timeZone?: string;
  log: Logger;
  now(): Date;
  /** bytes the file writer may hold before the recording fails */
  maxPendingBytes: number;
  /** a file open or write failed (for the metric); code as in err.code */
  onWriteError(code: string): void;
  /** a catalog call failed */
  onCatalogError(): void;
  /** bytes reached the disk since the last call for this recording */
  onBytesWritten(n: number): void;
  /** the recording stopped before its request ended (write or catalog error) */
  onStopped(reqId: string, error: string): void;
  /**
   * A file or catalog write found the disk full: runs retention now. true when it freed something (try again),
   * false when it could not (give up; the recorder is degraded then).
   */
  makeRoom(cause: unknown): Promise<boolean>;
  /** the final row could not be written: the recorder writes it later, before recovery would guess it from the file */
  settleLater(rec: Recording): void;
}

/** How a recording ended. */
export type RecordingOutcome = 'done' | 'failed' | 'empty' | 'uncatalogued';

/** tries of a catalog insert or a file creation that each found the disk full and had room made */
const ROOM_TRIES = 3;

export class Recording {
  readonly reqId: string;
  /** the row as inserted; path is relative to the store root */
  readonly row: StoredRecord;
  readonly file: string;
  private readonly highWater: number;
  private sub: ReaderHandle | undefined;
  /** the stream's FLV form as this file's bytes */
  private readonly tags = new FileTags();
  /** framed tags waiting while the file is being created */
  private early: Buffer[] = [];
  private earlyBytes = 0;
  private writer: FlvFileWriter | undefined;
  private opening: Promise<void> | undefined;
  private failure: unknown;
  private finishing = false;
  private finished: Promise<RecordingOutcome> | undefined;
  /**
   * The row goes in when the file is about to be created, not at open: until media comes there is nothing to
   * list (a row would show a url that answers 404, for as long as the terminal takes to push). Inserted before
   * the file exists, so an unclean stop always leaves a row that recovery can close or remove.
   */
  private inserted: Promise<boolean> | undefined;
  /** catalog writes of this recording, in order (a periodic size update never lands after the final one) */
  private catalogChain: Promise<unknown>;
  /** sz the catalog holds for this row (only ever raised once a write of it succeeded) */
  private cataloguedSize = 0;
  /** the final row, while the catalog could not take it */
  private unsettled: RecordUpdate | undefined;
  /** catalog writes are failing: logged once, not at every size update */
  private catalogFailing = false;
  private countedBytes = 0;
  private tickBusy = false;
  /** times the bus skipped ahead to a keyframe because the disk fell behind */
  private gaps = 0;
  private resolveEnded!: (outcome: RecordingOutcome) => void;
  /** settles once the recording has ended and its final row is written */
  readonly ended = new Promise<RecordingOutcome>((resolve) => {
    this.resolveEnded = resolve;
  });

  /** Validates the start (throws TypeError for a reqId or simNo the catalog refuses); the row goes in with the file. */
  constructor(
    private readonly ctx: RecordingContext,
    private readonly start: RecordStart,
  ) {
    this.row = startedRecord(start, ctx.timeZone);
    this.reqId = this.row.reqId;
    this.file = path.join(ctx.storeRoot, ...this.row.path.split('/'));
    this.highWater = Math.max(64 * 1024, Math.min(1024 * 1024, ctx.maxPendingBytes >> 2));
    this.catalogChain = Promise.resolve();
  }

  private insert(): Promise<boolean> {
    if (this.inserted) return this.inserted;
    this.inserted = this.tryInsert();
    this.catalogChain = this.inserted;
    return this.inserted;
  }

  private async tryInsert(): Promise<boolean> {
    const ctx = this.ctx;
    for (let attempt = 1; ; attempt++) {
      try {
        await ctx.catalog.insertStart(this.start);
        return true;
      } catch (err) {
        if (attempt < ROOM_TRIES && isNoSpace(err) && this.failure === undefined && (await ctx.makeRoom(err))) continue;
        ctx.onCatalogError();
        ctx.log.error({ reqId: this.reqId, err: describe(err) }, 'recording not started: the catalog refused its row');
        this.failure = err;
        this.early = [];
        this.earlyBytes = 0;
        this.closeSub();
        ctx.onStopped(this.reqId, publicError(err));
        return false;
      }
    }
  }

  /**
   * Subscribes to the channel's stream (from its latest keyframe) in `format` (the gateway's FLV form for the tracks
   * the request wants: flvFormatOf), audio as `via` says.
   */
  attach(media: MediaStream, format: UnitFormat<FlvForm>, read: Pick<ReaderOptions, 'media' | 'via'> = {}): void {
    const sub = media.subscribe<FlvForm>(
      {
        write: (au, form) => this.write(au, form),
        writable: () => this.writable(),
        skipped: () => this.tags.skipped(),
        end: (reason) => {
          void this.finish(`stream ended: ${reason}`);
        },
      },
      { ...read, format },
    );
    // subscribe() may already have handed over the GOP cache, and that may have failed the recording
    if (this.failure !== undefined || this.finishing) sub.close();
    else this.sub = sub;
  }

  /**
   * The file's url for the closed notice, as GET /strm/record lists it (on the node named by the row's apiBase):
   * only when something was recorded into a file that exists.
   */
  noticeUrl(fallbackApiBase: string): string | undefined {
    if (!this.tags.started) return undefined;
    if (this.failure !== undefined && !this.writer) return undefined;
    return storedRecordUrl(this.row, fallbackApiBase);
  }

  /** why the recording stopped early, when it did, as an application may be told */
  get error(): string | undefined {
    return this.failure === undefined ? undefined : publicError(this.failure);
  }

  get mediaTyp(): MediaTyp | null {
    const t = this.tags;
    if (t.wroteVideo && t.wroteAudio) return 'av';
    if (t.wroteVideo) return 'v';
    if (t.wroteAudio) return 'a';
    return null;
  }

  private writable(): boolean {
    if (this.finishing) return true;
    return (this.writer ? this.writer.pendingBytes : this.earlyBytes) < this.highWater;
  }

  /** A unit's form, as file bytes (FileTags), to the file, or held while the file is being created. */
  private write(au: AccessUnit, f: FlvForm | undefined): void {
    if (this.failure !== undefined) return;
    const bytes = this.tags.bytesOf(au, f);
    if (bytes === undefined) return;
    if (this.writer) {
      this.writer.writeFramed([bytes]);
      return;
    }
    this.early.push(bytes);
    this.earlyBytes += bytes.length;
    if (this.earlyBytes > this.ctx.maxPendingBytes) {
      this.fail(Object.assign(new Error(`the file could not be created in time: ${this.earlyBytes} bytes waiting`), { code: 'EBACKLOG' }));
      return;
    }
    this.opening ??= this.openFile();
  }

  private async openFile(): Promise<void> {
    if (!(await this.insert()) || this.failure !== undefined) return;
    let w: FlvFileWriter;
    for (let attempt = 1; ; attempt++) {
      try {
        w = await FlvFileWriter.create(this.file, {
          maxPendingBytes: this.ctx.maxPendingBytes,
          onError: (err) => this.fail(err),
          onDrain: () => this.sub?.resume(),
          onNoSpace: (err) => this.roomFor(err),
        });
        break;
      } catch (err) {
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the writer's callbacks may have set the failure meanwhile
        if (attempt < ROOM_TRIES && isNoSpace(err) && this.failure === undefined && (await this.ctx.makeRoom(err))) continue;
        this.fail(err);
        return;
      }
    }
    this.writer = w;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the awaits above let the writer's callbacks fail the recording
    if (this.failure !== undefined) return;
    w.header(this.tags.headerFlags!.video, this.tags.headerFlags!.audio);
    w.writeFramed(this.early);
    this.early = [];
    this.earlyBytes = 0;
    this.sub?.resume();
  }

  /** The disk is full mid-file: the file waits (the bus skips ahead to keyframes meanwhile) while retention runs. */
  private async roomFor(err: NodeJS.ErrnoException): Promise<boolean> {
    this.ctx.log.warn({ reqId: this.reqId, code: err.code }, 'the disk is full: running retention before giving up on this recording');
    const room = await this.ctx.makeRoom(err);
    if (room) this.ctx.log.info({ reqId: this.reqId }, 'retention made room: the recording goes on');
    return room;
  }

  /** A write error: the recording stops here (live play is not touched) and the row says what was kept. */
  private fail(err: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    this.early = [];
    this.earlyBytes = 0;
    const code = (err as NodeJS.ErrnoException | undefined)?.code ?? 'EUNKNOWN';
    this.ctx.onWriteError(code);
    this.ctx.log.error({ reqId: this.reqId, file: this.file, code, err: describe(err) }, 'recording stopped by a write error; live play goes on');
    this.closeSub();
    this.ctx.onStopped(this.reqId, publicError(err));
    void this.finish('write error');
  }

  private closeSub(): void {
    const sub = this.sub;
    this.sub = undefined;
    if (!sub) return;
    this.gaps += sub.stats.skips;
    sub.close();
  }

  private countBytes(size: number): void {
    if (size > this.countedBytes) {
      this.ctx.onBytesWritten(size - this.countedBytes);
      this.countedBytes = size;
    }
  }

  /** Runs a catalog write after the ones before it; false (logged, counted) when it failed. */
  private catalog(what: string, patch: RecordUpdate | 'delete'): Promise<boolean> {
    const p = this.catalogChain
      .then(async () => {
        if (patch === 'delete') await this.ctx.catalog.delete([this.reqId]);
        else {
          await this.ctx.catalog.update(this.reqId, patch);
          if (patch.sz !== undefined) this.cataloguedSize = patch.sz;
        }
        if (this.catalogFailing) {
          this.catalogFailing = false;
          this.ctx.log.info({ reqId: this.reqId }, 'catalog writes of this recording succeed again');
        }
        return true;
      })
      .catch((err) => {
        this.ctx.onCatalogError();
        // a full disk fails every size update until space comes back: said once, not every sizeUpdateSec
        if (!this.catalogFailing) this.ctx.log.error({ reqId: this.reqId, err: describe(err) }, `catalog ${what} failed`);
        this.catalogFailing = true;
        if (isNoSpace(err)) void this.ctx.makeRoom(err);
        return false;
      });
    this.catalogChain = p;
    return p;
  }

  /** Bytes on disk the catalog does not show yet, for retention's total. */
  get uncataloguedBytes(): number {
    return Math.max(0, (this.writer?.size ?? 0) - this.cataloguedSize);
  }

  /** Periodic: the row's size follows the file (a failed update is tried again at the next tick). */
  tick(): void {
    const w = this.writer;
    if (!w || this.finishing || this.tickBusy) return;
    this.countBytes(w.size);
    if (w.size === this.cataloguedSize) return;
    this.tickBusy = true;
    // state and endTm again: another gateway or worker sharing the catalog may have taken the row for an orphan while
    // the stream paused for longer than orphanQuietSec; it is live again
    void this.catalog('size update', { sz: w.size, mediaTyp: this.mediaTyp, state: 'recording', endTm: null }).finally(() => {
      this.tickBusy = false;
    });
  }

  /** Writes the final row that failed at the end; true once it is in. */
  async settle(): Promise<boolean> {
    const patch = this.unsettled;
    if (!patch) return true;
    if (!(await this.catalog('final update', patch))) return false;
    this.unsettled = undefined;
    this.ctx.log.info({ reqId: this.reqId, sz: patch.sz, state: patch.state }, 'final row of the recording written after the catalog came back');
    return true;
  }

  /**
   * Ends the recording (request closed, stream gone, write error or gateway stopping): takes what the bus still
   * holds for it, closes the file and writes the final row. Idempotent.
   */
  finish(reason: string): Promise<RecordingOutcome> {
    this.finished ??= this.doFinish(reason)
      .catch((err) => {
        this.ctx.log.error({ reqId: this.reqId, err: describe(err) }, 'recording could not be finished cleanly');
        return 'failed' as const;
      })
      .then((outcome) => {
        this.resolveEnded(outcome);
        return outcome;
      });
    return this.finished;
  }

  private async doFinish(reason: string): Promise<RecordingOutcome> {
    this.finishing = true;
    // Units the bus queued while the disk was busy are still part of the recording.
    this.sub?.resume();
    this.closeSub();
    if (!this.inserted) {
      // no media ever came: no row, no file
      this.ctx.log.info({ reqId: this.reqId, reason }, 'recording ended without media; nothing stored');
      return 'empty';
    }
    if (!(await this.inserted)) return 'uncatalogued';
    if (this.opening) await this.opening;
    let size = 0;
    const w = this.writer;
    if (w) {
      size = await w.close();
      this.countBytes(size);
    }
    if (!w && this.failure === undefined) {
      // Nothing was ever recorded: no file, so no record either.
      await this.catalog('delete', 'delete');
      this.ctx.log.info({ reqId: this.reqId, reason }, 'recording ended without media; nothing stored');
      return 'empty';
    }
    const failed = this.failure !== undefined;
    const final: RecordUpdate = {
      sz: size,
      mediaTyp: this.mediaTyp,
      state: failed ? 'failed' : 'done',
      endTm: this.ctx.now(),
      error: failed ? describe(this.failure) : null,
    };
    const written = await this.catalog('final update', final);
    if (!written) {
      // Left as it is, the row would list the size of the last update that got through (smaller than the file)
      // until recovery closed it as 'done' at the next start.
      this.unsettled = final;
      this.ctx.settleLater(this);
    }
    this.ctx.log.info(
      {
        reqId: this.reqId,
        path: this.row.path,
        sz: size,
        mediaTyp: this.mediaTyp,
        state: failed ? 'failed' : 'done',
        reason,
        videoTags: this.tags.videoUnits,
        audioTags: this.tags.audioUnits,
        skippedAudio: this.tags.skippedAudio || undefined,
        gaps: this.gaps || undefined,
        finalRowPending: written ? undefined : true,
      },
      'recording ended',
    );
    return failed ? 'failed' : 'done';
  }
}
