/**
 * Audio normalisation at ingest: one frame per unit, no vendor framing, exact time at the sample rate, the codec's
 * parameters in the track. Inputs are the real captures and G.726 files of shared/fixtures, re-packed where no
 * capture has the case (HiSilicon headers, G.726 and ADPCM in a stream), and AAC/ADPCM made by ffmpeg's encoders.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fixturePath, scratchDir } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import type { AudioTrackInfo } from '../../../plugin-sdk';
import type { Jt1078Packet } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { Jt1078Packer } from '../src/packer';
import type { StreamAssemblerOptions } from '../src/stream-assembler';
import { G726RateEstimator, addHisiliconHeader, g726BitsFromFrameLength, hasHisiliconHeader, stripHisiliconHeader } from '../src/audio';
import { assemble, capturePackets, prng } from './helpers';

const GOJT = 'jt1078/gojt808-d1-h264-g711a-2013.bin';

function ffmpeg(args: string[]): Buffer {
  const bin = requireTool('ffmpeg', 'ffmpeg');
  const r = spawnSync(bin, ['-hide_banner', '-loglevel', 'error', '-y', ...args], { maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

interface AudioFrameIn {
  pt: number;
  /** device ms */
  ts: number;
  payload: Buffer;
}

/** Audio frames as a terminal would push them (JT/T 1078 packets, parsed back), through the assembler. */
function pushAudio(frames: AudioFrameIn[], opts?: StreamAssemblerOptions) {
  const packer = new Jt1078Packer({ layout: '2013', sim: '13800138000', channel: 1 });
  const packets: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => packets.push(p));
  for (const f of frames) for (const b of packer.packFrame({ dataType: 3, pt: f.pt, timestamp: f.ts, payload: f.payload })) parser.push(b);
  parser.end();
  return assemble(packets, opts);
}

/** ADTS frames of an AAC stream, split by their own length fields. */
function adtsFrames(aac: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off < aac.length;) {
    assert.ok(aac[off] === 0xff && (aac[off + 1] & 0xf0) === 0xf0, `ADTS sync at ${off}`);
    const len = ((aac[off + 3] & 3) << 11) | (aac[off + 4] << 3) | (aac[off + 5] >> 5);
    out.push(aac.subarray(off, off + len));
    off += len;
  }
  return out;
}

/** An ADTS header for a raw frame, built from an AudioSpecificConfig (how a muxer would frame the bus's units again). */
function adtsFor(asc: Buffer, raw: Buffer): Buffer {
  const objectType = asc[0] >> 3;
  const sfi = ((asc[0] & 7) << 1) | (asc[1] >> 7);
  const channels = (asc[1] >> 3) & 15;
  const len = raw.length + 7;
  const h = Buffer.from([
    0xff, 0xf1, ((objectType - 1) << 6) | (sfi << 2) | (channels >> 2), ((channels & 3) << 6) | (len >> 11),
    (len >> 3) & 0xff, ((len & 7) << 5) | 0x1f, 0xfc,
  ]);
  return Buffer.concat([h, raw]);
}

const payloadOf = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + seed) & 0xff));

function audioTracks(tracks: ReadonlyArray<{ kind: string }>): AudioTrackInfo[] {
  return tracks.filter((t): t is AudioTrackInfo => t.kind === 'audio');
}

function correlation(a: Int16Array, b: Int16Array): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

