/**
 * The AAC engine as the main thread sees it: many AAC-LC encoders in one worker thread (worker.ts) under
 * StageWorker's supervisor.
 *
 *   const engine = new AacEngine({ log });
 *   const { id, asc, primingSamples } = await engine.open({ sampleRate: 16000, channels: 1, bitrate: 24000 });
 *   const frames = await engine.encode(id, pcm);   // [{ pts, data }]: raw AAC frames, no ADTS
 *   await engine.close(id);
 *
 * Encode calls are gathered until the event loop has run its pending I/O callbacks (setImmediate), then go as one
 * request: audio arrives one socket read at a time, each read its own callback, so batching per callback (what
 * StageWorker does by itself) would still send a message per audio unit. The PCM is moved, not copied: a
 * Float32Array that spans its whole ArrayBuffer has that buffer transferred (it is detached on return); a view
 * into a larger buffer is copied first. The frames of a batch come back in one ArrayBuffer; each frame's `data` is
 * a view of it, so a frame kept alive keeps its batch's bytes (a few KB) alive.
 *
 * If the worker dies, the supervisor starts another and every encoder is gone: calls for them reject with
 * AacEncoderLostError (code 'AAC_ENCODER_LOST'), and the owner opens a new encoder (the new one starts with its
 * own priming, a new timeline).
 */
import type { Logger } from 'pino';
import { StageWorker } from '../../../../plugin-sdk/worker';
import { AAC_FRAME_SAMPLES, AAC_PRIMING_SAMPLES, DEFAULT_AAC_CONFIG, checkAacConfig, type AacEncoderConfig } from './pool';
import type { EngineReq, EngineRes, EngineWorkerData, FramesRes, OpenRes, StatsRes } from './protocol';
import type { AacCoder } from './wasm';

export interface AacEngineOptions {
  log: Logger;
  /** names the worker in logs (default 'aac') */
  name?: string;
  /** ffmpeg's quantiser search: 'fast' (default) or 'twoloop' (~3-4x the CPU at 16 kHz, see wasm.ts) */
  coder?: AacCoder;
  /** encoders per wasm instance in the worker (default 64) */
  perInstance?: number;
  /** see StageWorkerOptions */
  hangMs?: number;
  maxRestartsPerMinute?: number;
  /** enables crashForTest() */
  testHooks?: boolean;
}

export interface AacEncoderInfo extends AacEncoderConfig {
  id: number;
  /** AudioSpecificConfig, plain AAC-LC, 2 bytes (for the FLV sequence header, esds, or the ADTS fields) */
  asc: Buffer;
  frameSamples: number;
  /** decoded output runs this many samples ahead of the input: the first frame's pts is -primingSamples */
  primingSamples: number;
  /** the quantiser search in use (the worker falls back to 'twoloop' if it cannot select 'fast') */
  coder: AacCoder;
}

export interface AacFrame {
  /** the input sample (per channel, from the encoder's first) that this frame's decoded output starts with */
  pts: number;
  /** one raw AAC frame (access unit), no ADTS header */
  data: Buffer;
}

export class AacEncoderLostError extends Error {
  readonly code = 'AAC_ENCODER_LOST';
}

export interface AacEngineStats extends StatsRes {
  /** encoders open as this client counts them */
  open: number;
  /** encode requests sent (each carries every encode call of one event-loop turn) and calls they carried */
  batches: number;
  encodeCalls: number;
  restarts: number;
}

interface Waiter {
  resolve(f: AacFrame[]): void;
  reject(e: Error): void;
}

interface Batch {
  ids: number[];
  pcm: Float32Array[];
  transfer: ArrayBuffer[];
  moved: Set<ArrayBufferLike>;
  waiters: Waiter[];
}

const newBatch = (): Batch => ({ ids: [], pcm: [], transfer: [], moved: new Set(), waiters: [] });

export class AacEngine {
  private readonly worker: StageWorker<EngineReq, EngineRes>;
  /** open encoders and the worker generation (deaths so far) they were opened in */
  private readonly open_ = new Map<number, number>();
  private batch = newBatch();
  private scheduled: NodeJS.Immediate | undefined;
  private warnedCoder = false;
  private batches = 0;
  private encodeCalls = 0;

  constructor(private readonly opts: AacEngineOptions) {
    const workerData: EngineWorkerData = { coder: opts.coder, perInstance: opts.perInstance, testHooks: opts.testHooks };
    this.worker = new StageWorker<EngineReq, EngineRes>(require.resolve('./worker'), {
      name: opts.name ?? 'aac',
      log: opts.log,
      workerData,
      hangMs: opts.hangMs,
      maxRestartsPerMinute: opts.maxRestartsPerMinute,
    });
  }

  /** times the worker died and was replaced (every encoder open then was lost) */
  get restarts(): number {
    return this.worker.deaths;
  }

