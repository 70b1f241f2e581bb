/**
 * The main thread's side of the audio frames' trip to the worker: every stream's frames of one batch (an event-loop
 * pass, or up to `frameBatchMs`) packed into one call (the bytes in one buffer, their job, time and length in typed
 * arrays), and the AAC that comes back handed to each group where it lies in the reply.
 *
 * Why: a call per frame was one structured-clone object graph (the call, its request, a Uint8Array with an
 * ArrayBuffer of its own) each way, for a 160-byte frame: 12,500 graphs a second at 250 streams of 20 ms frames.
 * Packed, a batch costs a few typed arrays whatever its number of frames (measured gains: test/bench/README.md, audio).
 *
 * Per frame the lane makes no object: its bytes are copied into the batch's buffer and its numbers written into typed
 * arrays; compact copies of those cross (a few per batch, whatever its number of frames).
 * Per group of frames (HeldFrames: those up to one that completes an AAC frame) it makes one promise and one record;
 * the caller's `GroupAnswer` turns the group's part of the reply into what the promise resolves with, so the AAC
 * needs no intermediate objects (the stage makes its units straight from the reply's buffer) and no second promise.
 *
 * Order: control calls (open, close) go through `control`, which first sends the frames gathered so far, so a close
 * never overtakes its stream's last frames and an open always precedes the frames that need it.
 */
import type { TranscodeReply, TranscodeRequest, EncodedFrame, PushBatch, PushBatchReply } from './transcode-protocol';
import { UNKNOWN_JOB } from './transcode-protocol';

/** what the lane needs of a StageWorker (a test may wrap one) */
export interface LaneWorker {
  call(req: TranscodeRequest, transfer?: readonly ArrayBuffer[]): Promise<TranscodeReply>;
  /** posts what is queued now, not at the end of the turn */
  send?(): void;
}

/** one coded input frame: `dtsTicks` of `timescale` */
export interface LaneFrame {
  payload: Uint8Array;
  dtsTicks: number;
  timescale: number;
}

/**
 * Frames a caller kept back (HeldFrames): the first `taken` entries of dts/scales/lengths, their bytes back to back
 * from the start of `bytes`. Read only while pushGroup runs.
 */
export interface HeldGroup {
  readonly taken: number;
  readonly takenBytes: number;
  readonly bytes: Uint8Array;
  readonly dts: Float64Array;
  readonly scales: Float64Array;
  readonly lengths: Uint32Array;
}

/** A group's place in the lane, as its answer sees it. */
export interface GroupTicket<F extends LaneFrame> {
  readonly job: number;
  /** the caller's number for the group (the stage: its held frames' epoch) */
  readonly tag: number;
  /** the group's last frame */
  readonly last: F;
}

/** What a group's promise resolves with, made from the reply where the group's AAC lies. */
export interface GroupAnswer<R, F extends LaneFrame> {
  /**
   * The group's AAC frames are `count` frames of the reply from `first` (frameLengths, frameDts), their bytes back to
   * back in `r.bytes` from `at`; `due`: where its job's input must reach for the next one (NaN: the worker cannot say).
   */
  made(g: GroupTicket<F>, r: PushBatchReply, first: number, count: number, at: number, due: number): R;
  /** the group failed (its first error, UNKNOWN_JOB when the worker does not hold the job); a throw rejects */
  failed(g: GroupTicket<F>, err: Error): R;
}

interface Waiting<R, F extends LaneFrame> extends GroupTicket<F> {
  /** frames of the group this answers */
  readonly count: number;
  readonly answer: GroupAnswer<R, F>;
  resolve: (r: R) => void;
  reject: (err: Error) => void;
}

