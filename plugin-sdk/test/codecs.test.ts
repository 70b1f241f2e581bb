/**
 * The audio codecs on their own (no ffmpeg): G.711 and G.726 round trips, the G.726 decoder on the terminal
 * fixtures (packing, loss, framing), IMA ADPCM blocks, the factory. The speech is the 40 kbit/s G.726 fixture as our
 * decoder gives it, which codecs-ffmpeg.test.ts (full tier) shows is ffmpeg's decoding, sample for sample; that
 * file holds every comparison with ffmpeg.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import {
  G711Decoder,
  G711Encoder,
  G726Decoder,
  G726Encoder,
  ImaAdpcmDecoder,
  ImaAdpcmEncoder,
  Pcm16Decoder,
  createDecoder,
  createEncoder,
  type AudioDecoder,
  type AudioEncoder,
} from '../codecs';
import type { AudioTrackInfo, G726Packing } from '../media';
import { fixturePath } from '../../test/support/paths';
import { assertBytesEqual, assertSamplesEqual, correlation, decodeFrames, encodeFrames, snrDb, track } from './codec-helpers';

describe('audio codecs', function () {
  this.timeout(120000);
  /** 20 s of real speech: the 40 kbit/s fixture decoded (overflow 'wrap', as ffmpeg does) */
  let speech: Int16Array;

  before(() => {
    const g726 = fs.readFileSync(fixturePath('g726/in_40.g726')).subarray(0, 20 * 5000);
    speech = decodeFrames(new G726Decoder({ bitsPerSample: 5, packing: 'left', overflow: 'wrap' }), g726, 200);
    assert.equal(speech.length, 160000);
  });

  describe('G.711', () => {
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
    it('round trip through our decoder: SNR rises with the rate', () => {
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
        [track('g711a'), 320],
        [track('g711u'), 320],
        [track('pcm'), 640],
        [track('g726', { bitsPerSample: 2, packing: 'left' }), 80],
        [track('g726', { bitsPerSample: 5, packing: 'right' }), 200],
        [track('g721'), 160],
        [track('adpcm'), 164],
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
