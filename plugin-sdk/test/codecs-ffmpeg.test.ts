/**
 * The audio codecs against ffmpeg, which is the reference here (full tier): its decoders on the terminal G.726
 * fixtures and on G.711 / ADPCM it made itself, its encoders on real speech and on a loud synthetic signal.
 * "Bit-exact" means every sample (decoders) or every byte (encoders) of whole files. codecs.test.ts has the codecs'
 * behaviour that needs no reference.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  ALAW_TO_PCM,
  G711Decoder,
  G711Encoder,
  G726Decoder,
  G726Encoder,
  ImaAdpcmDecoder,
  ImaAdpcmEncoder,
  ULAW_TO_PCM,
  createDecoder,
  createEncoder,
  type AdpcmOptions,
  type AudioDecoder,
  type AudioEncoder,
} from '../codecs';
import { fixturePath, scratchDir } from '../../test/support/paths';
import { requireTool } from '../../test/support/tools';
import { assertBytesEqual, assertSamplesEqual, decodeFrames, encodeFrames, snrDb, track } from './codec-helpers';

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
    for (const [law, fmt, table] of [
      ['alaw', 'alaw', ALAW_TO_PCM],
      ['ulaw', 'mulaw', ULAW_TO_PCM],
    ] as const) {
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
      for (const [packing, fmt] of [
        ['left', 'g726'],
        ['right', 'g726le'],
      ] as const) {
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
  });

  describe('G.726 encoder', () => {
    for (const bits of [2, 3, 4, 5]) {
      for (const [packing, fmt] of [
        ['left', 'g726'],
        ['right', 'g726le'],
      ] as const) {
        it(`${bits * 8} kbit/s ${packing}: bit-exact with ffmpeg -c:a ${fmt} -b:a ${bits * 8}k on speech and on a loud signal`, () => {
          for (const [name, pcm] of [
            ['speech', speech],
            ['loud', loudSignal(48000)],
          ] as const) {
            const ref = ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-c:a', fmt, '-b:a', `${bits * 8}k`, '-f', fmt, '-'], bytesOf(pcm));
            const enc = new G726Encoder({ bitsPerSample: bits, packing });
            assertBytesEqual(encodeFrames(enc, pcm, 320), ref, `${name} ${bits * 8}k ${packing}`);
          }
        });
      }
    }

    it('ffmpeg hears our frames as our decoder does', () => {
      for (const bits of [2, 3, 4, 5]) {
        const spec = { codec: 'g726' as const, bitsPerSample: bits, packing: 'right' as const };
        const coded = encodeFrames(createEncoder(spec) as AudioEncoder, speech, 160);
        const back = decodeFrames(createDecoder(track('g726', spec)) as AudioDecoder, coded, bits * 20);
        const file = path.join(dir, `rt-${bits}.g726`);
        fs.writeFileSync(file, coded);
        assertSamplesEqual(
          back,
          s16(ffmpeg(['-f', 'g726le', '-code_size', String(bits), '-sample_rate', '8000', '-i', file, '-f', 's16le', '-'])),
          `${bits * 8}k via ffmpeg`,
        );
      }
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
  });
});
