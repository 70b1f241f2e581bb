import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FlvTag } from '../../../plugin-sdk/formats';
import { flvFileHeader, serializeTag } from '../../../plugin-sdk/formats';
import { isNoSpace } from './storage-errors';

export interface FlvFileWriterOptions {
  /** bytes waiting for the disk past which the recording fails rather than grow memory */
  maxPendingBytes?: number;
  onError(err: NodeJS.ErrnoException): void;
  /** everything queued is on disk: a producer that paused on pendingBytes may go on */
  onDrain?(): void;
  /**
   * A write found the disk full (ENOSPC, EDQUOT). Resolve true once room may have been made: the write is tried
   * again from where it stopped, so the file stays whole tags. Resolve false to fail with that error. Without
   * this, a full disk fails the writer at once.
   */
  onNoSpace?(err: NodeJS.ErrnoException): Promise<boolean>;
}

/** One write: queued parts joined, with where each ended (offsets in buf), and the file size it started at. */
interface Chunk {
  buf: Buffer;
  ends: number[];
  /** index of the first end not yet on disk */
  next: number;
  start: number;
}

/** Room made that is used up again before this write gets any of it: give up rather than loop. */
const MAX_NO_SPACE_RETRIES = 16;

/**
 * mkdir -p that fails with the real cause: node's async recursive mkdir answers ENOENT when a full disk could not
 * make a folder (the sync one says ENOSPC), and ENOENT would hide the disk-full path from the recorder.
 */
async function mkdirs(dir: string): Promise<void> {
  const isDir = async (): Promise<boolean> => (await fs.promises.stat(dir).catch(() => undefined))?.isDirectory() ?? false;
  try {
    await fs.promises.mkdir(dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && (await isDir())) return;
    const parent = path.dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    await mkdirs(parent);
  }
  try {
    await fs.promises.mkdir(dir);
  } catch (err) {
    // another recording of the same SIM made it meanwhile
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !(await isDir())) throw err;
  }
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
  /** retries of the write in flight since the last one that put bytes on disk */
  private noSpaceRetries = 0;

  private constructor(
    readonly file: string,
    private readonly opts: FlvFileWriterOptions,
  ) {
    this.maxPending = opts.maxPendingBytes ?? 16 * 1024 * 1024;
  }

  /** Creates the folders and the file (never overwriting one). */
  static async create(file: string, opts: FlvFileWriterOptions): Promise<FlvFileWriter> {
    const w = new FlvFileWriter(file, opts);
    await mkdirs(path.dirname(file));
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
    this.enqueue([flvFileHeader(hasVideo, hasAudio)]);
  }

  get started(): boolean {
    return this.headerDone;
  }

  writeTags(tags: FlvTag[]): void {
    if (!tags.length) return;
    this.enqueue(tags.map(serializeTag));
  }

  /** Whole tags, framed (tag headers, bodies, PreviousTagSizes), in memory the writer may keep. */
  writeFramed(parts: Buffer[]): void {
    if (!parts.length) return;
    this.enqueue(parts);
  }

  /** Each part is whole tags (or the file header), so every part's end is a point the file may be cut back to. */
  private enqueue(parts: Buffer[]): void {
    if (this.failed || this.closed || this.fd === undefined) return;
    let len = 0;
    for (const p of parts) len += p.length;
    if (this.pending + len > this.maxPending) {
      const err = Object.assign(new Error(`disk too slow: ${this.pending + len} bytes waiting to be written`), { code: 'EBACKLOG' }) as NodeJS.ErrnoException;
      this.fail(err);
      return;
    }
    this.pending += len;
    for (const p of parts) this.queue.push(p);
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
    const parts = this.queue;
    this.queue = [];
    const ends: number[] = [];
    let end = 0;
    for (const p of parts) ends.push((end += p.length));
    this.writing = true;
    this.writeAll({ buf: parts.length === 1 ? parts[0]! : Buffer.concat(parts), ends, next: 0, start: this.size }, 0);
  }

  private writeAll(chunk: Chunk, off: number): void {
    const buf = chunk.buf;
    fs.write(this.fd!, buf, off, buf.length - off, null, (err, n) => {
      if (err) {
        if (isNoSpace(err) && this.opts.onNoSpace && this.noSpaceRetries < MAX_NO_SPACE_RETRIES && !this.failed) {
          this.noSpaceRetries++;
          // writing stays true meanwhile: close() waits for the outcome, and queued tags stay behind this buffer
          // void: a failed makeRoom reads as no retry (the catch), and what comes after reports through onError
          void this.opts
            .onNoSpace(err)
            .catch(() => false)
            .then((retry) => {
              if (retry && !this.failed) this.writeAll(chunk, off);
              else this.giveUp(buf, err);
            });
          return;
        }
        this.giveUp(buf, err);
        return;
      }
      if (n > 0) this.noSpaceRetries = 0;
      this.size += n;
      // A short write (file size limit, nearly full disk) goes on until the next call reports the error; what
      // it did write counts up to its last whole tag, so a file cut there keeps every tag that fitted.
      const done = off + n;
      while (chunk.next < chunk.ends.length && chunk.ends[chunk.next]! <= done) chunk.next++;
      if (chunk.next > 0) this.whole = chunk.start + chunk.ends[chunk.next - 1]!;
      if (done < buf.length) {
        this.writeAll(chunk, done);
        return;
      }
      this.whole = this.size;
      this.pending -= buf.length;
      this.writing = false;
      this.pump();
    });
  }

  private giveUp(buf: Buffer, err: NodeJS.ErrnoException): void {
    this.writing = false;
    this.pending -= buf.length;
    // Failed meanwhile (backlog): fail() will not run again, so whoever waits for the write is woken here.
    if (this.failed) this.pump();
    else this.fail(err);
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
