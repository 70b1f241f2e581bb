/**
 * ffmpeg's AAC encoder compiled to WebAssembly, as `@mediabunny/aac-encoder` (MPL-2.0 wrapper around LGPL-2.1+
 * FFmpeg code, version pinned in package.json) ships it, loaded into the current thread.
 *
 * Why not the package's own entry: it is an ES module whose only export registers an encoder with mediabunny, and
 * each such encoder spawns its own worker thread holding its own copy of the wasm (~2 MB and a thread per stream).
 * What we need is the Emscripten module inside it: `dist/modules/build/aac.js`, the build's glue with the wasm
 * inlined as a string, exporting `init_encoder`, `send_frame`, `receive_packet`, `close_encoder` ... on encoder
 * context pointers (the package's src/bridge.c), so one instance hosts any number of encoders and frees them.
 * That file is compiled by tsc to a CommonJS shape (`exports.default = Module`) but still says `import.meta.url`
 * (read only in browsers: `ENVIRONMENT=web,worker`, the wasm is inlined), so neither `require` nor `import()` can
 * load it. We read its text, replace that one expression and compile it with `vm.compileFunction` (which keeps the
 * file name in stack traces). The checks below fail loudly if a new version changes that shape.
 *
 * The coder. ffmpeg's AAC encoder has two quantiser searches, 'twoloop' (the default) and 'fast', chosen by the
 * private option `aac_coder`. bridge.c opens the codec with no options, and nothing in the module sets one, but
 * ffmpeg gives a private option its default from the option table (`aacenc_options`, a static array in the wasm's
 * linear memory, which wasm cannot make read-only) when the context is allocated. So `selectCoder` finds the
 * `aac_coder` record in that table by its name, type and unit, and writes the value of the 'fast' constant (found
 * the same way, not assumed) as its default: every encoder opened afterwards in this instance uses it. The first
 * encoder then reads the option back from its own private context (found through its AVClass) to prove it took;
 * if anything does not look as expected the default is left alone and the instance reports 'twoloop'.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vm from 'node:vm';

export const AAC_WASM_PACKAGE = '@mediabunny/aac-encoder';

/** The Emscripten module's exports we use (names from bridge.c; i64 travels as bigint). */
interface EmModule {
  HEAPU8: Uint8Array;
  _init_encoder(channels: number, sampleRate: number, bitrate: number): number;
  _get_encoder_frame_size(ctx: number): number;
  _get_encoder_extradata(ctx: number): number;
  _get_encoder_extradata_size(ctx: number): number;
  _get_encode_input_ptr(ctx: number, bytes: number): number;
  _send_frame(ctx: number, pts: bigint): number;
  _receive_packet(ctx: number): number;
  _flush_encoder_start(ctx: number): void;
  _get_encoded_data(ctx: number): number;
  _get_encoded_pts(ctx: number): bigint;
  _close_encoder(ctx: number): void;
}

type Factory = (moduleArg?: { print?: (s: string) => void; printErr?: (s: string) => void }) => Promise<EmModule>;

const EXPORTS: ReadonlyArray<keyof EmModule> = [
  '_init_encoder',
  '_get_encoder_frame_size',
  '_get_encoder_extradata',
  '_get_encoder_extradata_size',
  '_get_encode_input_ptr',
  '_send_frame',
  '_receive_packet',
  '_flush_encoder_start',
  '_get_encoded_data',
  '_get_encoded_pts',
  '_close_encoder',
];

let factory: Factory | undefined;
/** where the aac_coder option record sits in static data, and the values of its two constants */
let found: { at: number; fast: bigint; twoloop: bigint } | undefined;

/** The glue file's path: beside the package's bundle, which is what its exports map lets us resolve. */
export function aacWasmFile(): string {
  const bundle = require.resolve(AAC_WASM_PACKAGE);
  return path.join(path.dirname(bundle), '..', 'modules', 'build', 'aac.js');
}

function loadFactory(): Factory {
  if (factory) return factory;
  const file = aacWasmFile();
  // utf8, not latin1: the inlined wasm is a string of code points that binaryDecode turns back into bytes
  const src = fs.readFileSync(file, 'utf8');
  const shape = src.split('import.meta.url').length === 2 && src.includes('exports.default = Module;') && src.includes('binaryDecode(');
  if (!shape) throw new Error(`${file} does not look like the Emscripten glue this loader was written for (${AAC_WASM_PACKAGE} changed?)`);
  const fn = vm.compileFunction(src.replace('import.meta.url', '""'), ['exports'], { filename: file }) as (exports: { default?: unknown }) => void;
  const exp: { default?: unknown } = {};
  fn(exp);
  if (typeof exp.default !== 'function') throw new Error(`${file}: no module factory`);
  factory = exp.default as Factory;
  return factory;
}

export type AacCoder = 'fast' | 'twoloop';

