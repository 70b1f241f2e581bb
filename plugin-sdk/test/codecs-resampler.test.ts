/** The streaming resampler: frequency, purity, streaming equivalence, delay and range. */
import assert from 'node:assert/strict';
import { AAC_OUTPUT_RATES, Resampler } from '../codecs';

function tone(hz: number, rate: number, samples: number, amplitude = 0.5): Int16Array {
  return Int16Array.from({ length: samples }, (_, i) => Math.round(amplitude * 32767 * Math.sin((2 * Math.PI * hz * i) / rate)));
}

/** Every output of a resampler for the input cut into frames of `frame` samples, channel `ch` of `channels`. */
function run(r: Resampler, input: Int16Array, frame: number): Float32Array {
  const parts: Float32Array[] = [];
  for (let off = 0; off < input.length; off += frame) parts.push(Float32Array.from(r.process(input.subarray(off, off + frame))));
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function channel(y: Float32Array, channels: number, ch: number): Float32Array {
  return y.filter((_, i) => i % channels === ch);
}

/**
 * Least-squares fit of a*sin + b*cos at `hz` (from sample `from` on): the tone's amplitude and phase, and how much
 * of the signal is anything else (images, aliasing, distortion, noise), in dB below the tone.
 */
function fitTone(y: Float32Array, hz: number, rate: number, from: number): { amplitude: number; phase: number; restDb: number } {
  let ss = 0;
  let cc = 0;
  let sc = 0;
  let ys = 0;
  let yc = 0;
  let yy = 0;
  for (let i = from; i < y.length; i++) {
    const s = Math.sin((2 * Math.PI * hz * i) / rate);
    const c = Math.cos((2 * Math.PI * hz * i) / rate);
    ss += s * s;
    cc += c * c;
    sc += s * c;
    ys += y[i] * s;
    yc += y[i] * c;
    yy += y[i] * y[i];
  }
  const det = ss * cc - sc * sc;
  const a = (ys * cc - yc * sc) / det;
  const b = (yc * ss - ys * sc) / det;
  let rest = 0;
  for (let i = from; i < y.length; i++) {
    const e = y[i] - a * Math.sin((2 * Math.PI * hz * i) / rate) - b * Math.cos((2 * Math.PI * hz * i) / rate);
    rest += e * e;
  }
  return { amplitude: Math.hypot(a, b), phase: Math.atan2(b, a), restDb: 10 * Math.log10(rest / (yy - rest)) };
}

/** amplitude of the component at `hz` (a single-bin DFT over whole periods is close enough here) */
function levelAt(y: Float32Array, hz: number, rate: number, from: number): number {
  let re = 0;
  let im = 0;
  for (let i = from; i < y.length; i++) {
    re += y[i] * Math.cos((2 * Math.PI * hz * i) / rate);
    im += y[i] * Math.sin((2 * Math.PI * hz * i) / rate);
  }
  return (2 * Math.hypot(re, im)) / (y.length - from);
}

const db = (ratio: number): number => 20 * Math.log10(ratio);

describe('resampler', () => {
  for (const rate of AAC_OUTPUT_RATES.filter((r) => r !== 8000)) {
    it(`1 kHz at 8 kHz -> ${rate} Hz: same frequency and level, everything else below -60 dB, no steps at frame joins`, () => {
      for (const channels of [1, 2] as const) {
        const r = new Resampler({ inputRate: 8000, outputRate: rate, channels });
        const y = run(r, tone(1000, 8000, 8000), 160);
        assert.equal(y.length, rate * channels, 'one second in, one second out');
        const left = channel(y, channels, 0);
        if (channels === 2) assert.deepEqual(channel(y, 2, 1), left, 'both channels carry the mono input');
        const settled = Math.ceil(rate * 0.01);
        const fit = fitTone(left, 1000, rate, settled);
        assert.ok(Math.abs(fit.amplitude / 0.5 - 1) < 0.001, `amplitude ${fit.amplitude}`);
        assert.ok(fit.restDb < -60, `rest ${fit.restDb.toFixed(1)} dB`);
        // the first image of 1 kHz sampled at 8 kHz is at 7 kHz, the next at 9 kHz (where the output rate holds them)
        for (const image of [7000, 9000, 15000, 17000].filter((f) => f < rate / 2)) {
          const level = db(levelAt(left, image, rate, settled) / fit.amplitude);
          assert.ok(level < -60, `image at ${image} Hz: ${level.toFixed(1)} dB`);
        }
        // a sine's steepest step between two samples, plus a little: a click at a join would be far larger
        const maxStep = 2 * Math.sin((Math.PI * 1000) / rate) * 0.5 * 1.01;
        for (let i = settled; i < left.length; i++) {
          assert.ok(Math.abs(left[i] - left[i - 1]) <= maxStep, `step of ${left[i] - left[i - 1]} at ${i}`);
        }
      }
    });
  }

  it('the telephone band passes flat: 300 Hz and 3.4 kHz within 0.05 dB at 16 and 44.1 kHz', () => {
    for (const rate of [16000, 44100]) {
      for (const hz of [300, 3400]) {
        const y = run(new Resampler({ inputRate: 8000, outputRate: rate }), tone(hz, 8000, 8000), 320);
        const fit = fitTone(y, hz, rate, Math.ceil(rate * 0.01));
        assert.ok(Math.abs(db(fit.amplitude / 0.5)) < 0.05, `${hz} Hz at ${rate}: ${db(fit.amplitude / 0.5).toFixed(3)} dB`);
      }
    }
  });

  it('streaming: any cut of the input gives the samples one call gives, and outputFrames() predicts each call', () => {
    let seed = 7;
    const input = tone(440, 8000, 4000, 0.8).map((v, i) => v + ((i * 7919) % 200) - 100);
    for (const [from, to, channels] of [
      [8000, 44100, 2],
      [8000, 22050, 1],
      [16000, 8000, 1],
      [8000, 48000, 1],
    ] as const) {
      const whole = new Resampler({ inputRate: from, outputRate: to, channels });
      const expected = Float32Array.from(whole.process(input));
      const r = new Resampler({ inputRate: from, outputRate: to, channels });
      const got: number[] = [];
      for (let off = 0; off < input.length;) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        const n = Math.min(input.length - off, seed % 97); // including empty calls
        const predicted = r.outputFrames(n);
        const out = r.process(input.subarray(off, off + n));
        assert.equal(out.length, predicted * channels, `call of ${n} at ${off}`);
        got.push(...out);
        off += n;
      }
      assert.deepEqual(Float32Array.from(got), expected, `${from} -> ${to}`);
    }
  });

  it('delay says how late the output is (for A/V timing): the phase of a tone agrees within 2 µs', () => {
    for (const rate of [16000, 44100, 48000]) {
      const r = new Resampler({ inputRate: 8000, outputRate: rate });
      // 200 Hz: its 5 ms period is longer than the delay, so the phase is not ambiguous
      const fit = fitTone(run(r, tone(200, 8000, 8000), 320), 200, rate, rate / 50);
      // input sin(2 pi f t), output sin(2 pi f (t - d)) = sin(2 pi f t + phase)
      const lag = -fit.phase / (2 * Math.PI * 200);
      assert.ok(Math.abs(lag - r.delaySec) < 2e-6, `${rate}: measured ${(lag * 1e3).toFixed(4)} ms, delay ${(r.delaySec * 1e3).toFixed(4)} ms`);
      assert.ok(r.delaySec > 0.0015 && r.delaySec < 0.0025, `${r.delaySec}`);
    }
  });

  it('down to 8 kHz: 5 kHz (which would alias to 3 kHz) is removed below -40 dB, 1 kHz passes', () => {
    const r = new Resampler({ inputRate: 16000, outputRate: 8000 });
    const mixed = tone(1000, 16000, 16000, 0.4).map((v, i) => v + Math.round(0.4 * 32767 * Math.sin((2 * Math.PI * 5000 * i) / 16000)));
    const y = run(r, mixed, 320);
    assert.equal(y.length, 8000);
    const pass = levelAt(y, 1000, 8000, 100);
    const alias = levelAt(y, 3000, 8000, 100);
    assert.ok(Math.abs(pass / 0.4 - 1) < 0.01, `1 kHz at ${pass}`);
    assert.ok(db(alias / 0.4) < -40, `alias ${db(alias / 0.4).toFixed(1)} dB`);
  });

  it('full-scale input stays in [-1, 1): the filter overshoot of a square wave is clipped', () => {
    const square = Int16Array.from({ length: 8000 }, (_, i) => ((i >> 4) & 1 ? 32767 : -32768));
    const y = run(new Resampler({ inputRate: 8000, outputRate: 48000, channels: 2 }), square, 160);
    let max = -Infinity;
    let min = Infinity;
    for (const v of y) {
      max = Math.max(max, v);
      min = Math.min(min, v);
    }
    assert.equal(max, 32767 / 32768, 'clipped below 1');
    assert.equal(min, -1);
  });

  it('8 kHz to 8 kHz passes samples through (scaled, no delay), mono or up-mixed', () => {
    const input = Int16Array.of(0, 1, -1, 32767, -32768, 1234);
    const mono = new Resampler({ inputRate: 8000, outputRate: 8000 });
    assert.equal(mono.delaySec, 0);
    assert.deepEqual(
      [...mono.process(input)],
      [...input].map((v) => v / 32768),
    );
    const stereo = new Resampler({ inputRate: 8000, outputRate: 8000, channels: 2 });
    assert.deepEqual(
      [...stereo.process(input)],
      [...input].flatMap((v) => [v / 32768, v / 32768]),
    );
  });

  it('reset() starts a new signal; bad options are refused', () => {
    const input = tone(1000, 8000, 800);
    const r = new Resampler({ inputRate: 8000, outputRate: 22050 });
    const first = Float32Array.from(r.process(input));
    r.process(tone(300, 8000, 123));
    r.reset();
    assert.deepEqual(Float32Array.from(r.process(input)), first);
    assert.throws(() => new Resampler({ inputRate: 8000, outputRate: 22050.5 }), /outputRate/);
    assert.throws(() => new Resampler({ inputRate: 0, outputRate: 16000 }), /inputRate/);
    assert.throws(() => new Resampler({ inputRate: 8000, outputRate: 16000, channels: 3 as 1 }), /channels/);
    assert.throws(() => new Resampler({ inputRate: 8000, outputRate: 16000, taps: 2 }), /taps/);
  });
});
