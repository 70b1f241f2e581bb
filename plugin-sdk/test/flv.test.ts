/**
 * The FLV muxer on a capture's H.264 frames (no ffmpeg): which audio it carries or leaves out, what it drops before
 * parameter sets, tags framed in place, pushWire's ranges, monotonic timestamps. What ffprobe and ffmpeg read of
 * its files is in flv-ffprobe.test.ts (full tier).
 */
import assert from 'node:assert/strict';
import { FlvMuxer, flvFileHeader, serializeTag, flvTagHeader, flvPrevTagSize, WIRE_VIEW_MIN, wireParts } from '../formats/flv';
import { h264NalType, joinAnnexB, splitAnnexB } from '../formats/annexb';
import { audioUnit, shiftUnit, videoUnit, type AccessUnit, type AudioCodec } from '../media';
import { parseFlv, decodeScriptTag } from '../../test/support/flv-reader';
import { fixtureClip } from '../../test/support/fixture-clip';
import { g711, muxAll } from './flv-units';

/**
 * `frames` of a capture's H.264 at 30 fps (a keyframe a second), with the parameter sets left in the first frame
 * only, as an encoder that sends them once does.
 */
function captureUnits(frames = 60): AccessUnit[] {
  const clip = fixtureClip({ seconds: frames / 30 });
  return clip.units.map((u, i) =>
    i === 0
      ? u
      : videoUnit({
          codec: 'h264',
          dts: u.dts,
          keyframe: u.keyframe,
          payload: joinAnnexB(splitAnnexB(u.payload).filter((n) => h264NalType(n) !== 7 && h264NalType(n) !== 8)),
        }),
  );
}

