/**
 * One recorded request: its own bus subscription and FLV muxer, one append-only file, and the catalog row that
 * follows the file (size as it grows, media type, end state).
 */
import * as path from 'node:path';
import type { Logger } from 'pino';
import type { AccessUnit, MediaStream, SubscribeOptions, Subscription } from '../../../plugin-sdk';
import { FLV_TAG_AUDIO, FLV_TAG_VIDEO, FlvMuxer, type FlvTag } from '../../../plugin-sdk/formats/flv';
import { startedRecord, type MediaTyp, type RecordCatalog, type RecordStart, type StoredRecord } from './catalog';
import { FlvFileWriter } from './flv-file-writer';
import { recordFileUrl } from './stored-av';

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
}

/** How a recording ended. */
export type RecordingOutcome = 'done' | 'failed' | 'empty' | 'uncatalogued';

const FRAMING = 15; // tag header and PreviousTagSize around each body

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code && !String(e.message).startsWith(e.code) ? `${e.code}: ${e.message}` : String(e?.message ?? err);
}

export class Recording {
  readonly reqId: string;
  /** the row as inserted; path is relative to the store root */
  readonly row: StoredRecord;
  readonly file: string;
  private readonly muxer = new FlvMuxer();
  private readonly highWater: number;
  private sub: Subscription | undefined;
  /** dts of the first unit written: file timestamps start at 0 */
  private base: number | undefined;
  private headerFlags: { video: boolean; audio: boolean } | undefined;
  /** tags muxed while the file is being created */
  private early: FlvTag[] = [];
  private earlyBytes = 0;
  private writer: FlvFileWriter | undefined;
  private opening: Promise<void> | undefined;
  private wroteVideo = false;
  private wroteAudio = false;
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
  private reportedSize = 0;
  private countedBytes = 0;
  private tickBusy = false;
  /** times the bus skipped ahead to a keyframe because the disk fell behind */
  private gaps = 0;
  private resolveEnded!: (outcome: RecordingOutcome) => void;
  /** settles once the recording has ended and its final row is written */
  readonly ended = new Promise<RecordingOutcome>((resolve) => { this.resolveEnded = resolve; });

  /** Validates the start (throws TypeError for a reqId or simNo the catalog refuses); the row goes in with the file. */
  constructor(private readonly ctx: RecordingContext, private readonly start: RecordStart) {
    this.row = startedRecord(start, ctx.timeZone);
    this.reqId = this.row.reqId;
    this.file = path.join(ctx.storeRoot, ...this.row.path.split('/'));
    this.highWater = Math.max(64 * 1024, Math.min(1024 * 1024, ctx.maxPendingBytes >> 2));
    this.catalogChain = Promise.resolve();
  }

  private insert(): Promise<boolean> {
    if (this.inserted) return this.inserted;
    const ctx = this.ctx;
    this.inserted = ctx.catalog.insertStart(this.start).then(
      () => true,
      (err) => {
        ctx.onCatalogError();
        ctx.log.error({ reqId: this.reqId, err: describe(err) }, 'recording not started: the catalog refused its row');
        this.failure = err;
        this.early = [];
        this.earlyBytes = 0;
        this.closeSub();
        ctx.onStopped(this.reqId, describe(err));
        return false;
      },
    );
    this.catalogChain = this.inserted;
    return this.inserted;
  }

  /** Subscribes to the channel's stream (from its latest keyframe): the tracks the request wants, audio as `via` says. */
  attach(media: MediaStream, read: Pick<SubscribeOptions, 'media' | 'via'> = {}): void {
    const sub = media.subscribe({
      tracks: (list) => { for (const t of list) this.muxer.setTrack(t); },
      write: (au) => this.write(au),
      writable: () => this.writable(),
      end: (reason) => { void this.finish(`stream ended: ${reason}`); },
    }, read);
    // subscribe() may already have handed over the GOP cache, and that may have failed the recording
    if (this.failure !== undefined || this.finishing) sub.close();
    else this.sub = sub;
  }

  /** The file's url for the closed notice: only when something was recorded into a file that exists. */
  noticeUrl(apiBase: string): string | undefined {
    if (this.base === undefined) return undefined;
    if (this.failure !== undefined && !this.writer) return undefined;
    return recordFileUrl(apiBase, this.row.path);
  }

  get mediaTyp(): MediaTyp | null {
    if (this.wroteVideo && this.wroteAudio) return 'av';
    if (this.wroteVideo) return 'v';
    if (this.wroteAudio) return 'a';
    return null;
  }

  private writable(): boolean {
    if (this.finishing) return true;
    return (this.writer ? this.writer.pendingBytes : this.earlyBytes) < this.highWater;
  }