/** What `push` resolves with: the AAC frames as views of the reply. */
const ENCODED: GroupAnswer<EncodedFrame[], LaneFrame> = {
  made(_g, r, first, count, at) {
    const out: EncodedFrame[] = [];
    for (let k = first; k < first + count; k++) {
      const len = r.frameLengths[k];
      out.push({ data: r.bytes.subarray(at, at + len), dtsTicks: r.frameDts[k] });
      at += len;
    }
    return out;
  },
  failed(_g, err) {
    throw err;
  },
};

// One executor for every group's promise: it runs at once, inside the constructor, so the functions it is handed
// can be taken from here before the next promise is made (a closure per group would be one more object each).
let handedResolve: ((r: unknown) => void) | undefined;
let handedReject: ((err: Error) => void) | undefined;
const executor = (resolve: (r: unknown) => void, reject: (err: Error) => void): void => {
  handedResolve = resolve;
  handedReject = reject;
};

const FIRST_BYTES = 16 * 1024;
const FIRST_FRAMES = 128;

export class FrameLane {
  private n = 0;
  private jobs = new Int32Array(FIRST_FRAMES);
  private dts = new Float64Array(FIRST_FRAMES);
  private scales = new Float64Array(FIRST_FRAMES);
  private lens = new Uint32Array(FIRST_FRAMES);
  private bytes = new Uint8Array(FIRST_BYTES);
  private used = 0;
  private waiting: Array<Waiting<unknown, LaneFrame>> = [];
  private queued = false;
  /** calls made to the worker with frames (one per turn that had any) */
  batches = 0;

  /** `batchMs`: how long the first frame of a batch waits for others (0: until the end of the loop's pass) */
  constructor(
    private readonly worker: LaneWorker,
    private readonly batchMs = 0,
  ) {}

  /** One coded frame of `job` at `dtsTicks` of `timescale`: the AAC frames it completes, or UNKNOWN_JOB. */
  push(job: number, frame: Uint8Array, dtsTicks: number, timescale: number): Promise<EncodedFrame[]> {
    return this.pushGroup(job, undefined, { payload: frame, dtsTicks, timescale }, ENCODED, 0);
  }

  /**
   * The frames `held` took and `last` after them, of one job, in order, answered together by `answer` (one promise
   * for the group, not one per frame). `held` is copied now: it may be reused as soon as this returns.
   */
  pushGroup<R, F extends LaneFrame>(job: number, held: HeldGroup | undefined, last: F, answer: GroupAnswer<R, F>, tag: number): Promise<R> {
    let count = 1;
    if (held !== undefined && held.taken > 0) {
      count += held.taken;
      this.room(held.taken + 1, held.takenBytes + last.payload.length);
      this.bytes.set(held.bytes.subarray(0, held.takenBytes), this.used);
      this.used += held.takenBytes;
      for (let i = 0; i < held.taken; i++) this.entry(job, held.dts[i], held.scales[i], held.lengths[i]);
    } else {
      this.room(1, last.payload.length);
    }
    this.bytes.set(last.payload, this.used);
    this.used += last.payload.length;
    this.entry(job, last.dtsTicks, last.timescale, last.payload.length);
    if (!this.queued) {
      this.queued = true;
      // never before the check phase: every socket read of this pass of the loop joins the batch
      if (this.batchMs > 0) setTimeout(this.flush, this.batchMs);
      else setImmediate(this.flush);
    }
    const p = new Promise<R>(executor as (resolve: (r: R) => void, reject: (err: Error) => void) => void);
    const w: Waiting<R, F> = { job, tag, last, count, answer, resolve: handedResolve!, reject: handedReject! };
    handedResolve = handedReject = undefined;
    this.waiting.push(w as unknown as Waiting<unknown, LaneFrame>);
    return p;
  }

  private entry(job: number, dtsTicks: number, timescale: number, length: number): void {
    const i = this.n++;
    this.jobs[i] = job;
    this.dts[i] = dtsTicks;
    this.scales[i] = timescale;
    this.lens[i] = length;
  }