  /** A new encoder; missing fields from DEFAULT_AAC_CONFIG (8 kHz mono, 24 kbit/s). */
  async open(config: Partial<AacEncoderConfig> = {}): Promise<AacEncoderInfo> {
    const d = DEFAULT_AAC_CONFIG;
    const cfg: AacEncoderConfig = {
      sampleRate: config.sampleRate ?? d.sampleRate,
      channels: config.channels ?? d.channels,
      bitrate: config.bitrate ?? d.bitrate,
    };
    checkAacConfig(cfg);
    const gen = this.worker.deaths;
    const res = (await this.worker.call({ op: 'open', config: cfg })) as OpenRes;
    this.open_.set(res.id, gen);
    const wanted = this.opts.coder ?? 'fast';
    if (res.coder !== wanted && !this.warnedCoder) {
      this.warnedCoder = true;
      this.opts.log.warn({ wanted, using: res.coder }, 'AAC engine could not select the coder asked for: encoding costs more CPU');
    }
    return { id: res.id, asc: Buffer.from(res.asc), frameSamples: AAC_FRAME_SAMPLES, primingSamples: AAC_PRIMING_SAMPLES, coder: res.coder, ...cfg };
  }

  /** Interleaved PCM in [-1, 1) (outside is clamped), any length: the frames it completes, in order. */
  encode(id: number, pcm: Float32Array): Promise<AacFrame[]> {
    const gen = this.open_.get(id);
    if (gen === undefined) return Promise.reject(new Error(`AAC encoder ${id} is not open`));
    if (gen !== this.worker.deaths) return Promise.reject(this.lost(id));
    const b = this.batch;
    let owned = pcm;
    const whole = pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength && pcm.buffer instanceof ArrayBuffer;
    if (!whole || b.moved.has(pcm.buffer)) owned = pcm.slice();
    b.moved.add(owned.buffer);
    b.transfer.push(owned.buffer as ArrayBuffer);
    b.ids.push(id);
    b.pcm.push(owned);
    this.encodeCalls++;
    const p = new Promise<AacFrame[]>((resolve, reject) => b.waiters.push({ resolve, reject }));
    this.scheduled ??= setImmediate(this.send);
    return p;
  }

  /**
   * Closes an encoder and frees its memory in the worker. With `flush`, the input still buffered (padded with
   * silence to a frame) and the frame held inside the encoder come out first.
   */
  async close(id: number, opts: { flush?: boolean } = {}): Promise<AacFrame[]> {
    const gen = this.open_.get(id);
    if (gen === undefined) return [];
    // encode calls already made for it must reach the worker first
    this.sendNow();
    this.open_.delete(id);
    if (gen !== this.worker.deaths) return [];
    try {
      const res = (await this.worker.call({ op: 'close', id, flush: opts.flush === true })) as FramesRes;
      return framesOf(res, 0, 0, res.counts[0] ?? 0);
    } catch (err) {
      if (gen !== this.worker.deaths) return []; // it died with its worker: nothing left to free
      throw err;
    }
  }

  async stats(): Promise<AacEngineStats> {
    const s = (await this.worker.call({ op: 'stats' })) as StatsRes;
    return { ...s, open: this.open_.size, batches: this.batches, encodeCalls: this.encodeCalls, restarts: this.worker.deaths };
  }

  /** Test hook (testHooks: true): the worker throws an uncaught error, as a bug would. */
  async crashForTest(): Promise<void> {
    await this.worker.call({ op: 'crash' });
  }

  /** Stops the worker for good: every encoder is gone, calls reject. */
  async stop(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const b = this.batch;
    this.batch = newBatch();
    for (const w of b.waiters) w.reject(new Error('AAC engine stopped'));
    this.open_.clear();
    await this.worker.close();
  }

  private lost(id: number): AacEncoderLostError {
    this.open_.delete(id);
    return new AacEncoderLostError(`AAC encoder ${id} was lost: its worker died (restarted ${this.worker.deaths} time(s))`);
  }

  private readonly send = (): void => {
    this.scheduled = undefined;
    const b = this.batch;
    if (b.ids.length === 0) return;
    this.batch = newBatch();
    this.batches++;
    const gens = b.ids.map((id) => this.open_.get(id));
    this.worker.call({ op: 'encode', ids: b.ids, pcm: b.pcm }, b.transfer).then(
      (r) => {
        const res = r as FramesRes;
        let frame = 0;
        let off = 0;
        for (let i = 0; i < b.ids.length; i++) {
          const n = res.counts[i]!;
          if (n < 0) {
            const msg = res.errors?.[i] ?? 'AAC encode failed';
            b.waiters[i]!.reject(msg.startsWith('no AAC encoder') ? this.lost(b.ids[i]!) : new Error(msg));
            continue;
          }
          const list = framesOf(res, frame, off, n);
          for (const f of list) off += f.data.length;
          frame += n;
          b.waiters[i]!.resolve(list);
        }
      },
      (err: Error) => {
        for (let i = 0; i < b.ids.length; i++) {
          const died = gens[i] !== undefined && gens[i] !== this.worker.deaths;
          b.waiters[i]!.reject(died ? this.lost(b.ids[i]!) : err);
        }
      },
    );
  };

  private sendNow(): void {
    if (!this.scheduled) return;
    clearImmediate(this.scheduled);
    this.send();
  }
}

function framesOf(res: FramesRes, first: number, off: number, n: number): AacFrame[] {
  const out: AacFrame[] = new Array<AacFrame>(n);
  for (let k = 0; k < n; k++) {
    const size = res.sizes[first + k]!;
    out[k] = { pts: res.pts[first + k]!, data: Buffer.from(res.bytes, off, size) };
    off += size;
  }
  return out;
}
