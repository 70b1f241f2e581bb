/**
 * What the engine's client (client.ts, main thread) and its worker (worker.ts) say to each other through
 * StageWorker. Encodes travel in batches: one request for all the encode calls of a turn of the main event loop,
 * one answer with all their frames in one ArrayBuffer, so that hundreds of streams cost one message each way.
 */
import type { AacCoder } from './wasm';
import type { AacEncoderConfig, AacPoolStats } from './pool';

export interface EngineWorkerData {
  coder?: AacCoder;
  perInstance?: number;
  /** allows the 'crash' request (tests of the supervisor) */
  testHooks?: boolean;
}

export type EngineReq =
  | { op: 'open'; config: AacEncoderConfig }
  | { op: 'encode'; ids: number[]; pcm: Float32Array[] }
  | { op: 'close'; id: number; flush: boolean }
  | { op: 'stats' }
  | { op: 'crash' };

export interface OpenRes {
  op: 'open';
  id: number;
  asc: Uint8Array;
  coder: AacCoder;
}

/**
 * Frames of a batch, all items' in item order: frame k is bytes [off, off + sizes[k]) with off the sum of the
 * sizes before it, at pts[k]. counts[i] is item i's number of frames, or -1 when it failed (errors[i] says why).
 */
export interface FramesRes {
  op: 'frames';
  bytes: ArrayBuffer;
  sizes: Uint32Array;
  pts: Float64Array;
  counts: Int32Array;
  errors?: Record<number, string>;
}

export interface StatsRes extends AacPoolStats {
  op: 'stats';
  /** CPU time of the worker thread since it started (Linux: /proc/thread-self/schedstat), ms */
  cpuMs: number;
  /** the worker isolate's JS heap */
  jsHeapBytes: number;
  /** the whole process's RSS (threads share it) */
  rssBytes: number;
  threadId: number;
}

export type EngineRes = OpenRes | FramesRes | StatsRes;
