/**
 * Many AAC-LC encoders in one thread: the worker side of the engine (worker.ts serves it to the main thread), and
 * usable as it is by any other worker that wants encoders next to its own work (e.g. a whole decode-resample-encode
 * pipeline per stream in one worker).
 *
 * Encoders live in wasm instances (wasm.ts) of up to `perInstance` encoders each. An instance's memory grows with
 * the encoders it holds (~0.7 MB each, mostly ffmpeg's per-context quantiser cost cache) and can never shrink, so
 * a new encoder goes into the fullest instance that has room, which lets the others empty, and an instance left
 * with no encoder is dropped (its memory goes with the next GC of this thread) unless it is the last one: a steady
 * open/close pattern then reuses the freed contexts' memory (ffmpeg's allocator, emmalloc, hands freed blocks out
 * again) instead of instantiating again.
 *
 * Input is clamped to [-1, 1] and NaN made 0 on the way in: one NaN or huge value makes ffmpeg's encoder fail every
 * later frame ("Input contains (near) NaN/+-Inf"), and uninitialised-looking input was seen to make it spin.
 */
import { AacWasmInstance, type AacCoder } from './wasm';

/** Sample rates of the AAC sampling-frequency table (index = position) */
export const AAC_SAMPLE_RATES: readonly number[] = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export const AAC_FRAME_SAMPLES = 1024;
/** ffmpeg's AAC encoder sets initial_padding to one frame: the first packet decodes to that much lead-in */
export const AAC_PRIMING_SAMPLES = 1024;

export interface AacEncoderConfig {
  /** one of AAC_SAMPLE_RATES */
  sampleRate: number;
  channels: 1 | 2;
  /** bits per second for all channels together */
  bitrate: number;
}

/**
 * The default output for terminal speech: 8 kHz mono at 24 kbit/s. The terminals send 8 kHz audio (nothing above
 * 4 kHz), and 8 kHz AAC carries all of it with no resampling. Measured here (aac-engine bench, 300-500 streams
 * in one worker, 20 ms chunks of real speech, fast coder): ~1.4 ms of worker CPU per second of one stream at
 * 8 kHz, ~2.0-2.3 ms at 16 kHz (plus the resampler's own cost on top), so 8 kHz holds ~700 streams per core where
 * 16 kHz holds ~450-520, at or under the 500 target. What 16 kHz would buy: half the delay (a sample's frame
 * leaves the encoder 2048-3072 samples after the sample came in: the frame being filled, plus the one frame
 * ffmpeg holds as look-ahead; 256-384 ms at 8 kHz, 128-192 ms at 16 kHz; a player whose audio lags holds its
 * video as long) and shorter frames for speech transients; a site that prefers that asks for it in audioCfg.
 * Browsers decode 8 kHz AAC-LC (mpegts.js and hls.js signal every rate <= 24 kHz to MSE alike, as HE-AAC with
 * the rate doubled).
 */
export const DEFAULT_AAC_CONFIG: Readonly<AacEncoderConfig> = { sampleRate: 8000, channels: 1, bitrate: 24000 };

export function checkAacConfig(c: AacEncoderConfig): void {
  if (!AAC_SAMPLE_RATES.includes(c.sampleRate)) throw new RangeError(`AAC sample rate ${c.sampleRate} is not one of ${AAC_SAMPLE_RATES.join(', ')}`);
  // number: a JavaScript caller or a config can pass anything
  const channels: number = c.channels;
  if (channels !== 1 && channels !== 2) throw new RangeError(`AAC channels must be 1 or 2, not ${String(channels)}`);
  // above 6144 bits per channel per frame AAC cannot go; below 8 kbit/s ffmpeg's output is not speech any more
  const max = Math.floor((6144 * c.sampleRate) / AAC_FRAME_SAMPLES) * c.channels;
  if (!Number.isInteger(c.bitrate) || c.bitrate < 8000 || c.bitrate > max)
    throw new RangeError(`AAC bitrate ${c.bitrate} must be an integer in 8000..${max} for ${c.sampleRate} Hz x ${c.channels}`);
}

