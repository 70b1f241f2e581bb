/**
 * The audio codecs against ffmpeg, which is the reference here: its decoders on the terminal G.726 fixtures and on
 * G.711 / ADPCM it made itself, its encoders on real speech and on a loud synthetic signal. "Bit-exact" means every
 * sample (decoders) or every byte (encoders) of whole files.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  ALAW_TO_PCM, G711Decoder, G711Encoder, G726Decoder, G726Encoder, ImaAdpcmDecoder, ImaAdpcmEncoder, Pcm16Decoder,
  ULAW_TO_PCM, createDecoder, createEncoder, type AdpcmOptions, type AudioDecoder, type AudioEncoder,
} from '../codecs';
import type { AudioCodec, AudioTrackInfo, G726Packing } from '../media';
import { fixturePath, scratchDir } from '../../test/support/paths';
import { requireTool } from '../../test/support/tools';

function ffmpeg(args: string[], input?: Uint8Array): Buffer {
  const r = spawnSync(requireTool('ffmpeg', 'ffmpeg'), ['-hide_banner', '-loglevel', 'error', '-y', ...args], { input, maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** s16le bytes as samples (copied: ffmpeg's buffer may not be 2-byte aligned) */
function s16(b: Buffer): Int16Array {
  const out = new Int16Array(b.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = b.readInt16LE(2 * i);
  return out;
}

const bytesOf = (pcm: Int16Array): Buffer => Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);

const track = (codec: AudioCodec, extra: Partial<AudioTrackInfo> = {}): AudioTrackInfo => ({ kind: 'audio', codec, sampleRate: 8000, channels: 1, ...extra });

/** Runs a decoder over a stream cut into frames of `frameBytes`, into one array. */
function decodeFrames(dec: AudioDecoder, data: Uint8Array, frameBytes: number): Int16Array {
  let total = 0;
  for (let off = 0; off < data.length; off += frameBytes) total += dec.samplesIn(Math.min(frameBytes, data.length - off));
  const out = new Int16Array(total);
  let o = 0;
  for (let off = 0; off < data.length; off += frameBytes) o += dec.decodeInto(data.subarray(off, off + frameBytes), out, o);
  assert.equal(o, total);
  return out;
}

function encodeFrames(enc: AudioEncoder, pcm: Int16Array, frameSamples: number): Buffer {
  const parts: Buffer[] = [];
  for (let off = 0; off < pcm.length; off += frameSamples) parts.push(enc.encode(pcm.subarray(off, off + frameSamples)));
  return Buffer.concat(parts);
}

/** first index where two sample arrays differ, with the count; equal length asserted */
function assertSamplesEqual(ours: Int16Array, ref: Int16Array, what: string): void {
  assert.equal(ours.length, ref.length, `${what}: sample count`);
  let diff = 0;
  let first = -1;
  for (let i = 0; i < ref.length; i++) {
    if (ours[i] !== ref[i]) {
      if (first < 0) first = i;
      diff++;
    }
  }
  assert.equal(diff, 0, `${what}: ${diff} samples differ, first at ${first} (ours ${ours[first]}, ffmpeg ${ref[first]})`);
}

function assertBytesEqual(ours: Buffer, ref: Buffer, what: string): void {
  assert.equal(ours.length, ref.length, `${what}: byte count`);
  const at = ours.findIndex((v, i) => v !== ref[i]);
  assert.equal(at, -1, `${what}: first differing byte at ${at}`);
}

function snrDb(ref: Int16Array, got: Int16Array): number {
  let s = 0;
  let e = 0;
  for (let i = 0; i < ref.length; i++) {
    s += ref[i] * ref[i];
    e += (ref[i] - got[i]) ** 2;
  }
  return 10 * Math.log10(s / e);
}

