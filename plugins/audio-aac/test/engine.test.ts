import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import pino from 'pino';
import { flvFileHeader, serializeTag } from '../../../plugin-sdk/formats';
import { adts, ffmpegDecode, frequency } from '../../../test/support/audio';
import { requireTool } from '../../../test/support/tools';
import { AacEncoderLostError, AacEncoderPool, AacEngine, AAC_SAMPLE_RATES, type AacEncoder, type AacEncoderInfo, type AacFrame } from '../src/engine';

const quiet = pino({ level: 'silent' });
const MONO16 = { sampleRate: 16000, channels: 1, bitrate: 24000 } as const;

/** `seconds` of a sine per channel (freqs[c] Hz), interleaved, starting at phase 0 on sample 0 */
function tone(rate: number, freqs: number[], seconds: number, amp = 0.5): Float32Array {
  const ch = freqs.length;
  const n = Math.round(rate * seconds);
  const out = new Float32Array(n * ch);
  for (let i = 0; i < n; i++) for (let c = 0; c < ch; c++) out[i * ch + c] = amp * Math.sin((2 * Math.PI * freqs[c]! * i) / rate);
  return out;
}

/** An FLV file with the AAC sequence header carrying `asc` and one tag per frame (ms timestamps from pts). */
function flv(asc: Buffer, frames: readonly AacFrame[], rate: number): Buffer {
  const parts = [flvFileHeader(false, true), serializeTag({ type: 8, timestamp: 0, keyframe: true, body: Buffer.concat([Buffer.from([0xaf, 0x00]), asc]) })];
  for (const f of frames) {
    parts.push(
      serializeTag({
        type: 8,
        timestamp: Math.max(0, Math.round(((f.pts + 1024) * 1000) / rate)),
        keyframe: true,
        body: Buffer.concat([Buffer.from([0xaf, 0x01]), f.data]),
      }),
    );
  }
  return Buffer.concat(parts);
}

interface Probed {
  codec_name: string;
  profile: string;
  sample_rate: string;
  channels: number;
}

function probe(file: Buffer, format: string): Probed {
  const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-f', format, '-i', 'pipe:0', '-show_streams', '-of', 'json'], {
    input: file,
    maxBuffer: 1 << 26,
  });
  assert.equal(r.status, 0, r.stderr.toString());
  return (JSON.parse(r.stdout.toString()) as { streams: Probed[] }).streams[0]!;
}

function channel(x: Float32Array, ch: number, c: number): Float32Array {
  const out = new Float32Array(x.length / ch);
  for (let i = 0; i < out.length; i++) out[i] = x[i * ch + c]!;
  return out;
}

function rms(x: Float32Array, from: number, to: number): number {
  let s = 0;
  for (let i = from; i < to; i++) s += x[i]! * x[i]!;
  return Math.sqrt(s / (to - from));
}

/** first and last sample louder than `level` */
function extent(x: Float32Array, level: number): [number, number] {
  let a = -1;
  let b = -1;
  for (let i = 0; i < x.length; i++) {
    if (Math.abs(x[i]!) > level) {
      if (a < 0) a = i;
      b = i;
    }
  }
  return [a, b];
}

/** feeds pcm in chunks of the given sizes (per channel, cycled) and flushes at close: every frame */
async function encodeAll(engine: AacEngine, info: AacEncoderInfo, pcm: Float32Array, chunks: number[]): Promise<AacFrame[]> {
  const out: AacFrame[] = [];
  const ch = info.channels;
  for (let i = 0, k = 0; i < pcm.length / ch; k++) {
    const n = Math.min(chunks[k % chunks.length]!, pcm.length / ch - i);
    out.push(...(await engine.encode(info.id, pcm.slice(i * ch, (i + n) * ch))));
    i += n;
  }
  out.push(...(await engine.close(info.id, { flush: true })));
  return out;
}

const bytesOf = (frames: readonly AacFrame[]) => Buffer.concat(frames.map((f) => f.data));