describe('FLV muxer', function () {
  it('leaves out, and counts, audio codecs not in audioCodecs: no audio tag, no audio flag, no audio in onMetaData', () => {
    const muxer = new FlvMuxer({ audioCodecs: ['aac'] });
    muxer.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    const units: AccessUnit[] = captureUnits();
    for (let i = 0; i < 10; i++) units.push(g711('g711a', i * 20, Buffer.alloc(160, 0xd5)));
    const tags = muxAll(
      muxer,
      units.sort((a, b) => a.dts - b.dts),
    );
    assert.equal(tags.filter((t) => t.type === 8).length, 0, 'no audio tag');
    assert.equal(muxer.hasAudio, false, 'the file header gets no audio flag');
    const meta = decodeScriptTag(tags.find((t) => t.type === 18)!.body);
    assert.equal(meta.props.audiocodecid, undefined, 'onMetaData announces no audio');
    assert.equal(meta.props.videocodecid, 7);
    assert.equal(muxer.stats.skippedAudio, 10);
    assert.deepEqual(muxer.stats.skippedAudioCodecs, ['g711a']);
    assert.ok(tags.filter((t) => t.type === 9).length > 0, 'the video is all there');
    // the same units with G.711A allowed: the audio is carried
    const carrying = new FlvMuxer({ audioCodecs: ['aac', 'g711a'] });
    carrying.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    assert.equal(muxAll(carrying, units).filter((t) => t.type === 8).length, 10);
  });

  it('skips and counts audio codecs FLV cannot carry', () => {
    const muxer = new FlvMuxer();
    muxer.setTrack({ kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 4 });
    const codecs: AudioCodec[] = ['g726', 'g726', 'adpcm'];
    for (const codec of codecs) {
      assert.deepEqual(muxer.push(audioUnit({ codec, dts: 0, payload: Buffer.alloc(80), timescale: 8000 })), []);
    }
    assert.equal(muxer.hasAudio, false);
    assert.equal(muxer.stats.skippedAudio, 3);
    assert.deepEqual(muxer.stats.skippedAudioCodecs.sort(), ['adpcm', 'g726']);
  });

  it('drops video until parameter sets and a keyframe are known', () => {
    const units = captureUnits(35);
    const muxer = new FlvMuxer();
    // frames 1..29 are P frames without parameter sets; 30 is the next IDR (in-band SPS/PPS only on the first)
    assert.deepEqual(muxAll(muxer, units.slice(1, 30)), []);
    assert.equal(muxer.stats.droppedVideo, 29);
    muxer.setTrack({
      kind: 'video',
      codec: 'h264',
      sps: splitAnnexB(units[0].payload).find((n) => h264NalType(n) === 7),
      pps: splitAnnexB(units[0].payload).find((n) => h264NalType(n) === 8),
    });
    const tags = muxAll(muxer, units.slice(30));
    const types = tags.map((t) => (t.type === 9 && t.body[1] === 0 ? 'seq' : t.type === 18 ? 'meta' : t.keyframe ? 'key' : 'p'));
    assert.deepEqual(types, ['meta', 'seq', 'key', 'p', 'p', 'p', 'p']);
    assert.equal(tags[2].timestamp, 1000);
  });

  it('frames muxer tags in place, identical to a generic serialisation', () => {
    const muxer = new FlvMuxer();
    const [unit] = captureUnits(1);
    const tags = muxer.push(shiftUnit(unit, 0x1234567));
    const framed: Buffer[] = [];
    for (const tag of tags) {
      const sharesBody = (b: Buffer): boolean => b.buffer === tag.body.buffer && b.byteOffset + 11 === tag.body.byteOffset;
      const inPlace = serializeTag(tag);
      assert.ok(sharesBody(inPlace), 'framed around the body without a copy');
      const copied = serializeTag({ ...tag, body: Buffer.from(tag.body) });
      assert.ok(copied.equals(inPlace));
      assert.ok(Buffer.concat([flvTagHeader(tag), tag.body, flvPrevTagSize(tag)]).equals(inPlace));
      framed.push(Buffer.from(inPlace));
      // the same body again (a second file): a copy, the first buffer may still sit in a write queue
      const again = serializeTag({ ...tag, timestamp: 5 });
      assert.ok(!sharesBody(again));
      assert.ok(inPlace.equals(framed[framed.length - 1]), 'first serialisation left untouched');
    }
    const flv = parseFlv(Buffer.concat([flvFileHeader(true, false), ...framed]));
    assert.deepEqual(
      flv.tags.map((t) => t.timestamp),
      [0, 0x1234567, 0x1234567],
      'timestamps above 24 bits use TimestampExtended',
    );
  });

  it('pushWire(): the same bytes as push() framed, large NAL units as ranges of the payload, not copies', () => {
    const video = captureUnits(30);
    // a filler NAL unit makes every frame carry one large NAL unit; a short SEI-like one is copied
    const filler = Buffer.concat([Buffer.from([0x0c]), Buffer.alloc(WIRE_VIEW_MIN + 100, 0xff), Buffer.from([0x80])]);
    const small = Buffer.from([0x06, 0x05, 0x01, 0x02, 0x80]);
    const units: AccessUnit[] = video.map((u) =>
      videoUnit({
        codec: 'h264',
        dts: u.dts,
        keyframe: u.keyframe,
        payload: Buffer.concat([u.payload, Buffer.from([0, 0, 1]), small, Buffer.from([0, 0, 0, 1]), filler]),
      }),
    );
    for (let i = 0; i < 30; i++) units.push(audioUnit({ codec: 'aac', dts: i * 40 + 5, payload: Buffer.alloc(200, i), timescale: 16000, duration: 1024 }));
    units.sort((x, y) => x.dts - y.dts);
    const copying = new FlvMuxer();
    const wire = new FlvMuxer();
    for (const m of [copying, wire]) m.setTrack({ kind: 'audio', codec: 'aac', sampleRate: 16000, channels: 1, config: Buffer.from([0x14, 0x08]) });
    let configs = 0;
    for (const u of units) {
      const expected = Buffer.concat(copying.push(u).map((t) => Buffer.from(serializeTag(t))));
      const w = wire.pushWire(u);
      assert.ok(w, 'no unit here is dropped');
      const parts: Buffer[] = [];
      wireParts(w, (b) => parts.push(b));
      const media = Buffer.concat(parts);
      const got = Buffer.concat([...(w.config ?? []), media]);
      assert.ok(got.equals(expected), `unit at ${u.dts} (${u.kind}): the same bytes`);
      assert.equal(w.configBytes + w.mediaBytes, got.length);
      assert.equal(media.length, w.mediaBytes);
      if (w.config) configs += w.config.length;
      const fromPayload = parts.filter((_, i) => i % 2 === 1);
      if (u.kind === 'video') {
        assert.ok(
          fromPayload.some((v) => v.length === filler.length),
          'the filler is a range of the payload',
        );
        assert.ok(
          fromPayload.every((v) => v.length >= WIRE_VIEW_MIN && v.buffer === u.payload.buffer),
          'only large NAL units are',
        );
        assert.ok(media.includes(small), 'the short NAL unit is copied');
      } else {
        assert.equal(fromPayload.length, 1, 'the AAC frame is a range of the payload');
        assert.ok(fromPayload[0].buffer === u.payload.buffer && fromPayload[0].byteOffset === u.payload.byteOffset);
      }
      assert.equal(w.mediaType, u.kind === 'video' ? 9 : 8);
      assert.equal(w.keyframe, u.kind === 'video' && u.keyframe);
    }
    assert.equal(configs, 3, 'onMetaData, the AVC and the AAC sequence headers, once each');
  });

  it("pushWire() and push() refuse a frame past FLV's 24-bit DataSize, naming its size, and go on with the next", () => {
    const video = captureUnits(2);
    const m = new FlvMuxer();
    assert.ok(m.pushWire(video[0]), 'the keyframe');
    const big = Buffer.concat([Buffer.from([0, 0, 0, 1, 0x41]), Buffer.alloc(0xffffff, 0x22)]);
    const huge = videoUnit({ codec: 'h264', dts: video[1].dts, keyframe: false, payload: big });
    // body: 5 bytes of AVC header, 4 of NAL length, the NAL unit (its type byte and the fill)
    const message = `FLV tag body of ${5 + 4 + 1 + 0xffffff} bytes exceeds the 24-bit DataSize field`;
    assert.throws(() => m.pushWire(huge), { name: 'RangeError', message });
    assert.ok(m.pushWire(video[1]), 'the next frame');
    const copying = new FlvMuxer();
    copying.push(video[0]);
    assert.throws(() => copying.push(huge).map((t) => serializeTag(t)), { name: 'RangeError', message });
  });

  it('pushWire() for audio: the bytes push() frames, across config changes, skips and clamps; frames from WIRE_VIEW_MIN referenced', () => {
    const asc = (b: number[]) => Buffer.from(b);
    const aac = (dts: number, n: number, fill = n & 0xff) => audioUnit({ codec: 'aac', dts, payload: Buffer.alloc(n, fill), timescale: 16000, duration: 1024 });
    // two ADTS frames in one packet (9 and 12 bytes of raw data), the way a source may send them
    const adts = (len: number) => [0xff, 0xf1, 0x60, 0x40, ((len + 7) >> 3) & 0xff, (((len + 7) & 7) << 5) | 0x1f, 0xfc, ...Array<number>(len).fill(len)];
    const steps: Array<{ track?: Parameters<FlvMuxer['setTrack']>[0]; unit?: AccessUnit }> = [
      { unit: aac(0, 300) }, // no config yet: skipped
      { track: { kind: 'audio', codec: 'aac', sampleRate: 16000, channels: 1, config: asc([0x14, 0x08]) } },
      ...[0, 5, WIRE_VIEW_MIN - 1, WIRE_VIEW_MIN, WIRE_VIEW_MIN + 1, 400].map((n, i) => ({ unit: aac(10 + i * 64, n) })),
      { unit: aac(100, 300) }, // time going back: clamped
      { track: { kind: 'audio', codec: 'aac', sampleRate: 16000, channels: 1, config: asc([0x14, 0x10]) } }, // a new config
      { unit: aac(500, 250) },
      { unit: audioUnit({ codec: 'aac', dts: 600, payload: Buffer.from([...adts(9), ...adts(12)]), timescale: 16000, duration: 2048 }) },
      { track: { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 } },
      ...[160, 20, 0, 320].map((n, i) => ({ unit: g711('g711a', 700 + i * 20, Buffer.alloc(n, 0x55 + i)) })),
      { unit: g711('g711u', 800, Buffer.alloc(160, 0x7f)) }, // another codec without a track: one of its own
      { track: { kind: 'audio', codec: 'g711a', sampleRate: 16000, channels: 1 } }, // FLV has no 16 kHz G.711
      { unit: audioUnit({ codec: 'g711a', dts: 900, payload: Buffer.alloc(320), timescale: 16000, duration: 320 }) },
    ];
    const copying = new FlvMuxer();
    const wire = new FlvMuxer();
    let referenced = 0;
    for (const [i, st] of steps.entries()) {
      if (st.track) for (const m of [copying, wire]) m.setTrack(st.track);
      const u = st.unit;
      if (!u) continue;
      const expected = Buffer.concat(copying.push(u).map((t) => Buffer.from(serializeTag(t))));
      const w = wire.pushWire(u);
      if (w === undefined) {
        assert.equal(expected.length, 0, `step ${i}: dropped by both`);
        continue;
      }
      const parts: Buffer[] = [];
      wireParts(w, (b) => parts.push(b));
      const got = Buffer.concat([...(w.config ?? []), ...parts]);
      assert.ok(got.equals(expected), `step ${i} (${u.codec}, ${u.payload.length} bytes): the same bytes`);
      assert.equal(w.configBytes + w.mediaBytes, got.length);
      const fromPayload = parts.filter((_, k) => k % 2 === 1);
      if (w.mediaTags === 1 && u.payload.length >= WIRE_VIEW_MIN) {
        referenced++;
        assert.equal(fromPayload.length, 1, `step ${i}: the frame is a range of the payload`);
        assert.ok(fromPayload[0].buffer === u.payload.buffer && fromPayload[0].byteOffset === u.payload.byteOffset);
        assert.equal(w.mem.length, w.mediaBytes - u.payload.length, 'only the header, flags and size are copied');
      } else {
        assert.equal(fromPayload.length, 0, `step ${i}: a short frame (or ADTS) is copied`);
      }
    }
    assert.equal(referenced, 8);
    assert.deepEqual(wire.stats, copying.stats, 'the same tags counted, skipped and clamped');
    assert.equal(wire.stats.clampedTimestamps, 1);
    assert.deepEqual(
      wire.configTags(7).map((t) => Buffer.from(serializeTag(t)).toString('hex')),
      copying.configTags(7).map((t) => Buffer.from(serializeTag(t)).toString('hex')),
      'what a new reader starts with',
    );
  });

  it('keeps timestamps monotonic per track when a source jumps back', () => {
    const muxer = new FlvMuxer();
    muxer.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    const ts = [0, 20, 10, 40].flatMap((dts) =>
      muxer
        .push(g711('g711a', dts, Buffer.alloc(160)))
        .filter((t) => t.type === 8)
        .map((t) => t.timestamp),
    );
    assert.deepEqual(ts, [0, 20, 20, 40]);
    assert.equal(muxer.stats.clampedTimestamps, 1);
  });
});