function correlation(a: Int16Array, b: Int16Array): number {
  const n = Math.min(a.length, b.length);
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < n; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

/** A loud synthetic signal: a sweep to full scale, clipped square bursts and noise, to reach the codecs' limits. */
function loudSignal(samples: number): Int16Array {
  const out = new Int16Array(samples);
  let seed = 1;
  let phase = 0;
  for (let i = 0; i < samples; i++) {
    seed = (seed * 1664525 + 1013904223) >>> 0;
    const t = i / samples;
    phase += (2 * Math.PI * (100 + 3800 * t)) / 8000;
    let v = 32767 * t * Math.sin(phase);
    if ((i >> 11) % 3 === 1) v = Math.sign(Math.sin(phase / 7)) * 32768;
    v += ((seed >>> 16) - 32768) / 8;
    out[i] = Math.max(-32768, Math.min(32767, Math.round(v)));
  }
  return out;
}

describe('audio codecs against ffmpeg', function () {
  this.timeout(120000);
  let dir: string;
  /** 20 s of real speech: the 40 kbit/s fixture as ffmpeg decodes it */
  let speech: Int16Array;

  before(() => {
    dir = scratchDir('codecs');
    speech = s16(ffmpeg(['-f', 'g726', '-code_size', '5', '-sample_rate', '8000', '-i', fixturePath('g726/in_40.g726'), '-t', '20', '-f', 's16le', '-']));
    assert.equal(speech.length, 160000);
  });

  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('G.711', () => {
    for (const [law, fmt, table] of [['alaw', 'alaw', ALAW_TO_PCM], ['ulaw', 'mulaw', ULAW_TO_PCM]] as const) {
      it(`${law}: all 256 codes decode as ffmpeg's pcm_${fmt}, and ffmpeg-made G.711 of speech too`, () => {
        const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
        const ref = s16(ffmpeg(['-f', fmt, '-ar', '8000', '-ac', '1', '-i', '-', '-f', 's16le', '-'], codes));
        assertSamplesEqual(new G711Decoder(law).decode(codes), ref, `${law} table`);
        assert.deepEqual([...table], [...ref]);
        const coded = ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-c:a', `pcm_${fmt}`, '-f', fmt, '-'], bytesOf(speech));
        const back = s16(ffmpeg(['-f', fmt, '-ar', '8000', '-ac', '1', '-i', '-', '-f', 's16le', '-'], coded));
        assertSamplesEqual(decodeFrames(new G711Decoder(law), coded, 160), back, `${law} speech`);
      });

      it(`${law}: every one of the 65536 input values encodes as ffmpeg's pcm_${fmt} encoder does`, () => {
        const all = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);
        const ref = ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-f', fmt, '-'], bytesOf(all));
        assertBytesEqual(new G711Encoder(law).encode(all), ref, `${law} encode`);
      });
    }

    it('round trip: codes survive decode + encode, speech keeps 35 dB', () => {
      for (const law of ['alaw', 'ulaw'] as const) {
        const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
        const again = new G711Encoder(law).encode(new G711Decoder(law).decode(codes));
        // µ-law has a negative zero (0x7f) that encodes back as the positive one
        const expected = Buffer.from(codes.map((c) => (law === 'ulaw' && c === 0x7f ? 0xff : c)));
        assertBytesEqual(again, expected, law);
        const snr = snrDb(speech, new G711Decoder(law).decode(new G711Encoder(law).encode(speech)));
        assert.ok(snr > 35, `${law} speech SNR ${snr.toFixed(1)} dB`);
      }
    });

    it('decode() reuses one buffer (documented); decodeInto writes at an offset and checks room', () => {
      const d = new G711Decoder('alaw');
      const a = d.decode(Uint8Array.of(0xd5, 0x55));
      assert.deepEqual([...a], [8, -8]);
      const b = d.decode(Uint8Array.of(0x2a, 0xaa));
      assert.equal(a.buffer, b.buffer, 'same buffer for frames of one size');
      assert.deepEqual([...a], [-32256, 32256], 'the earlier view now shows the new frame');
      const out = new Int16Array(5);
      assert.equal(d.decodeInto(Uint8Array.of(0xd5, 0xd5), out, 3), 2);
      assert.deepEqual([...out], [0, 0, 0, 8, 8]);
      assert.throws(() => d.decodeInto(Uint8Array.of(1, 2, 3), out, 3), RangeError);
      assert.throws(() => new G711Encoder('ulaw').encodeInto(Int16Array.of(1, 2), new Uint8Array(1)), RangeError);
    });
  });

  describe('G.726 decoder on the terminal fixtures (glaciall, 81 s of speech at each rate)', () => {
    const raw = (bits: number): Buffer => fs.readFileSync(fixturePath(`g726/in_${bits * 8}.g726`));
    const refs = new Map<string, Int16Array>();
    const ffDecode = (bits: number, fmt: 'g726' | 'g726le'): Int16Array => {
      const key = `${bits}${fmt}`;
      let r = refs.get(key);
      if (!r) {
        r = s16(ffmpeg(['-f', fmt, '-code_size', String(bits), '-sample_rate', '8000', '-i', fixturePath(`g726/in_${bits * 8}.g726`), '-f', 's16le', '-']));
        refs.set(key, r);
      }
      return r;
    };

    for (const bits of [2, 3, 4, 5]) {
      for (const [packing, fmt] of [['left', 'g726'], ['right', 'g726le']] as const) {
        it(`${bits * 8} kbit/s, ${packing} packing: bit-exact with ffmpeg -f ${fmt} (overflow 'wrap'), 40 ms frames`, () => {
          const dec = new G726Decoder({ bitsPerSample: bits, packing, overflow: 'wrap' });
          assertSamplesEqual(decodeFrames(dec, raw(bits), bits * 40), ffDecode(bits, fmt), `${bits * 8}k ${packing}`);
        });
      }
    }

    it('default overflow saturates: equal to ffmpeg except where ffmpeg wrapped a value past 16 bits (it does, in real audio)', () => {
      for (const bits of [2, 3, 4, 5]) {
        const ours = decodeFrames(createDecoder(track('g726', { bitsPerSample: bits, packing: 'left' })) as AudioDecoder, raw(bits), bits * 40);
        const ref = ffDecode(bits, 'g726');
        assert.equal(ours.length, ref.length);
        let wraps = 0;
        for (let i = 0; i < ref.length; i++) {
          if (ours[i] === ref[i]) continue;
          wraps++;
          // ffmpeg's int16_t cast turned a value beyond full scale into one of the opposite sign; ours stayed at full scale
          if (ours[i] === 32767) assert.ok(ref[i] < 0 && ref[i] + 65536 > 32767, `sample ${i}: ${ref[i]} vs ${ours[i]}`);
          else if (ours[i] === -32768) assert.ok(ref[i] > 0 && ref[i] - 65536 < -32768, `sample ${i}: ${ref[i]} vs ${ours[i]}`);
          else assert.fail(`${bits * 8}k sample ${i}: ours ${ours[i]}, ffmpeg ${ref[i]}: not an overflow`);
        }
        assert.ok(wraps > 0 && wraps < 100, `${bits * 8}k: ${wraps} overflows`);
      }
    });

    it('the fixtures are left-packed: the four rates agree with each other only when decoded as left', () => {
      const decodeAs = (bits: number, packing: G726Packing): Int16Array =>
        decodeFrames(new G726Decoder({ bitsPerSample: bits, packing }), raw(bits).subarray(0, bits * 1000 * 20), bits * 40);
      const ref = decodeAs(5, 'left');
      for (const bits of [2, 3, 4]) {
        const left = correlation(decodeAs(bits, 'left'), ref);
        const right = correlation(decodeAs(bits, 'right'), decodeAs(5, 'right'));
        assert.ok(left > 0.75, `${bits * 8}k left ${left.toFixed(2)}`);
        assert.ok(right < 0.5, `${bits * 8}k right ${right.toFixed(2)}`);
      }
    });

    it('after a lost frame the decoder falls back into step by itself, exactly, within 2 s (so no reset is needed)', () => {
      for (const bits of [2, 3, 4, 5]) {
        const data = raw(bits);
        const frame = bits * 40;
        const ref = decodeFrames(new G726Decoder({ bitsPerSample: bits }), data.subarray(0, frame * 100), frame);
        const dec = new G726Decoder({ bitsPerSample: bits });
        const got = new Int16Array(ref.length);
        for (let f = 0; f < 100; f++) {
          if (f === 30) continue; // lost
          dec.decodeInto(data.subarray(f * frame, (f + 1) * frame), got, f * 320);
        }
        const from = 31 * 320;
        let differ = 0;
        let last = -1;
        for (let i = from; i < ref.length; i++) {
          if (got[i] !== ref[i]) {
            differ++;
            last = i;
          }
        }
        assert.ok(differ > 0, 'the loss was felt');
        assert.ok(last - from < 16000, `${bits * 8}k: still out of step ${((last - from) / 8).toFixed(0)} ms after the loss`);
      }
    });

    it('state carries across frames: any framing decodes alike; reset() starts over; leftover bits are dropped', () => {
      const data = raw(3).subarray(0, 6000);
      const dec = new G726Decoder({ bitsPerSample: 3 });
      const whole = decodeFrames(dec, data, data.length);
      dec.reset();
      assertSamplesEqual(decodeFrames(dec, data, 120), whole, '120-byte frames');
      dec.reset();
      assertSamplesEqual(decodeFrames(dec, data, 30), whole, '30-byte frames');
      const fresh = new G726Decoder({ bitsPerSample: 3 });
      assert.notDeepEqual([...fresh.decode(data.subarray(120, 240))], [...whole.subarray(320, 640)], 'a decoder that missed the first frame is not in step');
      // 7 bytes = 56 bits = 18 codewords of 3 bits and 2 bits over
      assert.equal(dec.samplesIn(7), 18);
      assert.equal(dec.decode(data.subarray(0, 7)).length, 18);
      assert.throws(() => new G726Decoder({ bitsPerSample: 6 }), /2\.\.5/);
      assert.throws(() => createDecoder(track('g726', { bitsPerSample: 1 })), RangeError);
    });
  });

  describe('G.726 encoder', () => {
    for (const bits of [2, 3, 4, 5]) {
      for (const [packing, fmt] of [['left', 'g726'], ['right', 'g726le']] as const) {
        it(`${bits * 8} kbit/s ${packing}: bit-exact with ffmpeg -c:a ${fmt} -b:a ${bits * 8}k on speech and on a loud signal`, () => {
          for (const [name, pcm] of [['speech', speech], ['loud', loudSignal(48000)]] as const) {
            const ref = ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-c:a', fmt, '-b:a', `${bits * 8}k`, '-f', fmt, '-'], bytesOf(pcm));
            const enc = new G726Encoder({ bitsPerSample: bits, packing });
            assertBytesEqual(encodeFrames(enc, pcm, 320), ref, `${name} ${bits * 8}k ${packing}`);
          }
        });
      }
    }

    it('round trip through our decoder: SNR rises with the rate; ffmpeg hears our frames as we do', () => {
      const floor: Record<number, number> = { 2: 10, 3: 15, 4: 21, 5: 27 };
      let last = 0;
      for (const bits of [2, 3, 4, 5]) {
        const spec = { codec: 'g726' as const, bitsPerSample: bits, packing: 'right' as const };
        const coded = encodeFrames(createEncoder(spec) as AudioEncoder, speech, 160);
        assert.equal(coded.length, (speech.length * bits) / 8);
        const back = decodeFrames(createDecoder(track('g726', spec)) as AudioDecoder, coded, bits * 20);
        const snr = snrDb(speech, back);
        assert.ok(snr > floor[bits] && snr > last, `${bits * 8}k SNR ${snr.toFixed(1)} dB`);
        last = snr;
        const file = path.join(dir, `rt-${bits}.g726`);
        fs.writeFileSync(file, coded);
        assertSamplesEqual(back, s16(ffmpeg(['-f', 'g726le', '-code_size', String(bits), '-sample_rate', '8000', '-i', file, '-f', 's16le', '-'])), `${bits * 8}k via ffmpeg`);
      }
    });

    it('a frame that ends mid-byte is zero-padded (as ffmpeg pads its last frame)', () => {
      const enc = new G726Encoder({ bitsPerSample: 3 });
      assert.equal(enc.bytesFor(3), 2);
      const f = enc.encode(Int16Array.of(1000, -1000, 1000));
      assert.equal(f.length, 2);
      assert.equal(f[1] & 0x7f, 0, 'the 7 bits after the third codeword are zero');
      const le = new G726Encoder({ bitsPerSample: 5, packing: 'right' }).encode(Int16Array.of(3000));
      assert.equal(le.length, 1);
      assert.equal(le[0] >> 5, 0, 'right packing pads the high bits');
    });
  });

  describe('IMA ADPCM', () => {
    /** ffmpeg's adpcm_ima_wav blocks (mono, 256 bytes) of a signal, and ffmpeg's decoding of them */
    const imaWav = (pcm: Int16Array): { blocks: Buffer[]; ref: Int16Array } => {
      const wav = ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-c:a', 'adpcm_ima_wav', '-block_size', '256', '-f', 'wav', '-'], bytesOf(pcm));
      const at = wav.indexOf('data');
      const data = wav.subarray(at + 8, at + 8 + wav.readUInt32LE(at + 4));
      const blocks: Buffer[] = [];
      for (let off = 0; off + 256 <= data.length; off += 256) blocks.push(data.subarray(off, off + 256));
      assert.equal(blocks.length * 256, data.length);
      return { blocks, ref: s16(ffmpeg(['-i', '-', '-f', 's16le', '-'], wav)) };
    };

    /**
     * ffmpeg's adpcm_ima_ssi (the IMA reference's rounding, high nibble first, one continuous stream from state 0/0):
     * its code bytes and its decoding. Blocks for our layouts are cut from the stream, each header holding the state
     * there: the predictor is the sample ffmpeg decoded last, the step index follows from the codes alone.
     */
    let ssiCodes: Buffer;
    let ssiRef: Int16Array;
    let indexAt: Uint8Array;
    before(() => {
      const file = path.join(dir, 'speech.vag');
      ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-c:a', 'adpcm_ima_ssi', '-f', 'kvag', file], bytesOf(speech));
      const kvag = fs.readFileSync(file);
      assert.equal(kvag.toString('latin1', 0, 4), 'KVAG');
      ssiCodes = kvag.subarray(14);
      ssiRef = s16(ffmpeg(['-i', file, '-f', 's16le', '-']));
      assert.equal(ssiRef.length, ssiCodes.length * 2);
      const steps = [-1, -1, -1, -1, 2, 4, 6, 8];
      indexAt = new Uint8Array(ssiRef.length + 1);
      let index = 0;
      for (let i = 0; i < ssiRef.length; i++) {
        indexAt[i] = index;
        const code = (i & 1) === 0 ? ssiCodes[i >> 1] >> 4 : ssiCodes[i >> 1] & 15;
        index = Math.max(0, Math.min(88, index + steps[code & 7]));
      }
    });

    /** a block of `codeBytes` code bytes from the ssi stream at sample `first`, in a layout */
    const ssiBlock = (first: number, codeBytes: number, o: Required<Pick<AdpcmOptions, 'layout' | 'headerByteOrder'>>): Buffer => {
      const b = Buffer.alloc(4 + codeBytes);
      const pred = first === 0 ? 0 : ssiRef[first - 1];
      if (o.headerByteOrder === 'le') b.writeInt16LE(pred, 0);
      else b.writeInt16BE(pred, 0);
      b[2] = indexAt[first];
      for (let k = 0; k < codeBytes; k++) {
        const v = ssiCodes[first / 2 + k];
        b[4 + k] = o.layout === 'dvi4' ? v : ((v & 15) << 4) | (v >> 4);
      }
      return b;
    };

    for (const layout of ['dvi4', 'ima-wav'] as const) {
      for (const headerByteOrder of ['le', 'be'] as const) {
        it(`${layout}, ${headerByteOrder} header: blocks cut from ffmpeg's adpcm_ima_ssi stream decode to ffmpeg's samples`, () => {
          const dec = new ImaAdpcmDecoder({ layout, headerByteOrder });
          for (let first = 0; first + 320 <= ssiRef.length; first += 320) {
            const got = dec.decode(ssiBlock(first, 160, { layout, headerByteOrder }));
            const want = ssiRef.subarray(first, first + 320);
            if (layout === 'dvi4') assertSamplesEqual(got, want, `block at ${first}`);
            else {
              assert.equal(got[0], first === 0 ? 0 : ssiRef[first - 1], 'the header sample comes first');
              assertSamplesEqual(got.subarray(1), want, `block at ${first}`);
            }
          }
        });
      }
    }

    it("dvi4 encoder: its blocks' codes are ffmpeg's adpcm_ima_ssi encoding, its headers the state ffmpeg's decoder reaches", () => {
      const enc = new ImaAdpcmEncoder();
      for (let first = 0; first + 320 <= speech.length; first += 320) {
        const block = enc.encode(speech.subarray(first, first + 320));
        assert.equal(block.length, 164);
        assertBytesEqual(block, ssiBlock(first, 160, { layout: 'dvi4', headerByteOrder: 'le' }), `block at ${first}`);
      }
    });

    it("ima-wav with 'ffmpeg' rounding: ffmpeg's adpcm_ima_wav blocks decode bit-exactly, and our encoder writes the same blocks", () => {
      for (const pcm of [speech, loudSignal(50500)]) {
        const { blocks, ref } = imaWav(pcm);
        const dec = new ImaAdpcmDecoder({ layout: 'ima-wav', rounding: 'ffmpeg' });
        assertSamplesEqual(decodeFrames(dec, Buffer.concat(blocks), 256), ref, 'adpcm_ima_wav decode');
        const enc = new ImaAdpcmEncoder({ layout: 'ima-wav', rounding: 'ffmpeg' });
        const padded = new Int16Array(blocks.length * 505);
        padded.set(pcm);
        assertBytesEqual(encodeFrames(enc, padded, 505), Buffer.concat(blocks), 'adpcm_ima_wav encode');
      }
    });

    it("'ima' rounding on ffmpeg's adpcm_ima_wav blocks: close (50 dB) but not exact, which is why the option exists", () => {
      const { blocks, ref } = imaWav(speech);
      const ours = decodeFrames(new ImaAdpcmDecoder({ layout: 'ima-wav' }), Buffer.concat(blocks), 256);
      const snr = snrDb(ref, ours);
      assert.ok(snr > 40 && Number.isFinite(snr), `SNR ${snr.toFixed(1)} dB`);
    });

    for (const layout of ['dvi4', 'ima-wav'] as const) {
      it(`${layout}: round trip keeps speech (> 17 dB) and blocks join without a step`, () => {
        const n = layout === 'dvi4' ? 320 : 321;
        const enc = createEncoder({ codec: 'adpcm' }, { adpcm: { layout, headerByteOrder: 'be' } }) as AudioEncoder;
        const dec = createDecoder(track('adpcm'), { adpcm: { layout, headerByteOrder: 'be' } }) as AudioDecoder;
        const count = Math.floor(speech.length / n) * n;
        const back = new Int16Array(count);
        let lastOut = 0;
        for (let off = 0; off < count; off += n) {
          const block = enc.encode(speech.subarray(off, off + n));
          assert.equal(block.length, 4 + 160);
          if (layout === 'dvi4') assert.equal(block.readInt16BE(0), lastOut, 'the header is where the previous block ended');
          else assert.equal(block.readInt16BE(0), speech[off], 'the header is the first sample');
          const pcm = dec.decode(block);
          assert.equal(pcm.length, n);
          back.set(pcm, off);
          lastOut = pcm[n - 1];
        }
        const snr = snrDb(speech.subarray(0, count), back);
        assert.ok(snr > 17, `SNR ${snr.toFixed(1)} dB`);
      });
    }

    it('frames as the ingest publishes them: 2 samples per byte after the header; bad headers and sizes', () => {
      const dec = createDecoder(track('adpcm', { sampleRate: 16000, bitsPerSample: 4 })) as ImaAdpcmDecoder;
      assert.equal(dec.sampleRate, 16000);
      assert.equal(dec.layout, 'dvi4');
      assert.equal(dec.samplesIn(164), 320);
      assert.equal(dec.decode(Uint8Array.of(1, 0, 0, 0)).length, 0, 'header only');
      assert.equal(dec.decode(Uint8Array.of(1, 0)).length, 0, 'shorter than a header');
      // predictor 0x0100 (le), index 200 read as 88 (step 32767): code 7 (high nibble first) overshoots full scale and
      // saturates, code 0 adds step/8 and steps the index down
      const out = dec.decode(Uint8Array.of(0x00, 0x01, 200, 0, 0x70));
      assert.deepEqual([...out], [32767, 32767]);
      assert.equal(dec.badIndexBlocks, 1);
      assert.deepEqual(dec.state, { predictor: 32767, index: 87 });
      const neg = dec.decode(Uint8Array.of(0x00, 0x80, 0, 0, 0x08));
      assert.deepEqual([...neg], [-32768, -32768], 'header 0x8000 is -32768; code 8 steps down and saturates');
      const enc = new ImaAdpcmEncoder();
      assert.throws(() => enc.encode(new Int16Array(321)), /even number/);
      assert.throws(() => new ImaAdpcmEncoder({ layout: 'ima-wav' }).encode(new Int16Array(320)), /odd number/);
      assert.throws(() => new ImaAdpcmDecoder({ layout: 'wav' as never }), /layout/);
      assert.throws(() => new ImaAdpcmDecoder({ headerByteOrder: 'middle' as never }), /byte order/);
    });
  });

  describe('factory', () => {
    it('decoders for what terminals send, undefined for what is decoded elsewhere or not at all', () => {
      assert.ok(createDecoder(track('g711a')) instanceof G711Decoder);
      assert.equal((createDecoder(track('g711u')) as G711Decoder).law, 'ulaw');
      const g = createDecoder(track('g726', { bitsPerSample: 3, packing: 'right' })) as G726Decoder;
      assert.deepEqual([g.bitsPerSample, g.packing, g.sampleRate], [3, 'right', 8000]);
      const g721 = createDecoder(track('g721')) as G726Decoder;
      assert.deepEqual([g721.bitsPerSample, g721.packing], [4, 'left']);
      assert.deepEqual((createDecoder(track('g726')) as G726Decoder).bitsPerSample, 4);
      assert.equal((createDecoder(track('adpcm'), { adpcm: { layout: 'ima-wav' } }) as ImaAdpcmDecoder).layout, 'ima-wav');
      assert.ok(createDecoder(track('pcm')) instanceof Pcm16Decoder);
      assert.equal(createDecoder(track('pcm', { bitsPerSample: 8 })), undefined);
      assert.equal(createEncoder({ codec: 'pcm', bitsPerSample: 8 }), undefined);
      assert.throws(() => createEncoder({ codec: 'g726', bitsPerSample: 6 }), /2\.\.5/);
      for (const codec of ['aac', 'mp3', 'g722', 'g723', 'g729', 'unknown'] as const) {
        assert.equal(createDecoder(track(codec)), undefined, codec);
        assert.equal(createEncoder({ codec }), undefined, codec);
      }
    });

    it('encoders from the terminal track, each one heard back by its decoder', () => {
      const tone = Int16Array.from({ length: 320 }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 8000)));
      const cases: [AudioTrackInfo, number][] = [
        [track('g711a'), 320], [track('g711u'), 320], [track('pcm'), 640],
        [track('g726', { bitsPerSample: 2, packing: 'left' }), 80], [track('g726', { bitsPerSample: 5, packing: 'right' }), 200],
        [track('g721'), 160], [track('adpcm'), 164],
      ];
      for (const [t, bytes] of cases) {
        const enc = createEncoder(t) as AudioEncoder;
        const dec = createDecoder(t) as AudioDecoder;
        assert.equal(enc.codec, dec.codec);
        assert.equal(enc.bytesFor(320), bytes, t.codec);
        const first = enc.encode(tone);
        const second = enc.encode(tone); // the adaptive codecs have settled by the second frame
        assert.deepEqual([first.length, second.length], [bytes, bytes]);
        dec.decode(first);
        const out = new Int16Array(2 + 320);
        assert.equal(dec.decodeInto(second, out, 2), 320);
        const snr = snrDb(tone, out.subarray(2));
        assert.ok(snr > 8, `${t.codec}/${t.bitsPerSample ?? ''}: SNR ${snr.toFixed(1)} dB`);
      }
    });
  });
});