describe('jt1078 audio normalisation', function () {
  this.timeout(60000);
  let dir: string;
  before(() => {
    dir = scratchDir('jt1078-audio');
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('HiSilicon header', () => {
    it('is recognised only with its exact length, added and removed symmetrically', () => {
      const body = Buffer.alloc(160, 0xd5);
      const framed = addHisiliconHeader(body);
      assert.deepEqual([...framed.subarray(0, 4)], [0x00, 0x01, 0x50, 0x00]);
      assert.ok(hasHisiliconHeader(framed));
      assert.ok(stripHisiliconHeader(framed).equals(body));
      // 0x0102 words: the 4th byte is the length's high byte
      assert.deepEqual([...addHisiliconHeader(Buffer.alloc(516)).subarray(0, 4)], [0x00, 0x01, 0x02, 0x01]);
      const lookalike = Buffer.from([0, 1, 0x50, 0, ...Buffer.alloc(158)]);
      assert.equal(hasHisiliconHeader(lookalike), false);
      assert.throws(() => addHisiliconHeader(Buffer.alloc(161)), /even number of bytes/);
    });
  });

  describe('G.711 (the gojt808 capture)', () => {
    const packets = capturePackets(GOJT);
    const audioBodies = packets.filter((p) => p.dataType === 3).map((p) => p.body);

    it('with a HiSilicon header on every frame: the header goes, the frames and their time stay, the framing is reported', () => {
      const plain = assemble(packets).out;
      const framed = packets.map((p) => (p.dataType === 3 ? { ...p, body: addHisiliconHeader(p.body) } : p));
      const { out, asm } = assemble(framed);
      const audio = out.audio();
      assert.equal(audio.length, 214);
      for (let i = 0; i < audio.length; i++) assert.ok(audio[i].payload.equals(audioBodies[i]), `frame ${i}`);
      assert.ok(audio.every((u, i) => u.duration === 160 && u.dtsTicks === 160 * i && u.timescale === 8000));
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 }]);
      assert.equal(asm.stats.reassembly.hisiliconHeaders, 214);
      // what a link needs to send audio back the same way, reported once
      assert.deepEqual(out.framings, [{ pt: 6, codec: 'g711a', hisilicon: true }]);
      assert.deepEqual(plain.framings, [{ pt: 6, codec: 'g711a', hisilicon: false }]);
      // video is untouched by any of it
      assert.deepEqual(out.video().map((u) => u.dtsTicks), plain.video().map((u) => u.dtsTicks));
    });

    it('G.711U (PT 7) is announced as such', () => {
      const mu = packets.map((p) => (p.dataType === 3 ? { ...p, pt: 7 } : p));
      const { out } = assemble(mu);
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'g711u', sampleRate: 8000, channels: 1 }]);
      assert.ok(out.audio().every((u) => u.codec === 'g711u' && u.duration === 160));
    });

    it('places frames edge to edge through ±1 ms of timestamp jitter, but keeps a real gap', () => {
      const frames: AudioFrameIn[] = audioBodies.slice(0, 40).map((payload, i) => ({
        pt: 6, payload, ts: 5000 + 20 * i + (i % 3 === 1 ? 1 : i % 3 === 2 ? -1 : 0) + (i >= 30 ? 100 : 0),
      }));
      const { out } = pushAudio(frames);
      const ticks = out.audio().map((u) => u.dtsTicks);
      assert.deepEqual(ticks.slice(0, 30), Array.from({ length: 30 }, (_, i) => 160 * i));
      // 100 ms (800 samples) of silence from the terminal stays a gap of that length
      assert.equal(ticks[30], 160 * 30 + 800);
      assert.deepEqual(ticks.slice(30), Array.from({ length: 10 }, (_, i) => 160 * (30 + i) + 800));
    });
  });

  it('a codec the payload says nothing about (LPC, PT 14) passes as sent, duration 0, timed by the terminal alone', () => {
    const frames = [0, 1, 5, 20].map((ts, i) => ({ pt: 14, ts, payload: payloadOf(14, i) }));
    const { out } = pushAudio(frames);
    assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'unknown', sampleRate: 8000, channels: 1 }]);
    assert.deepEqual(out.audio().map((u) => [u.dtsTicks, u.duration]), [[0, 0], [8, 0], [40, 0], [160, 0]]);
    assert.ok(out.audio().every((u, i) => u.payload.equals(frames[i].payload)));
  });

  describe('G.726 (the glaciall files at 16/24/32/40 kbit/s)', () => {
    for (const [rate, bits] of [[16, 2], [24, 3], [32, 4], [40, 5]] as const) {
      it(`${rate} kbit/s: bits per sample ${bits} from packet size and timing, announced once with the packing`, () => {
        const raw = fs.readFileSync(fixturePath(`g726/in_${rate}.g726`));
        const len = rate * 5; // 40 ms: rate kbit/s * 40 ms / 8
        const frames: AudioFrameIn[] = [];
        for (let i = 0; i < 20; i++) {
          const payload = raw.subarray(i * len, (i + 1) * len);
          // a header must not count as audio (it would make every rate look faster)
          frames.push({ pt: 8, ts: 1000 + 40 * i, payload: i % 2 === 1 ? addHisiliconHeader(payload) : payload });
        }
        const { out, asm } = pushAudio(frames);
        assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: bits, packing: 'left' }]);
        // two frames pass before two measurements agree; they are left out rather than sent without a rate
        const audio = out.audio();
        assert.equal(audio.length, 18);
        assert.equal(asm.stats.audio.waitingForParameters, 2);
        assert.equal(asm.stats.audio.g726BitsFrom, 'timing');
        for (let k = 0; k < 18; k++) {
          const i = k + 2;
          assert.ok(audio[k].payload.equals(raw.subarray(i * len, (i + 1) * len)), `frame ${i}: the codewords as in the file`);
          assert.equal(audio[k].duration, 320);
          assert.equal(audio[k].dtsTicks, 320 * i);
          assert.equal(audio[k].timescale, 8000);
        }
      });
    }

    it('the default packing (left, ffmpeg g726) is the one these terminal files decode as', () => {
      // the same speech at 24 and 40 kbit/s: decoded with the right packing the two agree, with the wrong one not
      const decode = (rate: number, fmt: 'g726' | 'g726le'): Int16Array => {
        const file = path.join(dir, `in_${rate}.g726`);
        fs.writeFileSync(file, fs.readFileSync(fixturePath(`g726/in_${rate}.g726`)).subarray(0, rate * 1000 / 8 * 10));
        const pcm = ffmpeg(['-f', fmt, '-code_size', String(rate / 8), '-sample_rate', '8000', '-i', file, '-f', 's16le', '-']);
        return new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1);
      };
      const ref = decode(40, 'g726');
      const left = correlation(decode(24, 'g726'), ref);
      const right = correlation(decode(24, 'g726le'), ref);
      assert.ok(left > 0.6, `left ${left}`);
      assert.ok(right < 0.3, `right ${right}`);
    });

    it('site overrides: bits for a terminal that labels the rate wrong, and the packing', () => {
      const raw = fs.readFileSync(fixturePath('g726/in_32.g726'));
      const frames = Array.from({ length: 6 }, (_, i) => ({ pt: 8, ts: 40 * i, payload: raw.subarray(i * 160, (i + 1) * 160) }));
      const { out, asm } = pushAudio(frames, { audio: { g726Bits: 3, g726Packing: 'right' } });
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 3, packing: 'right' }]);
      // nothing waits: the site said
      assert.equal(out.audio().length, 6);
      assert.equal(out.audio()[0].duration, Math.floor((160 * 8) / 3));
      assert.equal(asm.stats.audio.g726BitsFrom, 'config');
      assert.throws(() => pushAudio(frames, { audio: { g726Bits: 6 } }), /g726Bits must be 2..5/);
    });

    it('G.721 (PT 1) is G.726 at 32 kbit/s from its first frame', () => {
      const raw = fs.readFileSync(fixturePath('g726/in_32.g726'));
      const frames = Array.from({ length: 4 }, (_, i) => ({ pt: 1, ts: 40 * i, payload: raw.subarray(i * 160, (i + 1) * 160) }));
      const { out, asm } = pushAudio(frames);
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 4, packing: 'left' }]);
      assert.equal(out.audio().length, 4);
      assert.equal(asm.stats.audio.g726BitsFrom, 'payload-type');
      assert.deepEqual(out.framings, [{ pt: 1, codec: 'g726', hisilicon: false }]);
    });

    it('timestamps that say nothing: after 25 frames the frame length decides (320-sample frames)', () => {
      const raw = fs.readFileSync(fixturePath('g726/in_16.g726'));
      // 80-byte frames (40 ms at 16 kbit/s) stamped 2 s apart: no pair measures anything
      const frames = Array.from({ length: 30 }, (_, i) => ({ pt: 8, ts: 2000 * i, payload: raw.subarray(i * 80, (i + 1) * 80) }));
      const { out, asm } = pushAudio(frames);
      assert.equal(asm.stats.audio.waitingForParameters, 24);
      assert.equal(asm.stats.audio.g726BitsFrom, 'frame-length');
      assert.equal(audioTracks(out.tracks)[0].bitsPerSample, 2);
      const audio = out.audio();
      assert.equal(audio.length, 6);
      // the terminal's clock still places them
      assert.deepEqual(audio.map((u) => [u.dtsTicks, u.duration]), Array.from({ length: 6 }, (_, k) => [16000 * (24 + k), 320]));
    });

    it('frames stamped consistently too close for their length run ahead of the clock by 20 ms at most', () => {
      const raw = fs.readFileSync(fixturePath('g726/in_32.g726'));
      // 160 bytes at 32 kbit/s are 40 ms, stamped 38 ms apart: tiling would put audio ever further ahead of video
      const frames = Array.from({ length: 60 }, (_, i) => ({ pt: 1, ts: 38 * i, payload: raw.subarray(i * 160, (i + 1) * 160) }));
      const audio = pushAudio(frames).out.audio();
      assert.equal(audio.length, 60);
      let tiled = 0;
      for (let i = 0; i < 60; i++) {
        const lead = audio[i].dtsTicks - 38 * 8 * i;
        assert.ok(lead >= 0 && lead <= 160, `frame ${i} ${lead} samples ahead`);
        if (i > 0 && audio[i].dtsTicks === audio[i - 1].dtsTicks + 320) tiled++;
      }
      assert.ok(tiled >= 50, `${tiled} tiled`);
    });

    it('the estimator: agreeing measurements, the most frequent one, the frame-length guess', () => {
      const e = new G726RateEstimator();
      assert.equal(e.observe(0, 120), undefined);
      assert.equal(e.observe(40, 120), undefined); // 3 bytes/ms once
      assert.equal(e.observe(80, 120), 3); // twice
      assert.equal(e.source, 'timing');
      // alternating measurements never agree twice in a row: the majority wins at 25 frames
      const j = new G726RateEstimator();
      let r: number | undefined;
      for (let i = 0, ts = 0; i < 25; i++) {
        r = j.observe(ts, 160);
        ts += i % 3 === 2 ? 32 : 40; // 160/40 = 4, 160/32 = 5
      }
      assert.equal(r, 4);
      assert.deepEqual([g726BitsFromFrameLength(80), g726BitsFromFrameLength(120), g726BitsFromFrameLength(60), g726BitsFromFrameLength(7)], [2, 3, 3, 4]);
    });
  });

  describe('IMA ADPCM (ffmpeg adpcm_ima_wav blocks)', () => {
    let blocks: Buffer[];
    before(() => {
      const wav = ffmpeg(['-f', 'lavfi', '-i', 'sine=frequency=500:sample_rate=8000:duration=2', '-c:a', 'adpcm_ima_wav', '-block_size', '256', '-f', 'wav', '-']);
      const at = wav.indexOf('data');
      const data = wav.subarray(at + 8, at + 8 + wav.readUInt32LE(at + 4));
      blocks = [];
      for (let off = 0; off + 256 <= data.length; off += 256) blocks.push(data.subarray(off, off + 256));
      assert.ok(blocks.length >= 20);
    });

    it('HiSilicon header removed, the block\'s own state header kept, 4 bits per sample, two samples per code byte', () => {
      const frames = blocks.map((b, i) => ({ pt: 26, ts: 63 * i, payload: addHisiliconHeader(b) }));
      const { out, asm } = pushAudio(frames);
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'adpcm', sampleRate: 8000, channels: 1, bitsPerSample: 4 }]);
      const audio = out.audio();
      assert.equal(audio.length, blocks.length);
      for (let i = 0; i < blocks.length; i++) {
        assert.ok(audio[i].payload.equals(blocks[i]), `block ${i}`);
        assert.ok(audio[i].payload[2] <= 88, 'starts with the state header (step index <= 88)');
        assert.equal(audio[i].duration, 504);
      }
      assert.equal(asm.stats.reassembly.hisiliconHeaders, blocks.length);
      assert.deepEqual(out.framings, [{ pt: 26, codec: 'adpcm', hisilicon: true }]);
    });

    it('DVI4 at 16 kHz (PT 13) is ADPCM at 16 kHz; a frame no longer than its state header is refused', () => {
      const frames = [
        { pt: 13, ts: 0, payload: blocks[0] },
        { pt: 13, ts: 32, payload: blocks[1].subarray(0, 4) },
        { pt: 13, ts: 64, payload: blocks[2] },
      ];
      const { out, asm } = pushAudio(frames);
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'adpcm', sampleRate: 16000, channels: 1, bitsPerSample: 4 }]);
      assert.deepEqual(out.audio().map((u) => [u.timescale, u.dtsTicks, u.duration]), [[16000, 0, 504], [16000, 1024, 504]]);
      assert.equal(asm.stats.audio.malformed, 1);
    });
  });

  describe('AAC (ffmpeg aac encoder, ADTS)', () => {
    const encode = (rate: number, channels: number, seconds: number): Buffer =>
      ffmpeg(['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=${rate}:duration=${seconds}`, '-ac', String(channels), '-c:a', 'aac', '-b:a', '48k', '-f', 'adts', '-']);
    const extradata = (aac: Buffer): string => {
      const file = path.join(dir, `asc-${aac.length}.aac`);
      fs.writeFileSync(file, aac);
      const m4a = file.replace(/\.aac$/, '.m4a');
      ffmpeg(['-i', file, '-c', 'copy', m4a]);
      const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-show_streams', '-show_data', m4a], { encoding: 'utf8' });
      const m = /extradata=\n0+: ([0-9a-f ]+?)\s{2}/.exec(r.stdout);
      assert.ok(m, r.stdout);
      return m[1].replace(/ /g, '');
    };

    it('three ADTS frames per packet become three raw units 1024 samples apart, with the AudioSpecificConfig in the track', () => {
      const aac = encode(16000, 1, 3);
      const adts = adtsFrames(aac);
      assert.ok(adts.length > 40);
      const frames: AudioFrameIn[] = [];
      // 1024 samples at 16 kHz = 64 ms; a packet of three = 192 ms
      for (let i = 0; i < adts.length; i += 3) frames.push({ pt: 19, ts: 90_000 + 64 * i, payload: Buffer.concat(adts.slice(i, i + 3)) });
      const { out, asm } = pushAudio(frames);
      const tracks = audioTracks(out.tracks);
      assert.equal(tracks.length, 1);
      assert.equal(tracks[0].codec, 'aac');
      assert.equal(tracks[0].sampleRate, 16000);
      assert.equal(tracks[0].channels, 1);
      assert.equal(tracks[0].frameSamples, 1024);
      assert.equal(tracks[0].config?.toString('hex'), extradata(aac), 'the same AudioSpecificConfig ffmpeg puts in an MP4');
      const audio = out.audio();
      assert.equal(audio.length, adts.length);
      for (let i = 0; i < adts.length; i++) {
        assert.ok(audio[i].payload.equals(adts[i].subarray(7)), `frame ${i} without its ADTS header`);
        assert.equal(audio[i].dtsTicks, 1024 * i);
        assert.equal(audio[i].duration, 1024);
        assert.equal(audio[i].dts, 64 * i);
      }
      assert.equal(asm.stats.audio.multiFramePackets, frames.filter((f) => f.payload.length > adts[0].length + 7 + 600 || adtsFrames(f.payload).length > 1).length);
      assert.ok(asm.stats.audio.multiFramePackets >= Math.floor(adts.length / 3));
      // framed again from the track's config, they decode to exactly the PCM of the original stream
      const again = Buffer.concat(audio.map((u) => adtsFor(tracks[0].config as Buffer, u.payload)));
      const fa = path.join(dir, 'orig.aac');
      const fb = path.join(dir, 'again.aac');
      fs.writeFileSync(fa, aac);
      fs.writeFileSync(fb, again);
      const pa = ffmpeg(['-i', fa, '-f', 's16le', '-']);
      const pb = ffmpeg(['-i', fb, '-f', 's16le', '-']);
      assert.ok(pa.length > 16000 * 2 * 2);
      assert.ok(pa.equals(pb), 'same PCM');
    });

    it('44.1 kHz stereo (PT 24) with ms-rounded timestamps: units still tile exactly at the sample rate', () => {
      const adts = adtsFrames(encode(44100, 2, 2));
      const frames: AudioFrameIn[] = [];
      for (let i = 0; i < adts.length; i += 2) frames.push({ pt: 24, ts: Math.round((i * 1024 * 1000) / 44100), payload: Buffer.concat(adts.slice(i, i + 2)) });
      const { out } = pushAudio(frames);
      const t = audioTracks(out.tracks)[0];
      assert.deepEqual([t.sampleRate, t.channels, t.config?.toString('hex')], [44100, 2, '1210']);
      const audio = out.audio();
      assert.equal(audio.length, adts.length);
      assert.ok(audio.every((u, i) => u.timescale === 44100 && u.dtsTicks === 1024 * i && u.dts === (1024 * i * 1000) / 44100), 'no rounding drift');
    });

    it('raw AAC before any ADTS frame waits for a config; after one it is taken as one frame; a cut frame is dropped alone', () => {
      const adts = adtsFrames(encode(16000, 1, 1));
      const raw = (i: number) => adts[i].subarray(7);
      const cut = Buffer.concat([adts[3], adts[4], adts[5].subarray(0, 20)]);
      const frames: AudioFrameIn[] = [
        { pt: 19, ts: 0, payload: raw(0) },
        { pt: 19, ts: 64, payload: raw(1) },
        { pt: 19, ts: 128, payload: adts[2] },
        { pt: 19, ts: 192, payload: cut },
        { pt: 19, ts: 384, payload: raw(6) },
      ];
      const { out, asm } = pushAudio(frames);
      assert.equal(asm.stats.audio.waitingForParameters, 2);
      assert.equal(asm.stats.audio.malformed, 1);
      const audio = out.audio();
      assert.deepEqual(audio.map((u) => u.dtsTicks), [2048, 3072, 4096, 6144]);
      assert.ok(audio[0].payload.equals(raw(2)) && audio[1].payload.equals(raw(3)) && audio[2].payload.equals(raw(4)) && audio[3].payload.equals(raw(6)));
    });

    it('mutated ADTS (sync, lengths, channel configs, truncation) never throws and never yields a bad unit', () => {
      const adts = adtsFrames(encode(16000, 1, 4));
      const rand = prng(1078);
      const frames: AudioFrameIn[] = [];
      for (let i = 0; i < 3000; i++) {
        const k = Math.floor(rand() * (adts.length - 3));
        const b = Buffer.concat(adts.slice(k, k + 1 + Math.floor(rand() * 3)));
        const r = rand();
        if (r < 0.3) for (let n = 0; n < 3; n++) b[Math.floor(rand() * Math.min(9, b.length))] = Math.floor(rand() * 256);
        else if (r < 0.5) b[Math.floor(rand() * b.length)] ^= 0xff;
        frames.push({ pt: 19, ts: 64 * i, payload: r > 0.9 ? b.subarray(0, Math.floor(rand() * b.length) + 1) : b });
      }
      const { out, asm } = pushAudio(frames);
      const audio = out.audio();
      assert.ok(audio.length > 1000, `${audio.length} units`);
      assert.ok(asm.stats.audio.malformed > 100);
      let last = -1;
      for (const u of audio) {
        // (a mutated sampling index changes the time base: ms are what compare across tracks)
        assert.ok(u.dts > last && u.payload.length > 0 && u.payload.length < 8192 && u.duration === 1024, `unit at ${u.dts}`);
        last = u.dts;
      }
      for (const t of audioTracks(out.tracks)) assert.ok(t.config && t.config.length === 2 && t.channels >= 1 && t.channels <= 7 && t.sampleRate >= 7350);
    });
  });
});
