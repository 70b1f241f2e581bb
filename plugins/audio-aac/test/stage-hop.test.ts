/**
 * The AAC stage's hop on the main thread, with a stand-in worker that answers at once (test/support/
 * instant-transcoder.ts): what it makes per frame and per group (promises counted with async_hooks, which sees every
 * one made), the AAC units it makes of the answers (order, time, memory), and when they come out.
 */
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import pino from 'pino';
import { audioStageStats, audioUnit, type AccessUnit, type MediaReader, type StageInstance } from '../../../plugin-sdk';
import { InstantTranscoder, startOnBareInput } from '../../../test/support/instant-transcoder';
import { aacStage } from '../src/aac-stage';

const G711A = { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 } as const;

function stageOf(worker: InstantTranscoder, frameBatchMs = 0) {
  return aacStage({
    worker,
    defaults: { sampleRate: 8000, channels: 1 },
    bitrate: () => 24_000,
    maxGapMs: 2000,
    maxInFlight: 64,
    frameBatchMs,
    log: pino({ level: 'silent' }),
    hooks: { transcoders: () => undefined, framesOut: () => undefined, leftOut: () => undefined, failed: () => undefined },
  });
}

interface Stream {
  reader: MediaReader;
  instance: StageInstance;
  out: AccessUnit[];
  /** where its audio starts, in samples */
  start: number;
}

/** `n` streams on one stage definition (one lane), each starting at its own time, their tracks given */
function streams(worker: InstantTranscoder, n: number, frameBatchMs = 0): Stream[] {
  const def = stageOf(worker, frameBatchMs);
  return Array.from({ length: n }, (_, s) => {
    const out: AccessUnit[] = [];
    const { reader, instance } = startOnBareInput(def, `s${s}`, { setTrack: () => undefined, push: (u) => out.push(u) });
    reader.tracks!([G711A]);
    return { reader, instance, out, start: 1600 * s };
  });
}

/** frame k of a stream: 20 ms of G.711A, its bytes saying k, received at k ms */
function frame(st: Stream, k: number): AccessUnit {
  return audioUnit({ codec: 'g711a', dts: (st.start + k * 160) / 8, timescale: 8000, duration: 160, payload: Buffer.alloc(160, k), receivedAt: k });
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('audio-aac: the stage hop on the main thread', () => {
  it('one promise a group on each side of the hop (the lane, the stage reader), none for a frame held back', async () => {
    const worker = new InstantTranscoder();
    const all = streams(worker, 20);
    let promises = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === 'PROMISE') promises++;
      },
    });
    let groups = 0;
    let frames = 0;
    let made = 0;
    try {
      for (let k = 0; k < 200; k++) {
        const before = all.reduce((n, st) => n + audioStageStats(st.instance)!.inFlight, 0);
        // promises made while the frames are written (none is settled in this synchronous run)
        hook.enable();
        for (const st of all) st.reader.write(frame(st, k), undefined);
        hook.disable();
        frames += all.length;
        // each group sent is one frame in flight until its answer
        groups += all.reduce((n, st) => n + audioStageStats(st.instance)!.inFlight, 0) - before;
        made += promises;
        promises = 0;
        await turn();
      }
    } finally {
      hook.disable();
    }
    // 200 frames of 160 samples make 31 AAC frames a stream: about a group per AAC frame, five frames held in six
    assert.ok(groups > 20 * 31 && groups < 20 * 40, `${groups} groups for ${frames} frames`);
    assert.equal(made, 2 * groups, `${made} promises for ${groups} groups`);
    for (const st of all) st.instance.stop();
  });

  it("AAC units in order, at the worker's times, each a view of its batch's reply; across streams, batches and intervals", async () => {
    for (const frameBatchMs of [0, 15]) {
      const worker = new InstantTranscoder();
      worker.keepReplies = true;
      const all = streams(worker, 5, frameBatchMs);
      for (let k = 0; k < 100; k++) {
        for (const st of all) st.reader.write(frame(st, k), undefined);
        // a socket read every few ms: with an interval, a batch gathers several passes
        await new Promise((r) => setTimeout(r, k % 3 === 0 ? 2 : 0));
      }
      await new Promise((r) => setTimeout(r, 2 * frameBatchMs + 10));
      const replies = worker.replies;
      if (frameBatchMs > 0) assert.ok(worker.batches < 60, `${worker.batches} batches with ${frameBatchMs} ms: passes gathered`);
      for (const [s, st] of all.entries()) {
        // 16,000 samples: 15 AAC frames, the first 1,024 samples before the stream's first
        assert.equal(st.out.length, 15, `stream ${s}, ${frameBatchMs} ms`);
        st.out.forEach((u, i) => {
          assert.deepEqual([u.codec, u.timescale, u.duration, u.dtsTicks], ['aac', 8000, 1024, st.start + (i - 1) * 1024], `stream ${s}, frame ${i}`);
          // the frame that completed it is the one whose end first reached its end (received at k ms for frame k)
          assert.equal(u.receivedAt, Math.ceil(((i + 1) * 1024) / 160) - 1, `stream ${s}, frame ${i}: received with its last input`);
          const r = replies.find((x) => x.bytes.buffer === u.payload.buffer);
          assert.ok(r, `stream ${s}, frame ${i}: a view of a reply's buffer, not a copy`);
          const at = u.payload.byteOffset - r.bytes.byteOffset;
          assert.ok(Buffer.from(r.bytes.subarray(at, at + u.payload.length)).equals(u.payload));
          assert.ok(u.payload.every((b, j) => b === ((at + j) * 7) % 256));
        });
        st.instance.stop();
      }
    }
  });

  it("a group's AAC goes out in the turn its answer comes", async () => {
    const worker = new InstantTranscoder();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // answers held until released, then settled all at once, as a worker's message would be
    const call = worker.call.bind(worker);
    worker.call = (req) => (req.op === 'push-batch' ? gate.then(() => call(req)) : call(req));
    const [st] = streams(worker, 1);
    for (let k = 0; k < 40; k++) {
      st.reader.write(frame(st, k), undefined);
      await turn();
    }
    assert.equal(st.out.length, 0, 'nothing before the answers');
    release();
    await turn();
    // 6,400 samples: 6 AAC frames
    assert.equal(st.out.length, 6, 'every answered group out after one turn');
    st.instance.stop();
  });
});