// ffmpeg's AVOption on wasm32: name, help (pointers), offset, type (int32), default_val (8, aligned to 8), min,
// max (double), flags (int32), unit (pointer)
const OPT_SIZE = 48;
const OPT_TYPE_INT = 2;
const OPT_TYPE_CONST = 11;
/** AVCodecContext.priv_data is a pointer within the first words; searched for, not assumed (see verifyCoder) */
const PRIV_SEARCH_BYTES = 64;
/** where static data (strings, option tables) is looked for */
const STATIC_BYTES = 2 << 20;

interface OptRecord {
  at: number;
  offset: number;
  type: number;
  def: bigint;
  min: number;
  max: number;
  unit: string | undefined;
}

/**
 * One instance of the wasm module: its own linear memory, any number of encoder contexts in it. Everything is
 * synchronous once created; the caller keeps encoders of one instance on one thread.
 */
export class AacWasmInstance {
  /** the quantiser search encoders opened from now on use */
  coder: AacCoder = 'twoloop';
  /** open encoder contexts */
  contexts = 0;
  /** ffmpeg's last error line (it logs at error level only), for error messages */
  lastLog = '';
  private coderVerified = false;
  private coderRecord: OptRecord | undefined;
  private twoloopValue = 0n;
  private f32: Float32Array;

  private constructor(private readonly m: EmModule) {
    this.f32 = new Float32Array(m.HEAPU8.buffer);
  }

  static async create(coder: AacCoder): Promise<AacWasmInstance> {
    const make = loadFactory();
    let inst: AacWasmInstance | undefined;
    const m = await make({
      print: () => undefined,
      printErr: (s) => {
        if (inst) inst.lastLog = s;
      },
    });
    for (const name of EXPORTS) if (typeof m[name] !== 'function') throw new Error(`${AAC_WASM_PACKAGE}: export ${name} missing`);
    inst = new AacWasmInstance(m);
    if (coder === 'fast') inst.selectFast();
    return inst;
  }

  /** bytes of linear memory (it grows and never shrinks: drop the instance to give it back) */
  get heapBytes(): number {
    return this.m.HEAPU8.length;
  }

  /** A new encoder context: its pointer, the extradata ffmpeg made, its frame size. Throws when ffmpeg refuses. */
  open(channels: number, sampleRate: number, bitrate: number): { ctx: number; extradata: Uint8Array; frameSize: number } {
    const m = this.m;
    this.lastLog = '';
    let ctx = m._init_encoder(channels, sampleRate, bitrate);
    if (ctx === 0)
      throw new Error(`ffmpeg's AAC encoder refused ${sampleRate} Hz x ${channels} at ${bitrate} bit/s${this.lastLog ? `: ${this.lastLog.trim()}` : ''}`);
    if (this.coder === 'fast' && !this.coderVerified) {
      if (this.verifyCoder(ctx)) {
        this.coderVerified = true;
      } else {
        // the default was written but the context does not show it: put it back and start this one again
        this.restoreTwoloop();
        m._close_encoder(ctx);
        ctx = m._init_encoder(channels, sampleRate, bitrate);
        if (ctx === 0) throw new Error('ffmpeg AAC encoder: init failed');
      }
    }
    this.contexts++;
    const p = m._get_encoder_extradata(ctx);
    const extradata = m.HEAPU8.slice(p, p + m._get_encoder_extradata_size(ctx));
    return { ctx, extradata, frameSize: m._get_encoder_frame_size(ctx) };
  }

  /** The context's input buffer (bytes), allocated once per context: later calls with the same size return it. */
  inputPtr(ctx: number, bytes: number): number {
    const p = this.m._get_encode_input_ptr(ctx, bytes);
    if (p === 0) throw new Error('ffmpeg AAC encoder: out of memory for the input buffer');
    return p;
  }

  /** A Float32 view of linear memory, renewed when memory grew (growing detaches the old buffer). */
  heapF32(): Float32Array {
    if (this.f32.buffer !== this.m.HEAPU8.buffer) this.f32 = new Float32Array(this.m.HEAPU8.buffer);
    return this.f32;
  }

  get heapU8(): Uint8Array {
    return this.m.HEAPU8;
  }

  /** Encodes the frame in the context's input buffer; negative: ffmpeg's error code. */
  send(ctx: number, pts: number): number {
    this.lastLog = '';
    return this.m._send_frame(ctx, BigInt(pts));
  }

  /** Size of the next packet ready (0: none); then packetPtr/packetPts describe it until the next call. */
  receive(ctx: number): number {
    return this.m._receive_packet(ctx);
  }

  packetPtr(ctx: number): number {
    return this.m._get_encoded_data(ctx);
  }

  packetPts(ctx: number): number {
    return Number(this.m._get_encoded_pts(ctx));
  }

  /** End of input: packets still inside come out through receive(); the context takes no more frames after. */
  drainStart(ctx: number): void {
    this.m._flush_encoder_start(ctx);
  }

