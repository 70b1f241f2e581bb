/**
 * Micro-benchmark: CPU ms per second of audio for every decoder, encoder and resampler setting, on a speech-like
 * signal in 40 ms frames (what terminals send). `npm run bench -- codecs [seconds]`.
 */
import { performance } from 'node:perf_hooks';
import { createDecoder, createEncoder, Resampler, type AudioDecoder, type AudioEncoder, type EncoderSpec } from '../../plugin-sdk/codecs';

const FRAME = 320;

/** a few harmonics under a slow envelope, with a little noise: enough to keep the adaptive codecs' state moving */
function speechLike(samples: number): Int16Array {
  const out = new Int16Array(samples);
  let seed = 12345;
  for (let i = 0; i < samples; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const t = i / 8000;
    const env = 0.5 + 0.5 * Math.sin(2 * Math.PI * 3 * t);
    const f0 = 140 + 30 * Math.sin(2 * Math.PI * 0.7 * t);
    let v = 0;
    for (let h = 1; h <= 12; h++) v += Math.sin(2 * Math.PI * f0 * h * t) / h;
    out[i] = Math.round(env * 6000 * v + ((seed >>> 16) - 32768) / 64);
  }
  return out;
}

function msPerSecond(seconds: number, run: () => void): number {
  run(); // warm-up: let the JIT settle
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    run();
    best = Math.min(best, performance.now() - t0);
  }
  return best / seconds;
}

function main(args: string[]): void {
  const seconds = Number(args[0] ?? 20);
  const pcm = speechLike(8000 * seconds);
  const rows: [string, number][] = [];
  const specs: [string, EncoderSpec][] = [
    ['g711a', { codec: 'g711a' }],
    ['g711u', { codec: 'g711u' }],
    ...[2, 3, 4, 5].flatMap((b) =>
      (['left', 'right'] as const).map((p): [string, EncoderSpec] => [`g726-${b * 8}k ${p}`, { codec: 'g726', bitsPerSample: b, packing: p }]),
    ),
    ['adpcm dvi4', { codec: 'adpcm' }],
  ];
  for (const [name, spec] of specs) {
    const enc = createEncoder(spec) as AudioEncoder;
    const frames: Buffer[] = [];
    for (let o = 0; o + FRAME <= pcm.length; o += FRAME) frames.push(enc.encode(pcm.subarray(o, o + FRAME)));
    rows.push([
      `encode ${name}`,
      msPerSecond(seconds, () => {
        enc.reset();
        for (let o = 0; o + FRAME <= pcm.length; o += FRAME) enc.encode(pcm.subarray(o, o + FRAME));
      }),
    ]);
    const dec = createDecoder({
      kind: 'audio',
      codec: spec.codec,
      sampleRate: 8000,
      channels: 1,
      bitsPerSample: spec.bitsPerSample,
      packing: spec.packing,
    }) as AudioDecoder;
    rows.push([
      `decode ${name}`,
      msPerSecond(seconds, () => {
        dec.reset();
        for (const f of frames) dec.decode(f);
      }),
    ]);
    const into = new Int16Array(FRAME * 2);
    rows.push([
      `decodeInto ${name}`,
      msPerSecond(seconds, () => {
        dec.reset();
        for (const f of frames) dec.decodeInto(f, into, 0);
      }),
    ]);
  }
  for (const rate of [8000, 16000, 22050, 24000, 32000, 44100, 48000]) {
    for (const channels of [1, 2] as const) {
      const rs = new Resampler({ inputRate: 8000, outputRate: rate, channels });
      rows.push([
        `resample 8000->${rate} x${channels}`,
        msPerSecond(seconds, () => {
          rs.reset();
          for (let o = 0; o + FRAME <= pcm.length; o += FRAME) rs.process(pcm.subarray(o, o + FRAME));
        }),
      ]);
    }
  }
  for (const [name, ms] of rows) console.log(`${name.padEnd(34)} ${ms.toFixed(3)} ms/s`);
}

/** The bench dispatcher's entry (test/bench/run.ts). */
export async function run(args: string[]): Promise<void> {
  main(args);
}
