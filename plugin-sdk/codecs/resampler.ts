/**
 * Streaming sample-rate conversion of 16-bit mono PCM (what the decoders give) to Float32 in [-1, 1), mono or
 * up-mixed to interleaved stereo (what an AAC encoder takes): 8 kHz speech to 16, 22.05, 24, 32, 44.1 or 48 kHz, and
 * any other pair of integer rates.
 *
 * A rational polyphase FIR: the rate ratio is reduced to L/M (8000 -> 44100 is 441/80), a Kaiser-windowed sinc is
 * designed once at L times the input rate and split into L phases, and each output sample is one phase's dot
 * product with the last `taps` input samples. The cut-off sits at half the lower of the two rates (4 kHz for 8 kHz
 * speech), its transition band 15 % of that rate wide (3.4 to 4.6 kHz), so the telephone band passes flat and every
 * image of it lands in the stop band (-70 dB or lower with the default 32 taps). The filter state (the last taps - 1
 * input samples and the output phase) carries across calls: cutting the input into frames anywhere gives exactly the
 * samples one call would, so frame joins cannot click.
 *
 * Latency: half the filter, `delaySec` seconds (2 ms at 8 kHz); the first outputs are the filter filling from silence.
 * Equal rates skip the filter (no delay, samples / 32768 as they are).
 */

export const AAC_OUTPUT_RATES: readonly number[] = [8000, 16000, 22050, 24000, 32000, 44100, 48000];

export interface ResamplerOptions {
  inputRate: number;
  outputRate: number;
  /** 1: mono; 2: the mono input on both channels, interleaved. Default 1. */
  channels?: 1 | 2;
  /** filter length in input samples at or below the output rate (more: sharper and slower). Default 32. */
  taps?: number;
}

interface Bank {
  l: number;
  m: number;
  taps: number;
  /**
   * L phases of `taps` coefficients each, oldest input first. Doubles, like the input history: the inner loop then
   * converts nothing (about 20 % faster than Float32Array).
   */
  coeffs: Float64Array;
  delaySec: number;
}

// Many streams resample at the same pair of rates: one filter bank per pair, shared (it is never written after design).
const banks = new Map<string, Bank>();

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** modified Bessel function of the first kind, order 0 (for the Kaiser window) */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 64; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

function designBank(inputRate: number, outputRate: number, baseTaps: number): Bank {
  const key = `${inputRate}:${outputRate}:${baseTaps}`;
  const cached = banks.get(key);
  if (cached) return cached;
  const g = gcd(inputRate, outputRate);
  const l = outputRate / g;
  const m = inputRate / g;
  // going down, the cut-off falls below the input's Nyquist: the same sharpness needs proportionally more input taps
  const taps = Math.ceil((baseTaps * Math.max(inputRate, outputRate)) / outputRate);
  const len = taps * l;
  const low = Math.min(inputRate, outputRate);
  const fc = low / 2 / (l * inputRate); // cycles per sample at the up-sampled rate
  const transition = (0.15 * low) / inputRate; // as a fraction of the input rate
  // Kaiser's estimate of the attenuation this length buys, and the window shape that delivers it
  const atten = Math.min(120, 14.36 * transition * taps + 7.95);
  const beta = atten > 50 ? 0.1102 * (atten - 8.7) : atten >= 21 ? 0.5842 * (atten - 21) ** 0.4 + 0.07886 * (atten - 21) : 0;
  const center = (len - 1) / 2;
  const i0b = besselI0(beta);
  const h = new Float64Array(len);
  for (let j = 0; j < len; j++) {
    const x = j - center;
    const sinc = x === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * x) / (Math.PI * x);
    const r = x / center;
    h[j] = sinc * (besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / i0b);
  }
  const coeffs = new Float64Array(len);
  for (let p = 0; p < l; p++) {
    // each phase passes DC at exactly unity: phases that differed in gain would modulate a steady signal at the
    // phase rate, a faint whine
    let sum = 0;
    for (let k = 0; k < taps; k++) sum += h[p + k * l];
    for (let k = 0; k < taps; k++) coeffs[p * taps + (taps - 1 - k)] = h[p + k * l] / sum;
  }
  const bank: Bank = { l, m, taps, coeffs, delaySec: center / (l * inputRate) };
  banks.set(key, bank);
  return bank;
}

const SCALE = 1 / 32768;
const MAX = 32767 / 32768;

export class Resampler {
  readonly inputRate: number;
  readonly outputRate: number;
  readonly channels: 1 | 2;
  /** how far the output lags the input, seconds */
  readonly delaySec: number;
  private readonly bank: Bank | undefined;
  /** the last taps - 1 input samples, then the current call's input (scaled to [-1, 1)) */
  private work: Float64Array;
  private out: Float32Array;
  /** phase of the next output sample (0..L-1) */
  private phase = 0;
  /** where the next output's newest input sample lies, counted from the end of the input so far (>= 0) */
  private ahead = 0;