  close(ctx: number): void {
    this.m._close_encoder(ctx);
    this.contexts--;
  }

  // ---- the coder (see the file comment)

  private cstr(p: number): string {
    const h = this.m.HEAPU8;
    let e = p;
    while (e < h.length && h[e] !== 0) e++;
    return Buffer.from(h.buffer, h.byteOffset + p, e - p).toString('latin1');
  }

  private record(at: number): OptRecord {
    const dv = new DataView(this.m.HEAPU8.buffer);
    const unitPtr = dv.getUint32(at + 44, true);
    return {
      at,
      offset: dv.getInt32(at + 8, true),
      type: dv.getUint32(at + 12, true),
      def: dv.getBigInt64(at + 16, true),
      min: dv.getFloat64(at + 24, true),
      max: dv.getFloat64(at + 32, true),
      unit: unitPtr ? this.cstr(unitPtr) : undefined,
    };
  }

  /**
   * Option records by name: the names are found in static data, then, in one pass, the records that point at
   * them. A linker may merge "fast" into the tail of a longer string, so every occurrence is a candidate.
   */
  private records(names: string[]): Map<string, OptRecord[]> {
    const h = this.m.HEAPU8;
    const lim = Math.min(h.length, STATIC_BYTES);
    const bytes = Buffer.from(h.buffer, h.byteOffset, lim);
    const wanted = new Map<number, string>();
    for (const name of names) {
      const needle = Buffer.from(name + '\0', 'latin1');
      for (let at = bytes.indexOf(needle); at >= 0; at = bytes.indexOf(needle, at + 1)) wanted.set(at, name);
    }
    const out = new Map<string, OptRecord[]>(names.map((n) => [n, []]));
    const words = new Uint32Array(h.buffer, 0, (lim - OPT_SIZE) >> 2);
    for (let i = 0; i < words.length; i++) {
      const name = wanted.get(words[i]!);
      if (name !== undefined) out.get(name)!.push(this.record(i * 4));
    }
    return out;
  }

  private selectFast(): void {
    // every instance of the module has the same static layout: the first one's search serves the others
    found ??= this.findCoderOption();
    if (!found) return;
    const rec = this.record(found.at);
    if (rec.type !== OPT_TYPE_INT || rec.unit !== 'coder' || rec.def !== found.twoloop) return;
    new DataView(this.m.HEAPU8.buffer).setBigInt64(rec.at + 16, found.fast, true);
    this.coderRecord = rec;
    this.twoloopValue = rec.def;
    this.coder = 'fast';
  }

  private findCoderOption(): { at: number; fast: bigint; twoloop: bigint } | undefined {
    const r = this.records(['aac_coder', 'fast', 'twoloop']);
    const coder = r.get('aac_coder')!.filter((x) => x.type === OPT_TYPE_INT && x.unit === 'coder');
    const consts = (n: string) => r.get(n)!.filter((x) => x.type === OPT_TYPE_CONST && x.unit === 'coder');
    const fast = consts('fast');
    const twoloop = consts('twoloop');
    if (coder.length !== 1 || fast.length !== 1 || twoloop.length !== 1) return undefined;
    const rec = coder[0]!;
    const value = fast[0]!.def;
    if (rec.def !== twoloop[0]!.def || Number(value) < rec.min || Number(value) > rec.max) return undefined;
    return { at: rec.at, fast: value, twoloop: rec.def };
  }

  private restoreTwoloop(): void {
    if (this.coderRecord) new DataView(this.m.HEAPU8.buffer).setBigInt64(this.coderRecord.at + 16, this.twoloopValue, true);
    this.coder = 'twoloop';
  }

  /**
   * The encoder context's first word is its AVCodecContext; one of that one's first pointers is priv_data, whose
   * first word is the AVClass whose option table holds our record. Read the option there.
   */
  private verifyCoder(ctx: number): boolean {
    const rec = this.coderRecord;
    if (!rec) return false;
    const dv = new DataView(this.m.HEAPU8.buffer);
    const lim = this.m.HEAPU8.length - 4;
    const u32 = (p: number) => (p >= 0 && p <= lim ? dv.getUint32(p, true) : 0);
    const avctx = u32(ctx);
    for (let i = 0; i < PRIV_SEARCH_BYTES; i += 4) {
      const priv = u32(avctx + i);
      const cls = u32(priv);
      const table = u32(cls + 8); // AVClass: class_name, item_name, option
      if (!priv || !cls || !table) continue;
      // the record lies inside the class's table, at a whole number of records from its start
      if (rec.at < table || (rec.at - table) % OPT_SIZE !== 0 || rec.at - table > 64 * OPT_SIZE) continue;
      return dv.getInt32(priv + rec.offset, true) === Number(this.record(rec.at).def);
    }
    return false;
  }
}
