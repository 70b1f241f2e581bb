/**
 * The engine's worker thread: an AacEncoderPool served to AacEngine (client.ts) through StageWorker.
 *
 * Encoder ids carry this thread's id (unique in the process, new for every worker the supervisor starts): an id
 * from a worker that died can never name an encoder of its successor.
 */
import * as fs from 'node:fs';
import { threadId, workerData } from 'node:worker_threads';
import type { TransferListItem } from 'node:worker_threads';
import { serveWorker } from '../../../../plugin-sdk/worker';
import { AacEncoderPool, type AacEncoder, type FrameSink } from './pool';
import type { EngineReq, EngineRes, EngineWorkerData, FramesRes, OpenRes, StatsRes } from './protocol';

const data = (workerData ?? {}) as EngineWorkerData;
const pool = new AacEncoderPool({ coder: data.coder, perInstance: data.perInstance });
const encoders = new Map<number, AacEncoder>();
let seq = 0;
const ID_BASE = threadId * 2 ** 32;

/** Collects a batch's frames: bytes in one growing buffer, reused from batch to batch. */
class BatchSink implements FrameSink {
  private buf = new Uint8Array(64 * 1024);
  private len = 0;
  private sizes: number[] = [];
  private pts: number[] = [];

  frame(heap: Uint8Array, ptr: number, size: number, pts: number): void {
    if (this.len + size > this.buf.length) {
      const bigger = new Uint8Array(Math.max(this.buf.length * 2, this.len + size));
      bigger.set(this.buf.subarray(0, this.len));
      this.buf = bigger;
    }
    this.buf.set(heap.subarray(ptr, ptr + size), this.len);
    this.len += size;
    this.sizes.push(size);
    this.pts.push(pts);
  }

  get frames(): number {
    return this.sizes.length;
  }

  /** forgets the last n frames (those of an item that failed part way) */
  dropLast(n: number): void {
    for (let k = 0; k < n; k++) {
      this.len -= this.sizes.pop()!;
      this.pts.pop();
    }
  }

  /** The batch's answer: an exact-size copy of the bytes (moved to the main thread, so not the reused buffer). */
  take(counts: Int32Array, errors: Record<number, string> | undefined): FramesRes {
    const res: FramesRes = {
      op: 'frames',
      bytes: this.buf.slice(0, this.len).buffer,
      sizes: Uint32Array.from(this.sizes),
      pts: Float64Array.from(this.pts),
      counts,
    };
    if (errors) res.errors = errors;
    this.len = 0;
    this.sizes = [];
    this.pts = [];
    return res;
  }
}

const sink = new BatchSink();

function lookup(id: number): AacEncoder {
  const e = encoders.get(id);
  if (!e) throw new Error(`no AAC encoder ${id} in this worker (closed, or opened in a worker that has since died)`);
  return e;
}

function threadCpuMs(): number {
  try {
    return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return NaN;
  }
}

async function handle(req: EngineReq): Promise<EngineRes> {
  switch (req.op) {
    case 'open': {
      const enc = await pool.open(req.config);
      const id = ID_BASE + ++seq;
      encoders.set(id, enc);
      // a copy: enc.asc may sit in Buffer's shared pool
      const res: OpenRes = { op: 'open', id, asc: new Uint8Array(enc.asc), coder: enc.coder };
      return res;
    }
    case 'encode': {
      const counts = new Int32Array(req.ids.length);
      let errors: Record<number, string> | undefined;
      for (let i = 0; i < req.ids.length; i++) {
        const before = sink.frames;
        try {
          lookup(req.ids[i]!).encodeTo(req.pcm[i]!, sink);
          counts[i] = sink.frames - before;
        } catch (err) {
          // frames this item made before failing are in the sink: they stay (counted) only if it did not fail
          counts[i] = -1;
          (errors ??= {})[i] = (err as Error).message;
          sink.dropLast(sink.frames - before);
        }
      }
      return sink.take(counts, errors);
    }
    case 'close': {
      const enc = lookup(req.id);
      encoders.delete(req.id);
      const before = sink.frames;
      try {
        return sink.take(Int32Array.of(req.flush ? enc.flushTo(sink, 'close') : 0), undefined);
      } catch (err) {
        sink.dropLast(sink.frames - before);
        throw err;
      } finally {
        enc.close(); // (a no-op after flushTo's close)
      }
    }
    case 'stats': {
      const mem = process.memoryUsage();
      const res: StatsRes = { op: 'stats', ...pool.stats(), cpuMs: threadCpuMs(), jsHeapBytes: mem.heapUsed, rssBytes: mem.rss, threadId };
      return res;
    }
    case 'crash': {
      if (!data.testHooks) throw new Error('crash is a test hook: not enabled in this worker');
      // an uncaught error, as a bug in here would be: the call stays unanswered until the supervisor notices
      return new Promise<EngineRes>(() => {
        setImmediate(() => {
          throw new Error('AAC engine worker crashed on request');
        });
      });
    }
  }
}

serveWorker<EngineReq, EngineRes>(handle, (res): TransferListItem[] =>
  res.op === 'frames' ? [res.bytes, res.sizes.buffer as ArrayBuffer, res.pts.buffer as ArrayBuffer, res.counts.buffer as ArrayBuffer] : [],
);