/**
 * The AudioSpecificConfig of plain AAC-LC: object type 2, the rate's index, the channel configuration and a zero
 * GASpecificConfig. ffmpeg's own extradata adds 3 bytes (the 0x2b7 sync extension saying "no SBR"); players read the
 * first two (mpegts.js/flv.js rebuild their own config from them, hls.js and ADTS carry only these fields) and
 * ffmpeg decodes either.
 */
export function aacLcAsc(sampleRate: number, channels: number): Buffer {
  const sfi = AAC_SAMPLE_RATES.indexOf(sampleRate);
  if (sfi < 0) throw new RangeError(`no AAC sampling-frequency index for ${sampleRate} Hz`);
  const bits = (2 << 11) | (sfi << 7) | (channels << 3);
  return Buffer.from([bits >> 8, bits & 0xff]);
}

/** Where the encoded frames of one call go: the bytes are only valid during the call (they are in wasm memory). */
export interface FrameSink {
  frame(heap: Uint8Array, ptr: number, size: number, pts: number): void;
}

class ArraySink implements FrameSink {
  out: Uint8Array[] = [];
  frame(heap: Uint8Array, ptr: number, size: number): void {
    this.out.push(heap.slice(ptr, ptr + size));
  }
}

/**
 * One encoder: interleaved float PCM in, raw AAC-LC frames (no ADTS) out, in order. A frame's `pts` is the input
 * sample (per channel, counted from the first sample given, or from the last reset) that its decoded output starts
 * with: -primingSamples for the first frame, whose output is the encoder's lead-in, then every frameSamples.
 * Frame k comes out once the input reaches (k + 2) x 1024 samples: ffmpeg holds one frame of look-ahead.
 */
export class AacEncoder {
  readonly frameSamples = AAC_FRAME_SAMPLES;
  readonly primingSamples = AAC_PRIMING_SAMPLES;
  /** plain AAC-LC AudioSpecificConfig, 2 bytes */
  readonly asc: Buffer;
  /** ffmpeg's extradata as it made it (5 bytes: the LC config plus its explicit no-SBR extension) */
  readonly extradata: Uint8Array;
  /** the quantiser search in use */
  readonly coder: AacCoder;
  private ctx: number;
  private inPtr: number;
  /** floats of one frame (frameSamples x channels) */
  private readonly frameLen: number;
  /** the start of the next frame, until it is complete */
  private readonly pend: Float32Array;
  private pendLen = 0;
  /** input samples per channel given to ffmpeg: the pts of the next frame sent */
  private sent = 0;
  private closed = false;
  private broken: string | undefined;

  /** @internal created by AacEncoderPool.open */
  constructor(
    private readonly pool: AacEncoderPool,
    readonly inst: AacWasmInstance,
    readonly config: Readonly<AacEncoderConfig>,
  ) {
    const { ctx, extradata, frameSize } = inst.open(config.channels, config.sampleRate, config.bitrate);
    this.ctx = ctx;
    if (frameSize !== AAC_FRAME_SAMPLES) {
      inst.close(ctx);
      throw new Error(`ffmpeg's AAC encoder says ${frameSize} samples per frame, not ${AAC_FRAME_SAMPLES}`);
    }
    this.frameLen = AAC_FRAME_SAMPLES * config.channels;
    this.inPtr = inst.inputPtr(ctx, this.frameLen * 4);
    this.pend = new Float32Array(this.frameLen);
    this.extradata = extradata;
    this.asc = aacLcAsc(config.sampleRate, config.channels);
    this.coder = inst.coder;
    // the two bytes we send must say what ffmpeg encodes
    if (extradata[0] !== this.asc[0] || extradata[1] !== this.asc[1]) {
      inst.close(ctx);
      throw new Error(`ffmpeg's AAC config ${Buffer.from(extradata).toString('hex')} does not start with ${this.asc.toString('hex')}`);
    }
  }

  /** samples per channel buffered toward the next frame */
  get buffered(): number {
    return this.pendLen / this.config.channels;
  }

