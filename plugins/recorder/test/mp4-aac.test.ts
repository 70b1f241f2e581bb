/**
 * G.711 carried as AAC in the MP4 form (`audio=aac`, the default) without a gateway: FLV files from the gateway's
 * own FLV muxer, the AAC encoded by the recorder's worker (g711-aac.ts), read back by ffprobe: an `aac` stream at
 * 8000 Hz mono, every frame decoded without an error, lasting what the FLV's audio lasts (a gap in the FLV filled
 * with silence, so the sound after it keeps its time); byte ranges equal the whole; `as-is` still pcm_alaw; an AAC
 * FLV is the same bytes either way; concurrent requests share one encode.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { audioUnit, type AccessUnit, type TrackInfo } from '../../../plugin-sdk';
import { testClip } from '../../../plugin-sdk/testkit';
import { G711Transcoder } from '../src/g711-aac';
import { mp4Bytes, mp4LayoutOf, type Mp4Layout } from '../src/mp4-layout';
import { Mp4LayoutCache, mp4LayoutFor, type RecordAudio } from '../src/mp4-route';
import { audioSpan, encodeAac, encodeVideo, framesOf, interleave, probe, topBoxes, writeFlv } from './mp4-media';

async function bytesOf(flv: string, l: Mp4Layout, start = 0, end = l.total - 1): Promise<Buffer> {
  const fd = fs.openSync(flv, 'r');
  try {
    const parts: Buffer[] = [];
    for await (const b of mp4Bytes(l, fd, start, end)) parts.push(Buffer.from(b));
    return Buffer.concat(parts);
  } finally {
    fs.closeSync(fd);
  }
}

describe('recorder: G.711 as AAC in the MP4 form', function () {
  this.timeout(60_000);
  const log = pino({ level: 'silent' });
  let dir: string;
  let transcoder: G711Transcoder;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-mp4-aac-'));
    transcoder = new G711Transcoder(log);
  });
  after(async () => {
    await transcoder.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function make(name: string, units: readonly AccessUnit[], tracks: readonly TrackInfo[], audio: RecordAudio) {
    const flv = path.join(dir, `${name}.flv`);
    writeFlv(flv, units, tracks);
    const layout = await mp4LayoutFor(flv, undefined, audio, transcoder, log);
    const mp4 = await bytesOf(flv, layout);
    assert.equal(mp4.length, layout.total);
    const file = path.join(dir, `${name}-${audio}.mp4`);
    fs.writeFileSync(file, mp4);
    return { flv, file, layout, mp4, probed: probe(file), flvProbed: probe(flv) };
  }

  /** the FLV's audio: from its first sample's time to the end of its last */
  const flvAudioSeconds = (units: readonly AccessUnit[]): number => {
    const a = units.filter((u) => u.kind === 'audio');
    const last = a[a.length - 1]!;
    return (last.dts + (last.payload.length * 1000) / 8000 - a[0]!.dts) / 1000;
  };

  it("G.711A: an aac stream, 8000 Hz mono, every frame decoded, the FLV audio's duration within 1 %", async () => {
    const clip = testClip({ seconds: 6, audio: true });
    const r = await make('g711a', clip.units, clip.tracks, 'aac');
    assert.deepEqual(topBoxes(r.mp4), ['ftyp', 'moov', 'mdat']);
    assert.deepEqual(
      r.probed.streams.map((s) => `${s.codec_type}:${s.codec_name}:${s.codec_tag_string}`),
      ['video:h264:avc1', 'audio:aac:mp4a'],
    );
    const a = r.probed.streams[1]!;
    assert.equal(a.sample_rate, '8000');
    assert.equal(a.channels, 1);
    assert.equal(r.probed.stderr, '', 'ffprobe -count_frames decodes it without errors');
    assert.equal(framesOf(r.probed, 'video'), clip.frameCount);
    // 6 s at 8 kHz: 47 frames of 1024 samples, the priming frame and the padded last one
    assert.ok(framesOf(r.probed, 'audio') >= 47, `${framesOf(r.probed, 'audio')} AAC frames`);
    const want = flvAudioSeconds(clip.units);
    assert.ok(Math.abs(Number(a.duration) - want) <= want * 0.01, `AAC ${a.duration} s, FLV audio ${want} s`);
    const span = audioSpan(r.file);
    assert.ok(Math.abs(span.seconds - want) <= want * 0.01, `AAC presents ${span.seconds} s, FLV audio ${want} s`);
    assert.equal(span.start, 0);
    assert.ok(Math.abs(r.probed.duration - r.flvProbed.duration) <= r.flvProbed.duration * 0.01, `${r.probed.duration} vs ${r.flvProbed.duration}`);
    assert.equal(r.layout.audioFrom, 'alaw');
    assert.deepEqual(r.layout.audioCodecs, ['aac']);
  });

  it('G.711µ as AAC too; audio=as-is keeps pcm_alaw', async () => {
    const clip = testClip({ seconds: 2, audio: true });
    const ulaw = clip.units.map((u) =>
      u.kind === 'audio' ? audioUnit({ codec: 'g711u', dts: u.dts, timescale: 8000, duration: 320, payload: u.payload }) : u,
    );
    const u = await make('g711u', ulaw, [], 'aac');
    assert.deepEqual(
      u.probed.streams.map((s) => s.codec_name),
      ['h264', 'aac'],
    );
    assert.equal(u.probed.stderr, '');
    const asIs = await make('g711a-as-is', clip.units, clip.tracks, 'as-is');
    assert.deepEqual(
      asIs.probed.streams.map((s) => `${s.codec_name}:${s.codec_tag_string}`),
      ['h264:avc1', 'pcm_alaw:alaw'],
    );
    assert.equal(asIs.layout.audioFrom, undefined);
  });

  it("audio starting after the video starts there; a gap in it is silence, so it still lasts what the FLV's does", async () => {
    // 20 s: with an empty edit first, ffmpeg presents the last frame whole (its padding, up to 128 ms, counted)
    const clip = testClip({ seconds: 20, audio: true });
    // no audio in the first second, and 2 s missing in the middle (the bus skipped ahead, the terminal lost packets)
    const units = clip.units.filter((u) => u.kind === 'video' || (u.dts >= 1000 && (u.dts < 8500 || u.dts >= 10_500)));
    const r = await make('gap', units, clip.tracks, 'aac');
    const want = flvAudioSeconds(units);
    const span = audioSpan(r.file);
    assert.ok(Math.abs(span.seconds - want) <= want * 0.01, `AAC presents ${span.seconds} s, FLV audio ${want} s`);
    assert.ok(Math.abs(span.start - 1) < 0.01, `audio starts at ${span.start} s`);
    assert.equal(r.probed.stderr, '');
  });

  it('any byte range of it equals the same bytes of the whole (AAC frames from memory, video from the FLV)', async () => {
    const clip = testClip({ seconds: 3, audio: true });
    const r = await make('ranges', clip.units, clip.tracks, 'aac');
    const l = r.layout;
    const h = l.head.length;
    const cuts: Array<[number, number]> = [
      [0, h - 1],
      [h - 3, h + 10],
      [h, l.total - 1],
      [l.total - 1, l.total - 1],
    ];
    // every sample's edges, a memory one and a file one alike
    for (let i = 0; i < l.samples.count; i += 7) cuts.push([h + l.payloadBefore[i]! - 1, h + l.payloadBefore[i + 1]!]);
    for (let i = 0; i < 30; i++) {
      const a = Math.floor(Math.random() * l.total);
      cuts.push([a, a + Math.floor(Math.random() * (l.total - a))]);
    }
    for (const [a, b] of cuts) {
      const end = Math.min(b, l.total - 1);
      assert.ok((await bytesOf(r.flv, l, a, end)).equals(r.mp4.subarray(a, end + 1)), `bytes ${a}-${end}`);
    }
  });

  it('an AAC FLV is not touched: audio=aac gives the same bytes as audio=as-is', async () => {
    const units = interleave(encodeVideo('h264', 100), encodeAac(4, 16000));
    const aac = await make('aacflv', units, [], 'aac');
    const asIs = await make('aacflv', units, [], 'as-is');
    assert.ok(aac.mp4.equals(asIs.mp4));
    // and the remux with no `audio` option (mp4LayoutOf's default)
    assert.ok(aac.mp4.equals(await bytesOf(aac.flv, await mp4LayoutOf(aac.flv))));
    assert.equal(aac.layout.audioFrom, undefined);
    assert.deepEqual(
      aac.probed.streams.map((s) => s.codec_name),
      ['h264', 'aac'],
    );
  });

  it('concurrent requests for one file share one index and one encode; a changed file is encoded again', async () => {
    const clip = testClip({ seconds: 3, audio: true });
    const flv = path.join(dir, 'shared.flv');
    writeFlv(flv, clip.units, clip.tracks);
    let encodes = 0;
    const counting = new G711Transcoder(log);
    const orig = counting.transcode.bind(counting);
    counting.transcode = (f, index) => {
      encodes++;
      return orig(f, index);
    };
    const cache = new Mp4LayoutCache(32, 64 << 20, Date.now, counting);
    try {
      const st = fs.statSync(flv);
      const got = await Promise.all([1, 2, 3].map(() => cache.get(flv, st.size, st.mtimeMs, false, log, 'r1', 'aac')));
      assert.equal(encodes, 1);
      assert.ok(got[1] === got[0] && got[2] === got[0]);
      assert.equal(got[0]!.audioFrom, 'alaw');
      // the as-is form is its own layout, with no encode
      assert.equal((await cache.get(flv, st.size, st.mtimeMs, false, log, 'r1', 'as-is')).audioFrom, undefined);
      assert.equal(encodes, 1);
      await cache.get(flv, st.size, st.mtimeMs + 1000, false, log, 'r1', 'aac');
      assert.equal(encodes, 2);
    } finally {
      await counting.close();
    }
  });
});
