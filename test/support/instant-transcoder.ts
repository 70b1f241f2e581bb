/**
 * The AAC stage without a worker thread or a bus, for tests and test/bench/audio-path.ts: a stand-in transcode worker
 * that answers each call at once, and a stage started on a bare input whose reader the caller drives.
 */
import pino from 'pino';
import type { AccessUnit, MediaReader, StageContext, StageDefinition, StageInstance, TrackInfo } from '../../plugin-sdk';
import type { LaneWorker } from '../../plugins/audio-aac/src/frame-lane';
import type { PushBatch, PushBatchReply, TranscodeReply, TranscodeRequest } from '../../plugins/audio-aac/src/transcode-protocol';

/** bytes of each made-up AAC frame */
export const FAKE_AAC_BYTES = 200;
/** byte i of every reply is i * 7 (mod 256): a run of frames that repeats, whole frames at a time */
const PATTERN_PERIOD = 256;
const PATTERN = Uint8Array.from({ length: PATTERN_PERIOD * FAKE_AAC_BYTES }, (_, i) => (i * 7) & 0xff);

/**
 * A transcode worker's answers without a worker: per job, one AAC frame per 1,024 input samples (input and output
 * at one rate), timed as the pipeline times them (its first sample 1,024 samples of priming before the input's),
 * and the point the next one is due. Its frames' bytes say where they are: byte i of a reply's bytes is i * 7.
 */
export class InstantTranscoder implements LaneWorker {
  private readonly jobs = new Map<number, { start: number; samples: number; made: number }>();
  /** the replies to frame batches, when kept (tests look at what the stage made of them) */
  readonly replies: PushBatchReply[] = [];
  keepReplies = false;
  batches = 0;
  /** frames pushed, over all batches */
  frames = 0;

  call(req: TranscodeRequest): Promise<TranscodeReply> {
    if (req.op === 'open') {
      this.jobs.set(req.job, { start: NaN, samples: 0, made: 0 });
      return Promise.resolve({ op: 'open', ok: true });
    }
    if (req.op === 'close') {
      this.jobs.delete(req.job);
      return Promise.resolve({ op: 'close' });
    }
    this.batches++;
    const r = this.answer(req);
    if (this.keepReplies) this.replies.push(r);
    return Promise.resolve(r);
  }

  private answer(b: PushBatch): PushBatchReply {
    const n = b.jobs.length;
    this.frames += n;
    const status = new Uint8Array(n);
    const counts = new Uint16Array(n);
    const due = new Float64Array(n).fill(NaN);
    const lens: number[] = [];
    const dts: number[] = [];
    for (let i = 0; i < n; i++) {
      const j = this.jobs.get(b.jobs[i]);
      if (!j) {
        status[i] = 1;
        continue;
      }
      if (Number.isNaN(j.start)) j.start = b.dtsTicks[i];
      j.samples += b.lengths[i];
      let c = 0;
      while ((j.made + 1) * 1024 <= j.samples) {
        dts.push(j.start + j.made * 1024 - 1024);
        lens.push(FAKE_AAC_BYTES);
        j.made++;
        c++;
      }
      counts[i] = c;
      due[i] = j.start + (j.made + 1) * 1024 - 1;
    }
    const bytes = new Uint8Array(lens.length * FAKE_AAC_BYTES);
    // copied from a pattern made once: a byte loop here was a tenth of test/bench/audio-path's time, none of it the main thread's
    for (let at = 0; at < bytes.length; at += PATTERN_PERIOD * FAKE_AAC_BYTES) bytes.set(PATTERN.subarray(0, Math.min(PATTERN.length, bytes.length - at)), at);
    return { op: 'push-batch', status, counts, errors: {}, frameLengths: Uint32Array.from(lens), frameDts: Float64Array.from(dts), bytes, due };
  }
}

/** What a stage started by `startOnBareInput` pushes out. */
export interface BareOutput {
  setTrack(t: TrackInfo): void;
  push(u: AccessUnit): void;
}

/**
 * Starts `def` on an input that is only its reader: the caller gives it tracks and units through `reader`, as the
 * bus would, and gets what the stage publishes in `out`.
 */
export function startOnBareInput(def: StageDefinition, name: string, out: BareOutput): { reader: MediaReader; instance: StageInstance } {
  let reader: MediaReader | undefined;
  const input = {
    name,
    tracks: [] as TrackInfo[],
    closed: false,
    subscribe: (sink: MediaReader) => {
      reader = sink;
      return { resume: () => undefined, close: () => undefined, closed: false };
    },
  };
  const params = def.params?.({}) ?? {};
  const ctx = { input, output: out, params, log: pino({ level: 'silent' }), fail: () => undefined } as unknown as StageContext;
  const instance = def.start(ctx);
  return { reader: reader!, instance };
}