  /** input samples per channel taken so far (since open or reset) */
  get samplesIn(): number {
    return this.sent + this.buffered;
  }

  /** The frames `pcm` completes (none until 2 x 1024 samples are in: one frame of input stays inside ffmpeg). */
  encode(pcm: Float32Array): Uint8Array[] {
    const sink = new ArraySink();
    this.encodeTo(pcm, sink);
    return sink.out;
  }

  /** The same into a sink, which sees each frame's bytes in wasm memory (copy them during the call). */
  encodeTo(pcm: Float32Array, sink: FrameSink): number {
    this.usable();
    const ch = this.config.channels;
    if (pcm.length % ch !== 0) throw new RangeError(`${pcm.length} samples is not a whole number of ${ch}-channel frames`);
    const frameLen = this.frameLen;
    let i = 0;
    let n = 0;
    const len = pcm.length;
    while (this.pendLen + (len - i) >= frameLen) {
      const heap = this.inst.heapF32();
      const base = this.inPtr >> 2;
      if (this.pendLen > 0) heap.set(this.pend.subarray(0, this.pendLen), base);
      const take = frameLen - this.pendLen;
      clampInto(heap, base + this.pendLen, pcm, i, take);
      i += take;
      this.pendLen = 0;
      n += this.sendFrame(sink);
    }
    if (i < len) {
      clampInto(this.pend, this.pendLen, pcm, i, len - i);
      this.pendLen += len - i;
    }
    return n;
  }

  /**
   * End of input: the buffered part (padded with silence to a frame) and the frame held inside ffmpeg come out.
   * The encoder is reset after (the next input starts a new signal, with its own priming).
   */
  flush(): Uint8Array[] {
    const sink = new ArraySink();
    this.flushTo(sink);
    return sink.out;
  }

  /** The same into a sink; `then` 'close' closes the encoder instead of starting a new signal. */
  flushTo(sink: FrameSink, then: 'reset' | 'close' = 'reset'): number {
    this.usable();
    let n = 0;
    try {
      if (this.pendLen > 0) n += this.encodeTo(new Float32Array(this.frameLen - this.pendLen), sink);
      this.inst.drainStart(this.ctx);
      n += this.drain(sink);
    } finally {
      if (then === 'close') this.close();
    }
    if (then === 'reset') this.reopen();
    return n;
  }

