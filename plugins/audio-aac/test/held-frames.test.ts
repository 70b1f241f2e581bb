import assert from 'node:assert/strict';
import { audioUnit, type AccessUnit } from '../../../plugin-sdk';
import type { HeldGroup, LaneFrame } from '../src/frame-lane';
import { HeldFrames } from '../src/held-frames';

/** 20 ms G.711A frame k of a stream starting at `start` samples */
function frame(k: number, start = 0, samples = 160): AccessUnit {
  return audioUnit({ codec: 'g711a', dts: (start + k * samples) / 8, timescale: 8000, duration: samples, payload: Buffer.alloc(samples, 0xd5) });
}

/** The group `take(u)` handed over, as frames (copies: the held room is reused by the next frame held). */
function framesOf(g: HeldGroup, u: AccessUnit): LaneFrame[] {
  const out: LaneFrame[] = [];
  let at = 0;
  for (let i = 0; i < g.taken; i++) {
    out.push({ payload: g.bytes.slice(at, at + g.lengths[i]), dtsTicks: g.dts[i], timescale: g.scales[i] });
    at += g.lengths[i];
  }
  out.push(u);
  return out;
}

/** Runs frames through like the stage does; the worker's answers are given by `answer` right after each send. */
function run(h: HeldFrames, frames: AccessUnit[], answer: (group: LaneFrame[]) => number | undefined): LaneFrame[][] {
  const sent: LaneFrame[][] = [];
  for (const u of frames) {
    if (h.add(u)) continue;
    const g = framesOf(h.take(u), u);
    const epoch = h.epoch;
    sent.push(g);
    const due = answer(g);
    if (due !== undefined) h.due(due, 8000, epoch);
  }
  return sent;
}

describe('audio-aac: frames held until one completes an AAC frame', () => {
  it('8 kHz in and out: a group ends at each frame that crosses a 1,024-sample boundary, nothing held past it', () => {
    const h = new HeldFrames(8000);
    // a worker whose encoder started with the first sample: AAC frames complete at 1024, 2048, ...
    const sent = run(
      h,
      Array.from({ length: 64 }, (_, k) => frame(k)),
      (g) => {
        const end = g[g.length - 1].dtsTicks + 160;
        return Math.ceil((end + 1) / 1024) * 1024 - 1;
      },
    );
    // until the first answer, frames go one by one (1); then every group's last frame reaches the next boundary
    assert.equal(sent[0].length, 1);
    for (const g of sent.slice(1)) {
      const last = g[g.length - 1];
      const end = last.dtsTicks + 160;
      const first = g[0].dtsTicks;
      assert.ok(Math.floor((end - 1) / 1024) > Math.floor((first - 1) / 1024) || end % 1024 === 0, `group ${first}..${end} completes no frame`);
      // and no frame before the last in its group completed one
      for (const u of g.slice(0, -1))
        assert.ok(Math.floor((u.dtsTicks + 160) / 1024) === Math.floor(first / 1024), `frame at ${u.dtsTicks} was held past a boundary`);
    }
    assert.equal(sent.flat().length, 64, 'every frame sent once');
    assert.deepEqual(
      sent.flat().map((u) => u.dtsTicks),
      Array.from({ length: 64 }, (_, k) => k * 160),
      'in order',
    );
    // 64 frames = 10,240 samples = 10 boundaries: 1 lone first frame + 10 groups (+1 for the tail still held)
    assert.ok(sent.length <= 12, `${sent.length} sends for 64 frames`);
  });

  it('without answers the due point is stepped locally, one AAC frame at a time', () => {
    const h = new HeldFrames(8000);
    let answered = false;
    const sent = run(
      h,
      Array.from({ length: 40 }, (_, k) => frame(k)),
      () => {
        if (answered) return undefined;
        answered = true;
        return 1023;
      },
    );
    // 6,400 samples: the lone first frame, then one group per boundary (1023, 2047, ... 6143): 7 sends
    assert.equal(sent.length, 7, `${sent.length} sends for 40 frames`);
    const flat = sent.flat().map((u) => u.dtsTicks);
    assert.deepEqual(
      flat,
      Array.from({ length: flat.length }, (_, k) => k * 160),
      'in order, none skipped',
    );
    assert.ok(40 - flat.length < 7, `${40 - flat.length} frames still held: at most an AAC frame's worth`);
  });

  it('a gap, time going back, or a frame of unknown length sends at once and forgets the due point', () => {
    const h = new HeldFrames(8000);
    h.add(frame(0));
    h.take(frame(0));
    const e0 = h.epoch;
    h.due(1023, 8000, e0);
    assert.equal(h.add(frame(1)), true, 'held: follows, completes nothing');
    // a gap of 3 frames: goes now, with the one held
    assert.equal(h.add(frame(5)), false);
    const f5 = frame(5);
    const g = framesOf(h.take(f5), f5);
    assert.deepEqual(
      g.map((u) => u.dtsTicks),
      [160, 800],
    );
    assert.equal(h.add(frame(6)), false, 'due unknown after a break: one by one');
    // an answer about a group from before the break is ignored
    h.take(frame(6));
    h.due(5000, 8000, e0);
    assert.equal(h.add(frame(7)), false);
    h.take(frame(7));
    h.due(2047, 8000, h.epoch);
    assert.equal(h.add(frame(8)), true);
    // time going back (a new publisher not yet shifted): not held behind an old due point
    assert.equal(h.add(frame(0, 0)), false);
    h.take(frame(0, 0));
    assert.equal(h.add(audioUnit({ codec: 'g711a', dts: 0, timescale: 8000, duration: 0, payload: Buffer.alloc(160) })), false, 'unknown length');
  });

  it("keeps copies: the input's memory may be reused as soon as a frame is held, the group sent has its bytes", () => {
    const h = new HeldFrames(8000);
    h.take(frame(0));
    h.due(1023, 8000, h.epoch);
    // one buffer the "stream" keeps overwriting, as reused payload memory would be
    const mem = Buffer.alloc(160);
    const sentBytes: number[][] = [];
    for (let k = 1; k < 14; k++) {
      mem.fill(k);
      const u = audioUnit({ codec: 'g711a', dts: (k * 160) / 8, timescale: 8000, duration: 160, payload: mem });
      if (h.add(u)) continue;
      const g = framesOf(h.take(u), u);
      // what the lane copies now
      sentBytes.push(
        g.map((f) => {
          assert.ok(
            f.payload.every((b) => b === f.payload[0]),
            'a frame is one value',
          );
          return f.payload[0];
        }),
      );
      h.due(Math.ceil((u.dtsTicks + 160 + 1) / 1024) * 1024 - 1, 8000, h.epoch);
    }
    // frames 1..5 held (1,024 at frame 6), then 7..11 held (2,047 at frame 12)
    assert.deepEqual(sentBytes, [
      [1, 2, 3, 4, 5, 6],
      [7, 8, 9, 10, 11, 12],
    ]);
  });
});