  /** room for `frames` more frames and `bytes` more bytes in this batch */
  private room(frames: number, bytes: number): void {
    if (this.used + bytes > this.bytes.length) {
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.used + bytes));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    if (this.n + frames > this.jobs.length) {
      const cap = Math.max(this.jobs.length * 2, this.n + frames);
      this.jobs = grownTo(this.jobs, new Int32Array(cap));
      this.dts = grownTo(this.dts, new Float64Array(cap));
      this.scales = grownTo(this.scales, new Float64Array(cap));
      this.lens = grownTo(this.lens, new Uint32Array(cap));
    }
  }

  /** An open or close, after the frames gathered so far. */
  control(req: TranscodeRequest): Promise<TranscodeReply> {
    this.sendFrames();
    return this.worker.call(req);
  }

  private readonly flush = (): void => {
    this.queued = false;
    if (this.sendFrames()) this.worker.send?.();
  };

  /** queues the gathered frames as one call; false when there were none */
  private sendFrames(): boolean {
    const n = this.n;
    if (n === 0) return false;
    // compact copies of the used parts (their buffers move to the worker): the lane's own arrays stay for the next batch
    const batch: PushBatch = {
      op: 'push-batch',
      jobs: this.jobs.slice(0, n),
      dtsTicks: this.dts.slice(0, n),
      timescales: this.scales.slice(0, n),
      lengths: this.lens.slice(0, n),
      bytes: compactCopy(this.bytes, this.used),
    };
    const moved = [batch.jobs.buffer, batch.dtsTicks.buffer, batch.timescales.buffer, batch.lengths.buffer, batch.bytes.buffer] as ArrayBuffer[];
    const waiting = this.waiting;
    this.waiting = [];
    this.n = 0;
    this.used = 0;
    this.batches++;
    this.worker.call(batch, moved).then(
      (r) => settle(r, waiting),
      (err: Error) => {
        for (const w of waiting) answerFailed(w, err);
      },
    );
    return true;
  }
}

/** bytes[0, used) in memory of their own; not zeroed first, as slice's is (a batch's tens of KB are all written) */
function compactCopy(bytes: Uint8Array, used: number): Uint8Array {
  const out = Buffer.allocUnsafeSlow(used);
  out.set(bytes.subarray(0, used));
  return out;
}

/** `to` (a larger array of the same kind) holding `from`'s numbers at its start */
export function grownTo<T extends Int32Array | Float64Array | Uint32Array>(from: T, to: T): T {
  to.set(from as ArrayLike<number>);
  return to;
}

function answerFailed(w: Waiting<unknown, LaneFrame>, err: Error): void {
  try {
    w.resolve(w.answer.failed(w, err));
  } catch (e) {
    w.reject(e as Error);
  }
}

/** hands each group its part of the reply (the AAC its frames made, and the due point after it), or its first frame's error */
function settle(r: TranscodeReply, waiting: Array<Waiting<unknown, LaneFrame>>): void {
  if (r.op !== 'push-batch') {
    const err = new Error(`unexpected reply ${r.op} to a frame batch`);
    for (const w of waiting) answerFailed(w, err);
    return;
  }
  const b: PushBatchReply = r;
  let entry = 0;
  let frame = 0;
  let at = 0;
  for (const w of waiting) {
    let error: Error | undefined;
    const first = frame;
    const from = at;
    for (let e = 0; e < w.count; e++, entry++) {
      const status = b.status[entry];
      if (status !== 0) error ??= new Error(status === 1 ? UNKNOWN_JOB : (b.errors[entry] ?? 'transcode failed'));
      for (let k = b.counts[entry]; k > 0; k--, frame++) at += b.frameLengths[frame];
    }
    if (error) {
      answerFailed(w, error);
      continue;
    }
    try {
      w.resolve(w.answer.made(w, b, first, frame - first, from, b.due[entry - 1]));
    } catch (e) {
      w.reject(e as Error);
    }
  }
}
