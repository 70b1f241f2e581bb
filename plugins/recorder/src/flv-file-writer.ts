import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FlvTag } from '../../../plugin-sdk/flv-server';
import { flvFileHeader, serializeTag } from '../../../plugin-sdk/formats/flv';

export interface FlvFileWriterOptions {
  /** bytes waiting for the disk past which the recording fails rather than grow memory */
  maxPendingBytes?: number;
  onError(err: NodeJS.ErrnoException): void;
}

/**
 * Appends FLV tags to a file, whole tags only and in order, so the file plays up to its last complete tag at any
 * moment, after a crash included. Writes go through one async queue; a disk that falls behind fails the recording.
 */
export class FlvFileWriter {
  private fd: number | undefined;
  private queue: Buffer[] = [];
  private pendingBytes = 0;
  private writing = false;
  private failed: NodeJS.ErrnoException | undefined;
  private closed = false;
  private idle: Array<() => void> = [];
  /** bytes on disk */
  size = 0;
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
    this.pendingBytes += buf.length;
    if (this.pendingBytes > this.maxPending) {
      const err = Object.assign(new Error(`disk too slow: ${this.pendingBytes} bytes waiting to be written`), { code: 'EBACKLOG' }) as NodeJS.ErrnoException;
      this.fail(err);
      return;
    }
    this.queue.push(buf);
    this.pump();
  }

  private pump(): void {
    if (this.writing || this.fd === undefined) return;
    if (this.queue.length === 0) {
      const cbs = this.idle;
      this.idle = [];
      for (const cb of cbs) cb();
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
        this.fail(err);
        return;
      }
      this.size += n;
      if (off + n < buf.length) {
        this.writeAll(buf, off + n);
        return;
      }
      this.pendingBytes -= buf.length;
      this.writing = false;
      this.pump();
    });
  }

  private fail(err: NodeJS.ErrnoException): void {
    if (this.failed) return;
    this.failed = err;
    this.queue = [];
    this.pendingBytes = 0;
    this.opts.onError(err);
    const cbs = this.idle;
    this.idle = [];
    for (const cb of cbs) cb();
  }

  /** Flushes what is queued, syncs and closes the file; resolves with its size. */
  async close(): Promise<number> {
    if (this.closed) return this.size;
    this.closed = true;
    if (this.writing || this.queue.length) await new Promise<void>((resolve) => this.idle.push(resolve));
    const fd = this.fd;
    this.fd = undefined;
    if (fd !== undefined) {
      await new Promise<void>((resolve) => fs.fsync(fd, () => resolve()));
      await new Promise<void>((resolve) => fs.close(fd, () => resolve()));
    }
    return this.size;
  }
}