  constructor(opts: ResamplerOptions) {
    const { inputRate, outputRate } = opts;
    // number: a JavaScript caller can pass anything, and the check below narrows it
    const channels: number = opts.channels ?? 1;
    const taps = opts.taps ?? 32;
    for (const [name, v] of [
      ['inputRate', inputRate],
      ['outputRate', outputRate],
    ] as const) {
      if (!Number.isInteger(v) || v < 1000 || v > 384000) throw new RangeError(`${name} ${v}: an integer rate 1000..384000 Hz`);
    }
    if (channels !== 1 && channels !== 2) throw new RangeError(`channels ${String(channels)}: 1 or 2`);
    if (!Number.isInteger(taps) || taps < 4 || taps > 256) throw new RangeError(`taps ${taps}: 4..256`);
    this.inputRate = inputRate;
    this.outputRate = outputRate;
    this.channels = channels;
    this.bank = inputRate === outputRate ? undefined : designBank(inputRate, outputRate, taps);
    this.delaySec = this.bank?.delaySec ?? 0;
    const hist = this.bank ? this.bank.taps - 1 : 0;
    this.work = new Float64Array(hist + 1024);
    this.out = new Float32Array(4096);
  }

  /** Output frames (samples per channel) that a call with `inputSamples` samples returns next. */
  outputFrames(inputSamples: number): number {
    const b = this.bank;
    if (!b) return inputSamples;
    // outputs whose newest input sample falls within the new input: ahead, ahead + step, ... < inputSamples
    if (this.ahead >= inputSamples) return 0;
    return Math.floor(((inputSamples - this.ahead - 1) * b.l + (b.l - 1 - this.phase)) / b.m) + 1;
  }

  /**
   * Converts the next stretch of input. Returns a view of an internal buffer that the next call overwrites: copy it
   * (or hand it to an encoder) before calling again.
   */
  process(input: Int16Array): Float32Array {
    const ch = this.channels;
    const frames = this.outputFrames(input.length);
    const need = frames * ch;
    if (this.out.length < need) this.out = new Float32Array(Math.max(need, this.out.length * 2));
    const out = this.out;
    const b = this.bank;
    if (!b) {
      for (let i = 0, o = 0; i < input.length; i++) {
        const v = input[i] * SCALE;
        out[o++] = v;
        if (ch === 2) out[o++] = v;
      }
      return out.subarray(0, need);
    }
    const taps = b.taps;
    const hist = taps - 1;
    const n = input.length;
    if (this.work.length < hist + n) {
      const w = new Float64Array(Math.max(hist + n, this.work.length * 2));
      w.set(this.work.subarray(0, hist));
      this.work = w;
    }
    const work = this.work;
    for (let i = 0; i < n; i++) work[hist + i] = input[i] * SCALE;
    const coeffs = b.coeffs;
    const l = b.l;
    const stepI = Math.floor(b.m / l);
    const stepP = b.m % l;
    let phase = this.phase;
    // index in `work` of the newest input the next output uses
    let at = hist + this.ahead;
    const end = hist + n;
    let o = 0;
    while (at < end) {
      const c0 = phase * taps;
      const x0 = at - hist;
      // four running sums: independent additions the CPU can overlap (a third faster than one chain)
      let a0 = 0;
      let a1 = 0;
      let a2 = 0;
      let a3 = 0;
      let k = 0;
      for (; k + 3 < taps; k += 4) {
        a0 += coeffs[c0 + k] * work[x0 + k];
        a1 += coeffs[c0 + k + 1] * work[x0 + k + 1];
        a2 += coeffs[c0 + k + 2] * work[x0 + k + 2];
        a3 += coeffs[c0 + k + 3] * work[x0 + k + 3];
      }
      for (; k < taps; k++) a0 += coeffs[c0 + k] * work[x0 + k];
      const acc = a0 + a1 + a2 + a3;
      const v = acc >= MAX ? MAX : acc < -1 ? -1 : acc;
      out[o++] = v;
      if (ch === 2) out[o++] = v;
      phase += stepP;
      at += stepI;
      if (phase >= l) {
        phase -= l;
        at++;
      }
    }
    this.phase = phase;
    this.ahead = at - end;
    work.copyWithin(0, n, n + hist);
    return out.subarray(0, o);
  }

  /** Back to silence: the next input starts a new signal. */
  reset(): void {
    this.work.fill(0);
    this.phase = 0;
    this.ahead = 0;
  }
}
