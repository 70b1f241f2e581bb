/**
 * The packed frame lane against the real transcode worker: order across packed frames and control calls, per-frame
 * errors inside one batch, one message per pass, and every AAC byte handed to the frame that completed it.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import pino from 'pino';
import { StageWorker } from '../../../plugin-sdk/worker';
import { alawEncodeSample } from '../../../plugin-sdk/codecs';
import { FrameLane } from '../src/frame-lane';
import { UNKNOWN_JOB, type EncodedFrame, type OpenJob, type TranscodeReply, type TranscodeRequest } from '../src/transcode-protocol';

const quiet = pino({ level: 'silent' });

function openReq(job: number): OpenJob {
  return {
    op: 'open',
    job,
    input: { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 },
    sampleRate: 8000,
    channels: 1,
    bitrate: 24_000,
    maxGapMs: 2000,
  };
}

/** 20 ms of an 800 Hz tone as A-law, frame `i` of a continuous signal */
function alawFrame(i: number): Uint8Array {
  const out = new Uint8Array(160);
  for (let k = 0; k < 160; k++) out[k] = alawEncodeSample(Math.round(8000 * Math.sin((2 * Math.PI * 800 * (i * 160 + k)) / 8000)));
  return out;
}

describe('audio-aac: the packed frame lane', function () {
  this.timeout(30_000);
  let worker: StageWorker<TranscodeRequest, TranscodeReply>;
  beforeEach(() => {
    worker = new StageWorker(path.join(__dirname, '..', 'src', 'transcode-worker.js'), { name: 'aac', log: quiet, workerData: { coder: 'fast' } });
  });
  afterEach(async () => {
    await worker.close();
  });

  it('frames pushed before a close in the same pass are encoded, not refused: the close waits for them', async () => {
    const lane = new FrameLane(worker);
    await lane.control(openReq(1));
    // 1.2 s of frames and the close, all in one pass of the loop
    const pushed = Array.from({ length: 60 }, (_, i) => lane.push(1, Buffer.from(alawFrame(i)), i * 160, 8000));
    const closed = lane.control({ op: 'close', job: 1 });
    const results = await Promise.all(pushed);
    await closed;
    const frames = results.flat();
    // 9,600 samples: 9 frames of 1,024 less the encoder's priming and look-ahead
    assert.ok(frames.length >= 5 && frames.length <= 9, `${frames.length} AAC frames`);
    assert.ok(
      frames.every((f) => f.data.length > 0 && f.data.length <= 768),
      'raw AAC frames, at most 6,144 bits a channel',
    );
    const dts = frames.map((f) => f.dtsTicks);
    assert.deepEqual(
      dts,
      dts.map((_, k) => dts[0] + k * 1024),
      'back to back at the output rate',
    );
    // a push after the close is refused as a job the worker does not hold
    await assert.rejects(lane.push(1, alawFrame(60), 60 * 160, 8000), new RegExp(UNKNOWN_JOB));
  });

  it('one pass, two streams and a stranger: each frame gets its own answer from one message', async () => {
    const lane = new FrameLane(worker);
    await Promise.all([lane.control(openReq(7)), lane.control(openReq(8))]);
    const before = worker.batches;
    const got = new Map<number, EncodedFrame[][]>([
      [7, []],
      [8, []],
    ]);
    const all: Array<Promise<unknown>> = [];
    for (let i = 0; i < 40; i++) {
      for (const job of [7, 8]) all.push(lane.push(job, alawFrame(i), i * 160, 8000).then((f) => got.get(job)!.push(f)));
    }
    const stranger = lane.push(99, alawFrame(0), 0, 8000);
    await assert.rejects(stranger, new RegExp(UNKNOWN_JOB));
    await Promise.all(all);
    assert.equal(worker.batches - before, 1, 'one message for the pass');
    assert.equal(lane.batches, 1);
    // the two streams got the same audio, so the same AAC, each from its own encoder
    const a = got
      .get(7)!
      .flat()
      .map((f) => Buffer.from(f.data).toString('hex'));
    const b = got
      .get(8)!
      .flat()
      .map((f) => Buffer.from(f.data).toString('hex'));
    assert.ok(a.length >= 3, `${a.length} frames`);
    assert.deepEqual(a, b);
    for (const job of [7, 8]) await lane.control({ op: 'close', job });
  });

  it('with a batch interval, frames of several passes of the loop cross together', async () => {
    const lane = new FrameLane(worker, 200);
    await lane.control(openReq(5));
    const before = worker.batches;
    const pushes: Array<Promise<EncodedFrame[]>> = [];
    for (let i = 0; i < 30; i++) {
      pushes.push(lane.push(5, alawFrame(i), i * 160, 8000));
      // the next frame comes in a later pass, as socket reads do
      await new Promise((r) => setImmediate(r));
    }
    const frames = (await Promise.all(pushes)).flat();
    assert.equal(lane.batches, 1, 'one batch for 30 passes within 200 ms');
    assert.equal(worker.batches - before, 1);
    assert.ok(frames.length >= 1, `${frames.length} AAC frames from 0.6 s`);
    await lane.control({ op: 'close', job: 5 });
  });

  it('a worker that dies rejects every frame of the batch in flight with the reason', async () => {
    const lane = new FrameLane(worker);
    await lane.control(openReq(3));
    const pushes = Array.from({ length: 5 }, (_, i) => lane.push(3, alawFrame(i), i * 160, 8000));
    setImmediate(() => void (worker as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate());
    const settled = await Promise.allSettled(pushes);
    for (const s of settled) {
      // the batch either made it before the worker went, or failed with why
      if (s.status === 'rejected') assert.match((s.reason as Error).message, /worker aac died/);
    }
    assert.ok(
      settled.every((s) => s.status === settled[0].status),
      'the batch is answered as one',
    );
  });
});