describe('audio-aac engine: AAC-LC encoders in a worker thread', function () {
  this.timeout(60_000);
  let engine: AacEngine;

  before(() => {
    engine = new AacEngine({ log: quiet, testHooks: true });
  });
  after(async () => {
    await engine.stop();
  });

  /**
   * The checks every tone case makes: ffprobe sees AAC-LC at the rate and channels asked for, each channel
   * decodes to its tone at its frequency (1 %) and level (0.5 dB), and the tone sits where the pts say: it starts
   * after the priming and lasts as long as the input.
   */
  function checkTone(frames: AacFrame[], info: AacEncoderInfo, decoded: Float32Array, freqs: number[], seconds: number, p: Probed): void {
    const rate = info.sampleRate;
    const ch = info.channels;
    const n = Math.round(rate * seconds);
    assert.equal(p.codec_name, 'aac');
    assert.equal(p.profile, 'LC');
    assert.equal(Number(p.sample_rate), rate);
    assert.equal(p.channels, ch);
    // frames: consecutive from -priming, enough to cover every input sample, not one more
    frames.forEach((f, k) => assert.equal(f.pts, k * 1024 - info.primingSamples, `frame ${k}'s pts`));
    const lastPts = frames[frames.length - 1]!.pts;
    assert.ok(lastPts < n && lastPts + 1024 >= n, `the last frame (pts ${lastPts}) holds the last input sample (${n - 1})`);
    assert.equal(decoded.length / ch, frames.length * 1024, 'ffmpeg decoded every frame');
    for (let c = 0; c < ch; c++) {
      const x = channel(decoded, ch, c);
      const from = info.primingSamples + Math.round(rate * 0.1);
      const to = info.primingSamples + n - Math.round(rate * 0.1);
      const f = frequency(x, rate, from, to);
      assert.ok(Math.abs(f - freqs[c]!) / freqs[c]! < 0.01, `channel ${c}: ${f.toFixed(2)} Hz, ${freqs[c]} Hz sent`);
      const db = 20 * Math.log10(rms(x, from, to) / (0.5 / Math.SQRT2));
      assert.ok(Math.abs(db) < 0.5, `channel ${c}: level ${db.toFixed(2)} dB off`);
      const [on, off] = extent(x, 0.1);
      assert.ok(Math.abs(on - info.primingSamples) <= 32, `channel ${c}: the tone starts at decoded sample ${on}, after the ${info.primingSamples} of priming`);
      assert.ok(Math.abs(off - (info.primingSamples + n)) <= 32, `channel ${c}: the tone ends at decoded sample ${off}, ${n} after it started`);
    }
  }

  it('16 kHz mono: a 1 kHz tone in ADTS decodes to 1 kHz at its level and length; the ASC is 2 bytes of AAC-LC', async () => {
    const info = await engine.open({ sampleRate: 16000, channels: 1, bitrate: 24000 });
    assert.deepEqual([...info.asc], [0x14, 0x08], 'AAC-LC (2), 16 kHz (index 8), mono');
    assert.equal(info.frameSamples, 1024);
    assert.equal(info.primingSamples, 1024);
    assert.equal(info.coder, 'fast');
    const seconds = 1.3; // not a whole number of frames: the flush pads the last one
    const frames = await encodeAll(engine, info, tone(16000, [1000], seconds), [320]);
    const file = adts(
      info.asc,
      frames.map((f) => f.data),
    );
    checkTone(frames, info, ffmpegDecode(file, 'aac'), [1000], seconds, probe(file, 'aac'));
    // 24 kbit/s asked: the frames' bytes say so (within 15 %: the rate control works per frame)
    const kbps = (bytesOf(frames).length * 8) / ((frames.length * 1024) / 16000) / 1000;
    assert.ok(kbps > 20 && kbps < 28, `${kbps.toFixed(1)} kbit/s`);
  });

  it('the default, 8 kHz mono 24 kbit/s, in FLV with the 2-byte ASC: ffmpeg takes it and decodes the tone', async () => {
    const info = await engine.open();
    assert.deepEqual([info.sampleRate, info.channels, info.bitrate], [8000, 1, 24000]);
    assert.deepEqual([...info.asc], [0x15, 0x88], 'AAC-LC, 8 kHz (index 11), mono');
    const frames = await encodeAll(engine, info, tone(8000, [1000], 1), [160, 240]);
    const file = flv(info.asc, frames, 8000);
    checkTone(frames, info, ffmpegDecode(file, 'flv'), [1000], 1, probe(file, 'flv'));
  });

  it('44.1 kHz stereo: each channel keeps its own tone (1 kHz left, 1.5 kHz right)', async () => {
    const info = await engine.open({ sampleRate: 44100, channels: 2, bitrate: 96000 });
    assert.deepEqual([...info.asc], [0x12, 0x10], 'AAC-LC, 44.1 kHz (index 4), 2 channels');
    const frames = await encodeAll(engine, info, tone(44100, [1000, 1500], 1), [441, 1000]);
    const file = adts(
      info.asc,
      frames.map((f) => f.data),
    );
    checkTone(frames, info, ffmpegDecode(file, 'aac'), [1000, 1500], 1, probe(file, 'aac'));
  });

  it('two encoders interleaved in one worker give, byte for byte, what each gives alone in one call', async () => {
    const a = tone(16000, [1000], 2);
    const b = tone(16000, [440], 2, 0.3);
    // alone: the whole signal in one call
    const aloneA = await encodeAll(engine, await engine.open(MONO16), a, [a.length]);
    const aloneB = await encodeAll(engine, await engine.open(MONO16), b, [b.length]);
    // together: both open at once, calls alternating in odd sizes, several calls in one batch
    const ia = await engine.open(MONO16);
    const ib = await engine.open(MONO16);
    const outA: AacFrame[] = [];
    const outB: AacFrame[] = [];
    const sizes = [333, 1000, 77, 2048, 5];
    const calls: Array<Promise<void>> = [];
    for (let i = 0, j = 0, k = 0; i < a.length || j < b.length; k++) {
      const na = Math.min(sizes[k % sizes.length]!, a.length - i);
      const nb = Math.min(sizes[(k + 2) % sizes.length]!, b.length - j);
      const pa = engine.encode(ia.id, a.slice(i, i + na));
      const pb = engine.encode(ib.id, b.slice(j, j + nb));
      calls.push(
        pa.then((f) => void outA.push(...f)),
        pb.then((f) => void outB.push(...f)),
      );
      i += na;
      j += nb;
      if (k % 3 === 2) await Promise.all(calls.splice(0)); // several turns, several batches
    }
    await Promise.all(calls);
    outA.push(...(await engine.close(ia.id, { flush: true })));
    outB.push(...(await engine.close(ib.id, { flush: true })));
    assert.ok(aloneA.length > 30);
    assert.deepEqual(
      outA.map((f) => f.pts),
      aloneA.map((f) => f.pts),
    );
    assert.ok(bytesOf(outA).equals(bytesOf(aloneA)), 'encoder A: the same bytes');
    assert.ok(bytesOf(outB).equals(bytesOf(aloneB)), 'encoder B: the same bytes');
    assert.ok(!bytesOf(outA).equals(bytesOf(outB)), 'and the two are not the same stream');
    const s = await engine.stats();
    assert.ok(s.batches < s.encodeCalls, `encode calls travel in batches (${s.encodeCalls} calls in ${s.batches} requests)`);
  });

  it('the PCM buffer is moved to the worker, a view into a larger buffer is copied', async () => {
    const info = await engine.open();
    const own = new Float32Array(2048);
    const big = new Float32Array(4096);
    const view = big.subarray(1024, 3072);
    const [r1, r2] = await Promise.all([engine.encode(info.id, own), engine.encode(info.id, view)]);
    assert.equal(own.buffer.byteLength, 0, 'transferred: detached here');
    assert.equal(big.buffer.byteLength, 4096 * 4, 'the larger buffer is left alone');
    assert.equal(r1.length + r2.length, 3, '4096 samples: 4 frames sent, 3 out');
    await engine.close(info.id);
  });

  it('NaN, infinities and out-of-range samples are clamped: the encoder keeps working', async () => {
    const info = await engine.open(MONO16);
    const bad = tone(16000, [1000], 1);
    // one NaN or huge sample unclamped and ffmpeg fails every frame after it
    [NaN, Infinity, -Infinity, 1e30, -7].forEach((v, k) => {
      bad[1000 + 997 * k] = v;
    });
    const frames = await encodeAll(engine, info, bad, [320]);
    assert.equal(frames.length, Math.ceil(16000 / 1024) + 1);
    const x = ffmpegDecode(
      adts(
        info.asc,
        frames.map((f) => f.data),
      ),
      'aac',
    );
    const f = frequency(x, 16000, 2000, 15000);
    assert.ok(Math.abs(f - 1000) < 10, `still the tone: ${f.toFixed(1)} Hz`);
  });

  it("the fast coder is really selected: its output differs from twoloop's and both decode to the tone", async () => {
    const two = new AacEngine({ log: quiet, coder: 'twoloop' });
    try {
      const pcm = tone(16000, [1000], 1);
      const i2 = await two.open(MONO16);
      assert.equal(i2.coder, 'twoloop');
      const fTwo = await encodeAll(two, i2, pcm, [pcm.length]);
      const iFast = await engine.open(MONO16);
      const fFast = await encodeAll(engine, iFast, pcm, [pcm.length]);
      assert.equal(fTwo.length, fFast.length);
      assert.ok(!bytesOf(fTwo).equals(bytesOf(fFast)), 'different quantiser searches, different bytes');
      for (const fr of [fTwo, fFast]) {
        const x = ffmpegDecode(
          adts(
            i2.asc,
            fr.map((f) => f.data),
          ),
          'aac',
        );
        assert.ok(Math.abs(frequency(x, 16000, 2000, 15000) - 1000) < 10);
      }
    } finally {
      await two.stop();
    }
  });

  it('close frees: encoders counted back to zero; 10,000 open/encode/close cycles reuse the memory, not one byte more', async () => {
    const e = new AacEngine({ log: quiet });
    try {
      const pcm = tone(16000, [1000], 0.2);
      const round = async (n: number) => {
        const list = await Promise.all(Array.from({ length: n }, () => e.open()));
        await Promise.all(list.map((l) => e.encode(l.id, pcm.slice()))); // input buffers and encoder state touched
        let s = await e.stats();
        assert.equal(s.encoders, n);
        await Promise.all(list.map((l) => e.close(l.id)));
        s = await e.stats();
        assert.equal(s.encoders, 0);
        assert.equal(s.open, 0);
        return s;
      };
      const first = await round(50);
      for (let r = 0; r < 200; r++) await round(50);
      const after = await round(50);
      assert.equal(after.wasmBytes, first.wasmBytes, "the freed contexts' memory was reused");
      assert.equal(after.instancesCreated, 1, 'in the one instance');
      // 100 at once need a second instance of 64; when they close, the spare is dropped and only one is kept
      const big = await round(100);
      assert.equal(big.instancesCreated, 2);
      assert.equal(big.instances, 1);
      assert.equal(big.instancesDropped, 1);
    } finally {
      await e.stop();
    }
  });

  it('instances: a new encoder goes to the fullest instance with room; an instance left empty is dropped', async () => {
    const pool = new AacEncoderPool({ perInstance: 3, keepLast: false });
    const cfg = { sampleRate: 16000, channels: 1, bitrate: 24000 } as const;
    const e: AacEncoder[] = [];
    for (let i = 0; i < 7; i++) e.push(await pool.open(cfg)); // A: 0 1 2, B: 3 4 5, C: 6
    assert.equal(pool.stats().instances, 3);
    assert.equal(e[2]!.inst, e[0]!.inst);
    assert.notEqual(e[3]!.inst, e[0]!.inst);
    e[0]!.close(); // A 2, B 3 (full), C 1
    const f = await pool.open(cfg);
    assert.equal(f.inst, e[1]!.inst, 'into A, the fullest with room, not C');
    e[6]!.close();
    assert.equal(pool.stats().instances, 2, 'C, left empty, is dropped');
    for (const x of [...e.slice(1, 6), f]) x.close();
    const s = pool.stats();
    assert.equal(s.encoders, 0);
    assert.equal(s.instances, 0, 'keepLast false: even the last goes');
    assert.equal(s.instancesDropped, s.instancesCreated);
    assert.throws(() => e[0]!.encode(new Float32Array(10)), /closed/);
  });

  it("a pool's encoder called directly (as a worker of one's own would): reset starts a new signal, priming and all", async () => {
    const pool = new AacEncoderPool();
    const pcm = tone(16000, [1000], 0.5);
    const fresh = await pool.open(MONO16);
    const want = Buffer.concat([...fresh.encode(pcm), ...fresh.flush()]);
    const e = await pool.open(MONO16);
    e.encode(tone(16000, [300], 0.3, 0.9)); // another signal, part of a frame left buffered
    assert.ok(e.buffered > 0);
    e.reset();
    assert.equal(e.buffered, 0);
    assert.equal(e.samplesIn, 0);
    const got = Buffer.concat([...e.encode(pcm), ...e.flush()]);
    assert.ok(got.equals(want), 'after reset: the bytes of a fresh encoder');
    assert.deepEqual([...e.extradata], [0x14, 0x08, 0x56, 0xe5, 0x00], "ffmpeg's own config: LC plus the no-SBR sync extension");
    fresh.close();
    e.close();
    assert.equal(pool.stats().encoders, 0);
  });

  it('the worker restarts after a crash: old encoders are reported lost, new ones encode', async () => {
    const info = await engine.open(MONO16);
    assert.ok((await engine.encode(info.id, tone(16000, [1000], 0.2))).length > 0);
    const before = engine.restarts;
    await assert.rejects(engine.crashForTest(), /died/);
    assert.equal(engine.restarts, before + 1);
    await assert.rejects(engine.encode(info.id, new Float32Array(1024)), (err: Error) => err instanceof AacEncoderLostError && /lost/.test(err.message));
    const again = await engine.open(MONO16);
    assert.notEqual(again.id, info.id);
    const frames = await encodeAll(engine, again, tone(16000, [1000], 0.5), [320]);
    const x = ffmpegDecode(
      adts(
        again.asc,
        frames.map((f) => f.data),
      ),
      'aac',
    );
    assert.ok(Math.abs(frequency(x, 16000, 2000, 8000) - 1000) < 10, "the new worker's encoder makes the tone");
    assert.equal((await engine.stats()).encoders, 0, 'the new worker holds nothing of the old one');
  });

  it('refuses what AAC cannot do, and ids it does not know', async () => {
    await assert.rejects(engine.open({ sampleRate: 11000 }), /sample rate 11000/);
    await assert.rejects(engine.open({ channels: 3 as 1 }), /channels/);
    await assert.rejects(engine.open({ sampleRate: 8000, bitrate: 100_000 }), /bitrate/);
    await assert.rejects(engine.encode(12345, new Float32Array(10)), /AAC encoder 12345 is not open/);
    const st = await engine.open({ channels: 2, sampleRate: 16000, bitrate: 48000 });
    await assert.rejects(engine.encode(st.id, new Float32Array(3)), /whole number of 2-channel/);
    // a failed call leaves the encoder usable
    assert.deepEqual(await engine.encode(st.id, new Float32Array(4)), []);
    await engine.close(st.id);
    await assert.rejects(engine.encode(st.id, new Float32Array(4)), /is not open/, 'closed');
    assert.deepEqual(await engine.close(st.id), [], 'closing twice is harmless');
    assert.ok(AAC_SAMPLE_RATES.includes(16000));
  });
});