  private write(au: AccessUnit): void {
    if (this.failure !== undefined) return;
    // Units the muxer drops (before parameter sets or a keyframe) do not fix the time base.
    const base = this.base ?? au.dts;
    const tags = this.muxer.push({ ...au, dts: au.dts - base, pts: au.pts - base });
    if (tags.length === 0) return;
    this.base = base;
    this.headerFlags ??= { video: this.muxer.hasVideo, audio: this.muxer.hasAudio };
    for (const t of tags) {
      if (t.type === FLV_TAG_VIDEO) this.wroteVideo = true;
      else if (t.type === FLV_TAG_AUDIO) this.wroteAudio = true;
    }
    if (this.writer) {
      this.writer.writeTags(tags);
      return;
    }
    for (const t of tags) {
      this.early.push(t);
      this.earlyBytes += t.body.length + FRAMING;
    }
    if (this.earlyBytes > this.ctx.maxPendingBytes) {
      this.fail(Object.assign(new Error(`the file could not be created in time: ${this.earlyBytes} bytes waiting`), { code: 'EBACKLOG' }));
      return;
    }
    this.opening ??= this.openFile();
  }

  private async openFile(): Promise<void> {
    if (!(await this.insert()) || this.failure !== undefined) return;
    let w: FlvFileWriter;
    try {
      w = await FlvFileWriter.create(this.file, {
        maxPendingBytes: this.ctx.maxPendingBytes,
        onError: (err) => this.fail(err),
        onDrain: () => this.sub?.resume(),
      });
    } catch (err) {
      this.fail(err);
      return;
    }
    this.writer = w;
    if (this.failure !== undefined) return;
    w.header(this.headerFlags!.video, this.headerFlags!.audio);
    w.writeTags(this.early);
    this.early = [];
    this.earlyBytes = 0;
    this.sub?.resume();
  }

  /** A write error: the recording stops here (live play is not touched) and the row says what was kept. */
  private fail(err: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    this.early = [];
    this.earlyBytes = 0;
    const code = (err as NodeJS.ErrnoException)?.code ?? 'EUNKNOWN';
    this.ctx.onWriteError(code);
    this.ctx.log.error({ reqId: this.reqId, file: this.file, code, err: describe(err) }, 'recording stopped by a write error; live play goes on');
    this.closeSub();
    this.ctx.onStopped(this.reqId, describe(err));
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

  private catalog(what: string, fn: () => Promise<unknown>): Promise<unknown> {
    this.catalogChain = this.catalogChain.then(fn).catch((err) => {
      this.ctx.onCatalogError();
      this.ctx.log.error({ reqId: this.reqId, err: describe(err) }, `catalog ${what} failed`);
    });
    return this.catalogChain;
  }

  /** Periodic: the row's size follows the file. */
  tick(): void {
    const w = this.writer;
    if (!w || this.finishing || this.tickBusy) return;
    this.countBytes(w.size);
    if (w.size === this.reportedSize) return;
    this.reportedSize = w.size;
    this.tickBusy = true;
    void this.catalog('size update', () => this.ctx.catalog.update(this.reqId, { sz: w.size, mediaTyp: this.mediaTyp }))
      .finally(() => { this.tickBusy = false; });
  }

  /**
   * Ends the recording (request closed, stream gone, write error or gateway stopping): takes what the bus still
   * holds for it, closes the file and writes the final row. Idempotent.
   */
  finish(reason: string): Promise<RecordingOutcome> {
    this.finished ??= this.doFinish(reason).catch((err) => {
      this.ctx.log.error({ reqId: this.reqId, err: describe(err) }, 'recording could not be finished cleanly');
      return 'failed' as const;
    }).then((outcome) => {
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
      await this.catalog('delete', () => this.ctx.catalog.delete([this.reqId]));
      this.ctx.log.info({ reqId: this.reqId, reason }, 'recording ended without media; nothing stored');
      return 'empty';
    }
    const failed = this.failure !== undefined;
    await this.catalog('final update', () => this.ctx.catalog.update(this.reqId, {
      sz: size,
      mediaTyp: this.mediaTyp,
      state: failed ? 'failed' : 'done',
      endTm: this.ctx.now(),
      error: failed ? describe(this.failure) : null,
    }));
    const st = this.muxer.stats;
    this.ctx.log.info({
      reqId: this.reqId, path: this.row.path, sz: size, mediaTyp: this.mediaTyp, state: failed ? 'failed' : 'done', reason,
      videoTags: st.videoTags, audioTags: st.audioTags, skippedAudio: st.skippedAudio || undefined, gaps: this.gaps || undefined,
    }, 'recording ended');
    return failed ? 'failed' : 'done';
  }
}
