/**
 * The main thread's side of the audio frames' trip to the worker: every stream's frames of one batch (an event-loop
 * pass, or up to `frameBatchMs`) packed into one call (the bytes in one buffer, their job, time and length in typed
 * arrays), and the AAC that comes back unpacked the same way.
 *
 * Why: a call per frame was one structured-clone object graph (the call, its request, a Uint8Array with an
 * ArrayBuffer of its own) each way, for a 160-byte frame: 12,500 graphs a second at 250 streams of 20 ms frames.
 * Packed, a batch costs a few typed arrays whatever its number of frames, and the only per-frame copy on the main
 * thread is the one into the batch's buffer (measured gains: test/bench/README.md, audio).
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

/** What a group of frames made: its AAC frames, and where the input must reach for the next one to complete. */
export interface GroupResult {
  frames: EncodedFrame[];
  /** in ticks of the group's last frame's timescale; NaN when the worker could not say */
  dueTicks: number;
}

interface Waiting {
  /** frames of the group this answers */
  count: number;
  resolve(r: GroupResult): void;
  reject(err: Error): void;
}

const FIRST_BYTES = 16 * 1024;

export class FrameLane {
  private jobs: number[] = [];
  private dts: number[] = [];
  private scales: number[] = [];
  private lens: number[] = [];
  private waiting: Waiting[] = [];
  private bytes: Uint8Array = new Uint8Array(FIRST_BYTES);
  private used = 0;
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
    return this.pushGroup(job, [{ payload: frame, dtsTicks, timescale }]).then((r) => r.frames);
  }

  /**
   * Frames of one job, in order, answered together: the AAC frames they complete (one promise for the group, not
   * one per frame), or the first error among them (UNKNOWN_JOB when the worker does not hold the job).
   */
  pushGroup(job: number, group: readonly LaneFrame[]): Promise<GroupResult> {
    for (const f of group) this.add(job, f);
    if (!this.queued) {
      this.queued = true;
      // never before the check phase: every socket read of this pass of the loop joins the batch
      if (this.batchMs > 0) setTimeout(this.flush, this.batchMs);
      else setImmediate(this.flush);
    }
    return new Promise<GroupResult>((resolve, reject) => this.waiting.push({ count: group.length, resolve, reject }));
  }

  private add(job: number, f: LaneFrame): void {
    const frame = f.payload;
    if (this.used + frame.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.used + frame.length));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    this.bytes.set(frame, this.used);
    this.used += frame.length;
    this.jobs.push(job);
    this.dts.push(f.dtsTicks);
    this.scales.push(f.timescale);
    this.lens.push(frame.length);
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
    const n = this.jobs.length;
    if (n === 0) return false;
    const batch: PushBatch = {
      op: 'push-batch',
      jobs: Int32Array.from(this.jobs),
      dtsTicks: Float64Array.from(this.dts),
      timescales: Float64Array.from(this.scales),
      lengths: Uint32Array.from(this.lens),
      // a compact copy of the used part: its buffer moves to the worker
      bytes: this.bytes.slice(0, this.used),
    };
    const waiting = this.waiting;
    this.jobs = [];
    this.dts = [];
    this.scales = [];
    this.lens = [];
    this.waiting = [];
    this.used = 0;
    this.batches++;
    const moved = [batch.jobs, batch.dtsTicks, batch.timescales, batch.lengths, batch.bytes].map((a) => a.buffer as ArrayBuffer);
    this.worker.call(batch, moved).then(
      (r) => settle(r, waiting),
      (err: Error) => {
        for (const w of waiting) w.reject(err);
      },
    );
    return true;
  }
}

/** hands each group the AAC its frames made (views into the reply's one buffer), or its first frame's error */
function settle(r: TranscodeReply, waiting: Waiting[]): void {
  if (r.op !== 'push-batch') {
    const err = new Error(`unexpected reply ${r.op} to a frame batch`);
    for (const w of waiting) w.reject(err);
    return;
  }
  const b: PushBatchReply = r;
  let entry = 0;
  let frame = 0;
  let at = 0;
  for (const w of waiting) {
    const out: EncodedFrame[] = [];
    let error: Error | undefined;
    for (let e = 0; e < w.count; e++, entry++) {
      const status = b.status[entry];
      const count = b.counts[entry];
      if (status !== 0) error ??= new Error(status === 1 ? UNKNOWN_JOB : (b.errors[entry] ?? 'transcode failed'));
      for (let k = 0; k < count; k++, frame++) {
        const len = b.frameLengths[frame];
        out.push({ data: b.bytes.subarray(at, at + len), dtsTicks: b.frameDts[frame] });
        at += len;
      }
    }
    if (error) w.reject(error);
    else w.resolve({ frames: out, dueTicks: b.due[entry - 1] });
  }
}
