/**
 * Audio normalisation at ingest: one frame per unit, no vendor framing, exact time at the sample rate, the codec's
 * parameters in the track. Inputs are the real captures and G.726 files of shared/fixtures, re-packed where no
 * capture has the case (HiSilicon headers, G.726 in a stream). ADPCM and AAC made by ffmpeg's encoders, and which
 * G.726 packing ffmpeg decodes these files as, are in audio-ffmpeg.test.ts (full tier).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { fixturePath } from '../../../test/support/paths';
import { G726RateEstimator, addHisiliconHeader, g726BitsFromFrameLength, hasHisiliconHeader, stripHisiliconHeader } from '../src/audio';
import { assemble, audioTracks, capturePackets, pushAudio, type AudioFrameIn } from './helpers';

const GOJT = 'jt1078/gojt808-d1-h264-g711a-2013.bin';

const payloadOf = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + seed) & 0xff));

describe('jt1078 audio normalisation', function () {
  this.timeout(60000);

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
      assert.deepEqual(
        out.video().map((u) => u.dtsTicks),
        plain.video().map((u) => u.dtsTicks),
      );
    });

    it('G.711U (PT 7) is announced as such', () => {
      const mu = packets.map((p) => (p.dataType === 3 ? { ...p, pt: 7 } : p));
      const { out } = assemble(mu);
      assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'g711u', sampleRate: 8000, channels: 1 }]);
      assert.ok(out.audio().every((u) => u.codec === 'g711u' && u.duration === 160));
    });

    it('places frames edge to edge through ±1 ms of timestamp jitter, but keeps a real gap', () => {
      const frames: AudioFrameIn[] = audioBodies.slice(0, 40).map((payload, i) => ({
        pt: 6,
        payload,
        ts: 5000 + 20 * i + (i % 3 === 1 ? 1 : i % 3 === 2 ? -1 : 0) + (i >= 30 ? 100 : 0),
      }));
      const { out } = pushAudio(frames);
      const ticks = out.audio().map((u) => u.dtsTicks);
      assert.deepEqual(
        ticks.slice(0, 30),
        Array.from({ length: 30 }, (_, i) => 160 * i),
      );
      // 100 ms (800 samples) of silence from the terminal stays a gap of that length
      assert.equal(ticks[30], 160 * 30 + 800);
      assert.deepEqual(
        ticks.slice(30),
        Array.from({ length: 10 }, (_, i) => 160 * (30 + i) + 800),
      );
    });
  });

  it('a codec the payload says nothing about (LPC, PT 14) passes as sent, duration 0, timed by the terminal alone', () => {
    const frames = [0, 1, 5, 20].map((ts, i) => ({ pt: 14, ts, payload: payloadOf(14, i) }));
    const { out } = pushAudio(frames);
    assert.deepEqual(audioTracks(out.tracks), [{ kind: 'audio', codec: 'unknown', sampleRate: 8000, channels: 1 }]);
    assert.deepEqual(
      out.audio().map((u) => [u.dtsTicks, u.duration]),
      [
        [0, 0],
        [8, 0],
        [40, 0],
        [160, 0],
      ],
    );
    assert.ok(out.audio().every((u, i) => u.payload.equals(frames[i].payload)));
  });

  describe('G.726 (the glaciall files at 16/24/32/40 kbit/s)', () => {
    for (const [rate, bits] of [
      [16, 2],
      [24, 3],
      [32, 4],
      [40, 5],
    ] as const) {
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
      assert.deepEqual(
        audio.map((u) => [u.dtsTicks, u.duration]),
        Array.from({ length: 6 }, (_, k) => [16000 * (24 + k), 320]),
      );
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
});
