/**
 * The G.711 audio of a record file as AAC-LC frames (`audio=aac` of the MP4 form): the samples are read from the
 * FLV in windows and sent in chunks to a worker thread (aac-worker.ts) that decodes and encodes them, so the
 * gateway's event loop only copies bytes. The worker starts at the first file that needs it and stops once it has
 * been idle for a while (it holds the wasm encoder, a few MB).
 *
 * Time: the AAC track is the G.711 samples end to end, so its stts comes from the frame count; where the FLV's
 * timestamps jump ahead of the samples (a gap in the recording: the bus skipped to a keyframe, the terminal lost
 * packets) silence fills the gap, so sound stays with the pictures after it.
 */
import * as fs from 'node:fs';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { StageWorker } from '../../../plugin-sdk/worker';
import { AAC_ASC, AAC_RATE } from './aac-wasm';
import type { AacReq, AacRes } from './aac-protocol';
import type { FlvIndex } from './flv-index';

const readAsync = promisify(fs.read);
const WINDOW = 1 << 20;
/** G.711 bytes per call to the worker: 16 s of 8 kHz mono, some 30 ms of its CPU */
const CHUNK = 128 * 1024;
/** a timestamp this far ahead of the samples so far is a gap, filled with silence (less is clock jitter) */
const GAP_MS = 200;

/** The AAC track made from a file's G.711 audio. */
export interface AacTrack {
  /** AudioSpecificConfig: AAC-LC, 8000 Hz, mono */
  asc: Buffer;
  sampleRate: number;
  /** every frame's bytes, end to end, in order; the first frame is the encoder's priming */
  bytes: Buffer;
  sizes: Uint32Array;
  /** mono samples encoded (the G.711 samples and the silence of gaps), i.e. what the track presents */
  samples: number;
  /** the FLV timestamp (ms) of the first audio sample: the track's first real sound plays then */
  firstDts: number;
  /** wall time of the encode, ms */
  ms: number;
}

/** The G.711 law of the index's audio, when it is one G.711 configuration (what can be transcoded) */
export function g711Audio(index: FlvIndex): { law: 'alaw' | 'ulaw'; channels: number } | undefined {
  const descs = index.descriptions[1];
  if (descs.length !== 1) return undefined;
  const d = descs[0]!;
  return d.codec === 'alaw' || d.codec === 'ulaw' ? { law: d.codec, channels: d.channels } : undefined;
}

export class G711Transcoder {
  private worker: StageWorker<AacReq, AacRes> | undefined;
  private running = 0;
  private seq = 0;
  private idle: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    private readonly idleMs = 30_000,
  ) {}

  /** the AAC of `file`'s G.711 audio as `index` (of the file's first `index.flvLength` bytes) lists it */
  async transcode(file: string, index: FlvIndex): Promise<AacTrack> {
    const audio = g711Audio(index);
    if (!audio) throw new Error("the record's audio is not G.711");
    const started = Date.now();
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    // a hang check longer than any one chunk can take, even on a saturated core
    this.worker ??= new StageWorker<AacReq, AacRes>(require.resolve('./aac-worker'), { name: 'recorder-aac', log: this.log, hangMs: 30_000 });
    const w = this.worker;
    const job = ++this.seq;
    this.running++;
    const frames: Array<{ bytes: Uint8Array; sizes: Uint32Array }> = [];
    let samples: number;
    let fd: fs.promises.FileHandle | undefined;
    try {
      fd = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      await w.call({ op: 'open', job, law: audio.law, channels: audio.channels });
      const send = async (g711: Uint8Array): Promise<void> => {
        const r = await w.call({ op: 'encode', job, g711 }, [g711.buffer as ArrayBuffer]);
        if (r.op === 'frames') frames.push(r);
      };
      const firstDts = await this.feed(fd.fd, index, audio, send);
      const tail = await w.call({ op: 'flush', job });
      if (tail.op !== 'frames') throw new Error('the AAC worker did not flush');
      frames.push(tail);
      samples = tail.samplesIn;
      const count = frames.reduce((n, f) => n + f.sizes.length, 0);
      const sizes = new Uint32Array(count);
      let k = 0;
      for (const f of frames) {
        sizes.set(f.sizes, k);
        k += f.sizes.length;
      }
      const bytes = Buffer.concat(frames.map((f) => f.bytes));
      return { asc: AAC_ASC, sampleRate: AAC_RATE, bytes, sizes, samples, firstDts, ms: Date.now() - started };
    } catch (err) {
      void w.call({ op: 'drop', job }).catch(() => undefined);
      throw err;
    } finally {
      await fd?.close();
      if (--this.running === 0) {
        this.idle = setTimeout(() => {
          void this.stopWorker();
        }, this.idleMs);
        this.idle.unref();
      }
    }
  }

  /** Reads the G.711 samples in file order and sends them in chunks; the first sample's timestamp. */
  private async feed(fd: number, index: FlvIndex, audio: { law: 'alaw' | 'ulaw'; channels: number }, send: (b: Uint8Array) => Promise<void>): Promise<number> {
    const s = index.samples;
    const silence = audio.law === 'alaw' ? 0xd5 : 0xff;
    const perMs = (AAC_RATE / 1000) * audio.channels; // bytes a ms
    let win = Buffer.alloc(0);
    let winAt = 0;
    let chunk = new Uint8Array(CHUNK);
    let len = 0;
    let written = 0; // bytes of the track so far
    let firstDts = NaN;
    const put = async (src: Uint8Array | number, n: number): Promise<void> => {
      let done = 0;
      while (done < n) {
        const k = Math.min(n - done, CHUNK - len);
        if (typeof src === 'number') chunk.fill(src, len, len + k);
        else chunk.set(src.subarray(done, done + k), len);
        len += k;
        done += k;
        if (len === CHUNK) {
          // moved to the worker: a new buffer for the next chunk
          await send(chunk);
          chunk = new Uint8Array(CHUNK);
          len = 0;
        }
      }
    };
    for (let i = 0; i < s.count; i++) {
      if (s.track[i] !== 1) continue;
      const at = s.flvOffset[i]!;
      const size = s.size[i]!;
      if (Number.isNaN(firstDts)) firstDts = s.dts[i]!;
      const due = Math.round((s.dts[i]! - firstDts) * perMs);
      if (due - written > GAP_MS * perMs) {
        const gap = due - written - ((due - written) % audio.channels);
        await put(silence, gap);
        written += gap;
      }
      if (at < winAt || at + size > winAt + win.length) {
        const n = Math.max(size, Math.min(WINDOW, index.flvLength - at));
        win = Buffer.allocUnsafe(n);
        const { bytesRead } = await readAsync(fd, win, 0, n, at);
        if (bytesRead < size) throw new Error('the FLV file is shorter than when it was indexed');
        win = win.subarray(0, bytesRead);
        winAt = at;
      }
      await put(win.subarray(at - winAt, at - winAt + size), size);
      written += size;
    }
    if (len > 0) await send(chunk.slice(0, len));
    return firstDts;
  }

  private async stopWorker(): Promise<void> {
    const w = this.worker;
    if (!w || this.running > 0) return;
    this.worker = undefined;
    await w.close();
  }

  /** at the plugin's stop: encodes in flight fail, the worker ends */
  async close(): Promise<void> {
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    const w = this.worker;
    this.worker = undefined;
    await w?.close();
  }
}
