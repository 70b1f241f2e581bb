/**
 * Audio normalisation at ingest with inputs ffmpeg makes or judges (full tier): IMA ADPCM blocks and AAC from
 * ffmpeg's encoders, and the G.726 packing the terminal files decode as in ffmpeg. audio.test.ts has the rest.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fixturePath, scratchDir } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import { addHisiliconHeader } from '../src/audio';
import { audioTracks, prng, pushAudio, type AudioFrameIn } from './helpers';

function ffmpeg(args: string[]): Buffer {
  const bin = requireTool('ffmpeg', 'ffmpeg');
  const r = spawnSync(bin, ['-hide_banner', '-loglevel', 'error', '-y', ...args], { maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
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
    0xff,
    0xf1,
    ((objectType - 1) << 6) | (sfi << 2) | (channels >> 2),
    ((channels & 3) << 6) | (len >> 11),
    (len >> 3) & 0xff,
    ((len & 7) << 5) | 0x1f,
    0xfc,
  ]);
  return Buffer.concat([h, raw]);
}

function correlation(a: Int16Array, b: Int16Array): number {
  let ab = 0,
    aa = 0,
    bb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}
describe('jt1078 audio normalisation, with ffmpeg', function () {
  this.timeout(60000);
  let dir: string;
  before(() => {
    dir = scratchDir('jt1078-audio');
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('G.726 (the glaciall files at 16/24/32/40 kbit/s)', () => {
    it('the default packing (left, ffmpeg g726) is the one these terminal files decode as', () => {
      // the same speech at 24 and 40 kbit/s: decoded with the right packing the two agree, with the wrong one not
      const decode = (rate: number, fmt: 'g726' | 'g726le'): Int16Array => {
        const file = path.join(dir, `in_${rate}.g726`);
        fs.writeFileSync(file, fs.readFileSync(fixturePath(`g726/in_${rate}.g726`)).subarray(0, ((rate * 1000) / 8) * 10));
        const pcm = ffmpeg(['-f', fmt, '-code_size', String(rate / 8), '-sample_rate', '8000', '-i', file, '-f', 's16le', '-']);
        return new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1);
      };
      const ref = decode(40, 'g726');
      const left = correlation(decode(24, 'g726'), ref);
      const right = correlation(decode(24, 'g726le'), ref);
      assert.ok(left > 0.6, `left ${left}`);
      assert.ok(right < 0.3, `right ${right}`);
    });
  });

  describe('IMA ADPCM (ffmpeg adpcm_ima_wav blocks)', () => {
    let blocks: Buffer[];
    before(() => {
      const wav = ffmpeg([
        '-f',
        'lavfi',
        '-i',
        'sine=frequency=500:sample_rate=8000:duration=2',
        '-c:a',
        'adpcm_ima_wav',
        '-block_size',
        '256',
        '-f',
        'wav',
        '-',
      ]);
      const at = wav.indexOf('data');
      const data = wav.subarray(at + 8, at + 8 + wav.readUInt32LE(at + 4));
      blocks = [];
      for (let off = 0; off + 256 <= data.length; off += 256) blocks.push(data.subarray(off, off + 256));
      assert.ok(blocks.length >= 20);
    });

    it("HiSilicon header removed, the block's own state header kept, 4 bits per sample, two samples per code byte", () => {
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
      assert.deepEqual(
        out.audio().map((u) => [u.timescale, u.dtsTicks, u.duration]),
        [
          [16000, 0, 504],
          [16000, 1024, 504],
        ],
      );
      assert.equal(asm.stats.audio.malformed, 1);
    });
  });

  describe('AAC (ffmpeg aac encoder, ADTS)', () => {
    const encode = (rate: number, channels: number, seconds: number): Buffer =>
      ffmpeg([
        '-f',
        'lavfi',
        '-i',
        `sine=frequency=440:sample_rate=${rate}:duration=${seconds}`,
        '-ac',
        String(channels),
        '-c:a',
        'aac',
        '-b:a',
        '48k',
        '-f',
        'adts',
        '-',
      ]);
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
      assert.equal(
        asm.stats.audio.multiFramePackets,
        frames.filter((f) => f.payload.length > adts[0].length + 7 + 600 || adtsFrames(f.payload).length > 1).length,
      );
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
      assert.ok(
        audio.every((u, i) => u.timescale === 44100 && u.dtsTicks === 1024 * i && u.dts === (1024 * i * 1000) / 44100),
        'no rounding drift',
      );
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
      assert.deepEqual(
        audio.map((u) => u.dtsTicks),
        [2048, 3072, 4096, 6144],
      );
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
