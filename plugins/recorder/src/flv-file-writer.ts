import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FlvTag } from '../../../plugin-sdk/formats/flv';
import { flvFileHeader, serializeTag } from '../../../plugin-sdk/formats/flv';

export interface FlvFileWriterOptions {
  /** bytes waiting for the disk past which the recording fails rather than grow memory */
  maxPendingBytes?: number;
  onError(err: NodeJS.ErrnoException): void;
  /** everything queued is on disk: a producer that paused on pendingBytes may go on */
  onDrain?(): void;
}

/**
 * Appends FLV tags to a file, whole tags only and in order, so the file plays up to its last complete tag at any
 * moment, after a crash included. Writes go through one async queue; a disk that falls behind fails the recording.
 * After a write error the file is cut back to its last complete tag when it is closed.
 */
export class FlvFileWriter {
  private fd: number | undefined;
  private queue: Buffer[] = [];
  /** bytes queued or being written */
  private pending = 0;
  private writing = false;
  private failed: NodeJS.ErrnoException | undefined;
  private closed = false;
  private idle: Array<() => void> = [];
  /** bytes on disk */
  size = 0;
  /** bytes on disk that end on a tag boundary (every queued buffer holds whole tags) */
  private whole = 0;
  private headerDone = false;
  private readonly maxPending: number;

  private constructor(readonly file: string, private readonly opts: FlvFileWriterOptions) {
    this.maxPending = opts.maxPendingBytes ?? 16 * 1024 * 1024;
  }

  /** Creates the folders and the file (never overwriting one). */
  static async create(file: string, opts: FlvFileWriterOptions): Promise<FlvFileWriter> {
    const w = new FlvFileWriter(file, opts);
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    w.fd = await new Promise<number>((resolve, reject) => fs.open(file, 'wx', 0o640, (err, fd) => (err ? reject(err) : resolve(fd))));
    return w;
  }

  get error(): NodeJS.ErrnoException | undefined {
    return this.failed;
  }

  /** bytes handed to the writer and not yet on disk */
  get pendingBytes(): number {
    return this.pending;
  }

  header(hasVideo: boolean, hasAudio: boolean): void {
    if (this.headerDone) return;
    this.headerDone = true;
    this.enqueue(flvFileHeader(hasVideo, hasAudio));
  }

  get started(): boolean {
    return this.headerDone;
  }

  writeTags(tags: FlvTag[]): void {
    if (!tags.length) return;
    this.enqueue(tags.length === 1 ? serializeTag(tags[0]) : Buffer.concat(tags.map(serializeTag)));
  }

  private enqueue(buf: Buffer): void {
    if (this.failed || this.closed || this.fd === undefined) return;
    if (this.pending + buf.length > this.maxPending) {
      const err = Object.assign(new Error(`disk too slow: ${this.pending + buf.length} bytes waiting to be written`), { code: 'EBACKLOG' }) as NodeJS.ErrnoException;
      this.fail(err);
      return;
    }
    this.pending += buf.length;
    this.queue.push(buf);
    this.pump();
  }

  private pump(): void {
    if (this.writing || this.fd === undefined) return;
    if (this.queue.length === 0 || this.failed) {
      const cbs = this.idle;
      this.idle = [];
      for (const cb of cbs) cb();
      if (!this.failed && !this.closed) this.opts.onDrain?.();
      return;
    }
    const buf = this.queue.length === 1 ? this.queue[0] : Buffer.concat(this.queue);
    this.queue = [];
    this.writing = true;
    this.writeAll(buf, 0);
  }

  private writeAll(buf: Buffer, off: number): void {
    fs.write(this.fd!, buf, off, buf.length - off, null, (err, n) => {
      if (err) {
        this.writing = false;
        this.pending -= buf.length;
        this.fail(err);
        return;
      }
      this.size += n;
      // A short write (file size limit, nearly full disk) goes on until the next call reports the error.
      if (off + n < buf.length) {
        this.writeAll(buf, off + n);
        return;
      }
      this.whole = this.size;
      this.pending -= buf.length;
      this.writing = false;
      this.pump();
    });
  }

  private fail(err: NodeJS.ErrnoException): void {
    if (this.failed) return;
    this.failed = err;
    for (const b of this.queue) this.pending -= b.length;
    this.queue = [];
    this.opts.onError(err);
    // a write in flight finishes first and then wakes whoever waits
    if (!this.writing) this.pump();
  }

  /**
   * Flushes what is queued, syncs and closes the file; resolves with its size. After a write error the file is
   * first cut back to its last complete tag, so what was kept plays to its end.
   */
  async close(): Promise<number> {
    if (this.closed) return this.size;
    this.closed = true;
    if (this.writing || this.queue.length) await new Promise<void>((resolve) => this.idle.push(resolve));
    const fd = this.fd;
    this.fd = undefined;
    if (fd !== undefined) {
      if (this.failed && this.size > this.whole) {
        const ok = await new Promise<boolean>((resolve) => fs.ftruncate(fd, this.whole, (e) => resolve(!e)));
        if (ok) this.size = this.whole;
      }
      await new Promise<void>((resolve) => fs.fsync(fd, () => resolve()));
      await new Promise<void>((resolve) => fs.close(fd, () => resolve()));
    }
    return this.size;
  }
}
