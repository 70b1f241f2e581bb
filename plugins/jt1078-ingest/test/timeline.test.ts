import assert from 'node:assert/strict';
import { Jt1078Timeline } from '../src/timeline';

function strictlyIncreasing(xs: number[]): boolean {
  return xs.every((x, i) => i === 0 || x > xs[i - 1]);
}

describe('jt1078 timeline', () => {
  it('starts at 0 from the first packet, one origin for audio and video', () => {
    const tl = new Jt1078Timeline();
    tl.start(1_600_000_000_000);
    assert.equal(tl.map('audio', 1_600_000_000_000), 0);
    assert.equal(tl.map('video', 1_600_000_000_040), 40);
    assert.equal(tl.map('audio', 1_600_000_000_020), 20);
    assert.equal(tl.map('audio', 1_600_000_000_040), 40);
  });

  it('stays strictly increasing per track across a forward jump, a backward jump and jitter', () => {
    const tl = new Jt1078Timeline();
    const video: number[] = [];
    const audio: number[] = [];
    let dev = 607_775_195_621;
    tl.start(dev);
    const step = (ms: number, n: number): void => {
      for (let i = 0; i < n; i++) {
        video.push(tl.map('video', dev));
        audio.push(tl.map('audio', dev + 5));
        dev += ms;
      }
    };
    step(40, 50); // 0 .. 1960
    dev += 3_600_000; // clock set forward one hour
    step(40, 50);
    dev -= 86_400_000; // and back a day
    step(40, 50);
    assert.ok(strictlyIncreasing(video), 'video increasing');
    assert.ok(strictlyIncreasing(audio), 'audio increasing');
    assert.equal(tl.stats.rebases, 2);
    // after each jump the track continues one measured frame interval (40) after the latest output
    assert.equal(video[50] - Math.max(video[49], audio[49]), 40);
    assert.equal(video[100] - Math.max(video[99], audio[99]), 40);
    // no gap wider than one interval anywhere: players never wait
    for (let i = 1; i < video.length; i++) assert.ok(video[i] - video[i - 1] <= 45, `video step at ${i}`);
    // audio and video stay together after the jumps (same device time -> 5 ms apart)
    assert.equal(audio[120] - video[120], 5);
  });

  it('clamps small backward steps instead of treating them as jumps', () => {
    const tl = new Jt1078Timeline();
    tl.start(1000);
    const out = [1000, 1040, 1037, 1080, 1079, 1120].map((t) => tl.map('video', t));
    assert.deepEqual(out, [0, 40, 41, 80, 81, 120]);
    assert.equal(tl.stats.rebases, 0);
    assert.equal(tl.stats.clamped, 2);
  });

  it('does not take a track that resumes after a long silence for a clock jump', () => {
    const tl = new Jt1078Timeline();
    tl.start(0);
    tl.map('audio', 0);
    for (let t = 0; t <= 30_000; t += 40) tl.map('video', t);
    assert.equal(tl.map('audio', 30_000), 30_000);
    assert.equal(tl.stats.rebases, 0);
  });

  it('treats timestamps near 2^40 and beyond 2^32 exactly', () => {
    const tl = new Jt1078Timeline();
    tl.start(0x0100000abb6f);
    assert.equal(tl.map('video', 0x0100000abb6f + 33), 33);
  });
});
