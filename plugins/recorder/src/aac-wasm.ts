/**
 * G.711 to AAC-LC for the MP4 form (`audio=aac`): ffmpeg's AAC encoder compiled to WebAssembly, as the
 * `@mediabunny/aac-encoder` dependency ships it, loaded into the thread that calls it (aac-worker.ts).
 *
 * Why a loader of our own: plugins share code only through plugin-sdk, which has no AAC encoder, and audio-aac's
 * engine is that plugin's. The package's entry is an ES module that registers a mediabunny encoder running its own
 * worker per encoder; what we need is the Emscripten module inside it, `dist/modules/build/aac.js` (its glue with
 * the wasm inlined as a string, exporting `init_encoder`, `send_frame`, `receive_packet` ... on encoder contexts).
 * That file is CommonJS-shaped but says `import.meta.url` once (read only in browsers), so neither `require` nor
 * `import()` loads it: its text is compiled with `vm.compileFunction` after replacing that expression. The shape
 * checks fail loudly if a new version of the package changes it. ffmpeg's default quantiser search (twoloop) is
 * kept: a file is encoded once and kept, so the better quality is worth its CPU (README: cost).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vm from 'node:vm';
import { ALAW_TO_PCM, ULAW_TO_PCM } from '../../../plugin-sdk/codecs';

const PACKAGE = '@mediabunny/aac-encoder';
export const AAC_FRAME = 1024;
/** ffmpeg's encoder delay: the first packet decodes to this many samples of lead-in (the MP4's edit list skips it) */
export const AAC_PRIMING = 1024;
/** the terminals' 8 kHz, encoded at that rate: ffmpeg's AAC-LC takes it, and nothing above 4 kHz is there to keep */
export const AAC_RATE = 8000;
/** speech, mono: 24 kbit/s (audio-aac's default too) is ~1.8 MB for 10 minutes */
export const AAC_BITRATE = 24_000;
/** AAC-LC (object type 2), 8000 Hz (index 11), mono: the AudioSpecificConfig players read */
export const AAC_ASC = Buffer.from([(2 << 3) | (11 >> 1), ((11 & 1) << 7) | (1 << 3)]);

interface EmModule {
  HEAPU8: Uint8Array;
  _init_encoder(channels: number, sampleRate: number, bitrate: number): number;
  _get_encoder_frame_size(ctx: number): number;
  _get_encode_input_ptr(ctx: number, bytes: number): number;
  _send_frame(ctx: number, pts: bigint): number;
  _receive_packet(ctx: number): number;
  _flush_encoder_start(ctx: number): void;
  _get_encoded_data(ctx: number): number;
  _close_encoder(ctx: number): void;
}
type Factory = (arg?: { print?: (s: string) => void; printErr?: (s: string) => void }) => Promise<EmModule>;
const EXPORTS: ReadonlyArray<keyof EmModule> = [
  '_init_encoder',
  '_get_encoder_frame_size',
  '_get_encode_input_ptr',
  '_send_frame',
  '_receive_packet',
  '_flush_encoder_start',
  '_get_encoded_data',
  '_close_encoder',
];

let loaded: Promise<EmModule> | undefined;

function load(): Promise<EmModule> {
  loaded ??= (async () => {
    const file = path.join(path.dirname(require.resolve(PACKAGE)), '..', 'modules', 'build', 'aac.js');
    // utf8: the inlined wasm is a string of code points that the glue's binaryDecode turns back into bytes
    const src = fs.readFileSync(file, 'utf8');
    if (src.split('import.meta.url').length !== 2 || !src.includes('exports.default = Module;')) {
      throw new Error(`${file} does not look like the Emscripten glue this loader was written for (${PACKAGE} changed?)`);
    }
    const fn = vm.compileFunction(src.replace('import.meta.url', '""'), ['exports'], { filename: file }) as (e: { default?: unknown }) => void;
    const exp: { default?: unknown } = {};
    fn(exp);
    if (typeof exp.default !== 'function') throw new Error(`${file}: no module factory`);
    const m = await (exp.default as Factory)({ print: () => undefined, printErr: () => undefined });
    for (const name of EXPORTS) if (typeof m[name] !== 'function') throw new Error(`${PACKAGE}: export ${name} missing`);
    return m;
  })();
  return loaded;
}

/** Encoded frames of one call: their bytes end to end, and each one's size. */
export interface AacChunk {
  bytes: Uint8Array;
  sizes: Uint32Array;
}