  /** Drops buffered input and starts a new signal (ffmpeg cannot reset its AAC encoder: a new context replaces it). */
  reset(): void {
    if (this.closed) throw new Error('AAC encoder is closed');
    this.reopen();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.inst.close(this.ctx);
    this.pool.released(this);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private reopen(): void {
    this.inst.close(this.ctx);
    this.pendLen = 0;
    this.sent = 0;
    this.broken = undefined;
    try {
      const c = this.inst.open(this.config.channels, this.config.sampleRate, this.config.bitrate);
      this.ctx = c.ctx;
      this.inPtr = this.inst.inputPtr(c.ctx, this.frameLen * 4);
    } catch (err) {
      // the context is gone: this object is closed as far as the pool is concerned
      this.closed = true;
      this.pool.released(this);
      throw err;
    }
  }

  private usable(): void {
    if (this.closed) throw new Error('AAC encoder is closed');
    if (this.broken) throw new Error(this.broken);
  }

  private sendFrame(sink: FrameSink): number {
    const r = this.inst.send(this.ctx, this.sent);
    if (r < 0) {
      // ffmpeg keeps failing once it failed (its state is not rolled back): the owner must reset or reopen
      this.broken = `ffmpeg's AAC encoder failed (error ${r}${this.inst.lastLog ? `: ${this.inst.lastLog.trim()}` : ''}); reset or reopen it`;
      throw new Error(this.broken);
    }
    this.sent += AAC_FRAME_SAMPLES;
    return this.drain(sink);
  }

  private drain(sink: FrameSink): number {
    let n = 0;
    for (;;) {
      const size = this.inst.receive(this.ctx);
      if (size < 0) {
        this.broken = `ffmpeg's AAC encoder failed (error ${size}); reset or reopen it`;
        throw new Error(this.broken);
      }
      if (size === 0) return n;
      sink.frame(this.inst.heapU8, this.inst.packetPtr(this.ctx), size, this.inst.packetPts(this.ctx));
      n++;
    }
  }
}

function clampInto(dst: Float32Array, at: number, src: Float32Array, from: number, n: number): void {
  for (let k = 0; k < n; k++) {
    const x = src[from + k]!;
    dst[at + k] = x >= -1 && x <= 1 ? x : x > 1 ? 1 : x < -1 ? -1 : 0;
  }
}

export interface AacEncoderPoolOptions {
  /** 'fast' (default; ~3-4x cheaper than 'twoloop' at 16 kHz, see wasm.ts for how it is selected) or 'twoloop' */
  coder?: AacCoder;
  /** encoders per wasm instance (default 64, ~45 MB of linear memory when full) */
  perInstance?: number;
  /**
   * keep the last instance when its encoders are all closed (default true): the next open reuses its memory
   * instead of instantiating again (~10-20 ms of this thread); it holds at most perInstance encoders' memory
   */
  keepLast?: boolean;
}

export interface AacPoolStats {
  encoders: number;
  instances: number;
  /** linear memory of all live instances */
  wasmBytes: number;
  /** instances created and dropped since start */
  instancesCreated: number;
  instancesDropped: number;
  /** the coder in effect (the requested one unless selecting it failed) */
  coder: AacCoder;
}

export class AacEncoderPool {
  private readonly instances: AacWasmInstance[] = [];
  private creating: Promise<AacWasmInstance> | undefined;
  private readonly coder: AacCoder;
  private readonly perInstance: number;
  private readonly keepLast: boolean;
  private created = 0;
  private dropped = 0;
  private encoders = 0;

  constructor(opts: AacEncoderPoolOptions = {}) {
    this.coder = opts.coder ?? 'fast';
    this.perInstance = opts.perInstance ?? 64;
    this.keepLast = opts.keepLast ?? true;
    if (!(this.perInstance >= 1)) throw new RangeError('perInstance must be >= 1');
  }

  async open(config: AacEncoderConfig): Promise<AacEncoder> {
    checkAacConfig(config);
    const cfg = { sampleRate: config.sampleRate, channels: config.channels, bitrate: config.bitrate };
    for (;;) {
      // picked and used in one synchronous step: a close in between could otherwise drop the instance picked
      let best: AacWasmInstance | undefined;
      for (const i of this.instances) if (i.contexts < this.perInstance && (!best || i.contexts > best.contexts)) best = i;
      if (best) {
        const enc = new AacEncoder(this, best, cfg);
        this.encoders++;
        return enc;
      }
      await this.newInstance();
    }
  }

  stats(): AacPoolStats {
    let wasmBytes = 0;
    for (const i of this.instances) wasmBytes += i.heapBytes;
    const coder = this.instances.length > 0 && this.instances.every((i) => i.coder === 'fast') ? 'fast' : this.instances.length > 0 ? 'twoloop' : this.coder;
    return { encoders: this.encoders, instances: this.instances.length, wasmBytes, instancesCreated: this.created, instancesDropped: this.dropped, coder };
  }

  /** @internal an encoder closed (or lost its context) */
  released(enc: AacEncoder): void {
    this.encoders--;
    const inst = enc.inst;
    if (inst.contexts > 0) return;
    if (this.keepLast && this.instances.length === 1) return;
    const at = this.instances.indexOf(inst);
    if (at >= 0) this.instances.splice(at, 1);
    this.dropped++;
  }

  private newInstance(): Promise<AacWasmInstance> {
    // one at a time: opens arriving meanwhile wait for it instead of each making an instance
    this.creating ??= AacWasmInstance.create(this.coder).then(
      (i) => {
        this.creating = undefined;
        this.instances.push(i);
        this.created++;
        return i;
      },
      (err: unknown) => {
        this.creating = undefined;
        throw err;
      },
    );
    return this.creating;
  }
}