/**
 * One G.711 signal (A-law or µ-law bytes, mono or interleaved stereo mixed to mono) to raw AAC-LC frames, 8 kHz
 * mono. Synchronous once opened: it runs in a worker thread, never on the gateway's event loop.
 */
export class G711AacEncoder {
  private readonly table: Readonly<Int16Array>;
  private readonly pend = new Float32Array(AAC_FRAME);
  private pendLen = 0;
  private sent = 0;
  private given = 0;
  private closed = false;
  private out: Uint8Array = new Uint8Array(16 * 1024);
  private outLen = 0;
  private sizes: number[] = [];

  private constructor(
    private readonly m: EmModule,
    private readonly ctx: number,
    private readonly inPtr: number,
    law: 'alaw' | 'ulaw',
    private readonly channels: number,
  ) {
    this.table = law === 'alaw' ? ALAW_TO_PCM : ULAW_TO_PCM;
  }

  static async open(law: 'alaw' | 'ulaw', channels: number): Promise<G711AacEncoder> {
    const m = await load();
    const ctx = m._init_encoder(1, AAC_RATE, AAC_BITRATE);
    if (ctx === 0) throw new Error(`ffmpeg's AAC encoder refused ${AAC_RATE} Hz mono`);
    if (m._get_encoder_frame_size(ctx) !== AAC_FRAME) {
      m._close_encoder(ctx);
      throw new Error("ffmpeg's AAC encoder has another frame size than 1024");
    }
    const inPtr = m._get_encode_input_ptr(ctx, AAC_FRAME * 4);
    if (inPtr === 0) {
      m._close_encoder(ctx);
      throw new Error("ffmpeg's AAC encoder: no memory for its input");
    }
    return new G711AacEncoder(m, ctx, inPtr, law, channels);
  }

  /** mono samples given so far */
  get samplesIn(): number {
    return this.given;
  }

  /** The frames that `g711` completes (one frame of input stays inside ffmpeg until flush). */
  encode(g711: Uint8Array): AacChunk {
    const t = this.table;
    const ch = this.channels;
    for (let i = 0; i + ch <= g711.length; i += ch) {
      let v = t[g711[i]!]!;
      if (ch === 2) v = (v + t[g711[i + 1]!]!) / 2;
      this.pend[this.pendLen++] = v / 32768;
      this.given++;
      if (this.pendLen === AAC_FRAME) this.send();
    }
    return this.take();
  }

  /** End of input: the part frame (padded with silence) and what ffmpeg holds come out; the encoder is closed. */
  flush(): AacChunk {
    try {
      if (this.pendLen > 0) {
        this.pend.fill(0, this.pendLen);
        this.pendLen = AAC_FRAME;
        this.send();
      }
      this.m._flush_encoder_start(this.ctx);
      this.drain();
      return this.take();
    } finally {
      this.close();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.m._close_encoder(this.ctx);
  }

  private send(): void {
    if (this.closed) throw new Error('AAC encoder is closed');
    // the heap may have grown (a new buffer) since the last frame: take the view afresh
    new Float32Array(this.m.HEAPU8.buffer, this.inPtr, AAC_FRAME).set(this.pend);
    const r = this.m._send_frame(this.ctx, BigInt(this.sent));
    if (r < 0) throw new Error(`ffmpeg's AAC encoder failed (error ${r})`);
    this.sent += AAC_FRAME;
    this.pendLen = 0;
    this.drain();
  }

  private drain(): void {
    for (;;) {
      const size = this.m._receive_packet(this.ctx);
      if (size < 0) throw new Error(`ffmpeg's AAC encoder failed (error ${size})`);
      if (size === 0) return;
      const p = this.m._get_encoded_data(this.ctx);
      if (this.outLen + size > this.out.length) {
        const bigger = new Uint8Array(Math.max(this.out.length * 2, this.outLen + size));
        bigger.set(this.out.subarray(0, this.outLen));
        this.out = bigger;
      }
      this.out.set(this.m.HEAPU8.subarray(p, p + size), this.outLen);
      this.outLen += size;
      this.sizes.push(size);
    }
  }

  private take(): AacChunk {
    const chunk = { bytes: this.out.slice(0, this.outLen), sizes: Uint32Array.from(this.sizes) };
    this.outLen = 0;
    this.sizes = [];
    return chunk;
  }
}
