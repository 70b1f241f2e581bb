/**
 * The MP4 form of record files without a gateway: FLV files written by the gateway's own FLV muxer (H.264 with
 * G.711A, G.711µ or AAC; H.265 as Enhanced FLV), remuxed by mp4-layout.ts, read back by ffprobe (every frame
 * decoded); byte ranges of the MP4 equal the same bytes of the whole; a torn or corrupt FLV gives what was whole.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { audioUnit, type AccessUnit } from '../../../plugin-sdk';
import { testClip } from '../../../plugin-sdk/testkit';
import { mp4Bytes, mp4LayoutOf, type Mp4Layout } from '../src/mp4-layout';
import { encodeAac, encodeVideo, framesOf, interleave, probe, topBoxes, writeFlv } from './mp4-media';

async function remux(flv: string, l?: Mp4Layout, start = 0, end?: number): Promise<Buffer> {
  const layout = l ?? (await mp4LayoutOf(flv));
  const fd = fs.openSync(flv, 'r');
  try {
    const parts: Buffer[] = [];
    for await (const b of mp4Bytes(layout, fd, start, end ?? layout.total - 1)) parts.push(Buffer.from(b));
    return Buffer.concat(parts);
  } finally {
    fs.closeSync(fd);
  }
}

describe('recorder: FLV to MP4 remux', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-mp4-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  async function roundTrip(name: string, units: readonly AccessUnit[], tracks: Parameters<typeof writeFlv>[2] = []) {
    const flv = path.join(dir, `${name}.flv`);
    writeFlv(flv, units, tracks);
    const layout = await mp4LayoutOf(flv);
    const mp4 = await remux(flv, layout);
    assert.equal(mp4.length, layout.total);
    const file = path.join(dir, `${name}.mp4`);
    fs.writeFileSync(file, mp4);
    // ffmpeg 5 (Debian 12) does not read Enhanced FLV: H.265 is checked from the MP4 alone
    return { flv, file, mp4, layout, probed: probe(file), flvProbed: layout.videoCodecs.includes('h265') ? undefined : probe(flv) };
  }

  // ffprobe gives an FLV file the time of its last tag, without that tag's own length: 6 s keep that under 1 %
  it("H.264 with G.711A: avc1 + alaw, moov before mdat, every frame, the FLV's duration", async () => {
    const clip = testClip({ seconds: 6, audio: true });
    const r = await roundTrip('g711a', clip.units, clip.tracks);
    assert.deepEqual(topBoxes(r.mp4), ['ftyp', 'moov', 'mdat']);
    const codecs = r.probed.streams.map((s) => `${s.codec_type}:${s.codec_name}:${s.codec_tag_string}`);
    assert.deepEqual(codecs, ['video:h264:avc1', 'audio:pcm_alaw:alaw']);
    assert.equal(framesOf(r.probed, 'video'), clip.frameCount);
    assert.equal(framesOf(r.probed, 'video'), framesOf(r.flvProbed!, 'video'));
    assert.ok(Math.abs(r.probed.duration - r.flvProbed!.duration) <= r.flvProbed!.duration * 0.01, `${r.probed.duration} vs ${r.flvProbed!.duration}`);
    assert.equal(r.probed.stderr, '');
  });

  it('H.264 with G.711µ: ulaw', async () => {
    const clip = testClip({ seconds: 2, audio: true });
    const units = clip.units.map((u) =>
      u.kind === 'audio' ? audioUnit({ codec: 'g711u', dts: u.dts, timescale: 8000, duration: 320, payload: u.payload }) : u,
    );
    const r = await roundTrip('g711u', units);
    assert.deepEqual(
      r.probed.streams.map((s) => s.codec_tag_string),
      ['avc1', 'ulaw'],
    );
    assert.ok(framesOf(r.probed, 'audio') > 0);
  });

  it('H.264 with AAC: mp4a, audio frames decoded', async () => {
    const r = await roundTrip('aac', interleave(encodeVideo('h264', 150), encodeAac(6, 48000)));
    assert.deepEqual(
      r.probed.streams.map((s) => `${s.codec_name}:${s.codec_tag_string}`),
      ['h264:avc1', 'aac:mp4a'],
    );
    assert.equal(framesOf(r.probed, 'video'), 150);
    assert.equal(framesOf(r.probed, 'audio'), framesOf(r.flvProbed!, 'audio'));
    assert.ok(Math.abs(r.probed.duration - r.flvProbed!.duration) <= r.flvProbed!.duration * 0.01, `${r.probed.duration} vs ${r.flvProbed!.duration}`);
  });

  it('H.265 (Enhanced FLV hvc1): hvc1 with hvcC, every frame', async () => {
    const r = await roundTrip('h265', encodeVideo('h265', 50));
    const v = r.probed.streams[0]!;
    assert.deepEqual([v.codec_name, v.codec_tag_string, v.width, v.height], ['hevc', 'hvc1', 320, 240]);
    assert.equal(framesOf(r.probed, 'video'), 50);
    assert.equal(r.layout.videoCodecs[0], 'h265');
  });

  it('any byte range equals the same bytes of the whole MP4', async () => {
    const clip = testClip({ seconds: 3, audio: true });
    const flv = path.join(dir, 'ranges.flv');
    writeFlv(flv, clip.units, clip.tracks);
    const layout = await mp4LayoutOf(flv);
    const whole = await remux(flv, layout);
    const h = layout.head.length;
    const cuts: Array<[number, number]> = [
      [0, 0],
      [0, h - 1],
      [h - 3, h + 10],
      [h, layout.total - 1],
      [1234, 56789],
      [layout.total - 1, layout.total - 1],
      [7, layout.total - 2],
    ];
    for (let i = 0; i < 20; i++) {
      const a = Math.floor(Math.random() * layout.total);
      cuts.push([a, a + Math.floor(Math.random() * (layout.total - a))]);
    }
    for (const [a, b] of cuts) assert.ok((await remux(flv, layout, a, b)).equals(whole.subarray(a, b + 1)), `bytes ${a}-${b}`);
  });

  it('a torn FLV (cut inside a tag, as a crash leaves it) remuxes what is whole', async () => {
    const clip = testClip({ seconds: 3, audio: true });
    const full = writeFlv(path.join(dir, 'whole.flv'), clip.units, clip.tracks);
    const torn = path.join(dir, 'torn.flv');
    fs.writeFileSync(torn, full.subarray(0, Math.floor(full.length * 0.6) + 3));
    const layout = await mp4LayoutOf(torn);
    assert.equal(layout.stopped, undefined, 'a torn end is not a corrupt tag');
    const file = path.join(dir, 'torn.mp4');
    fs.writeFileSync(file, await remux(torn, layout));
    const p = probe(file);
    const frames = framesOf(p, 'video');
    assert.ok(frames > clip.frameCount * 0.4 && frames < clip.frameCount, `${frames} frames of ${clip.frameCount}`);
    assert.equal(p.stderr, '');
  });

  it('a corrupt tag stops the MP4 with what came before, saying where', async () => {
    const clip = testClip({ seconds: 3, audio: true });
    const bytes = writeFlv(path.join(dir, 'good.flv'), clip.units, clip.tracks);
    // find the tag header nearest the middle and break its type
    let at = bytes.readUInt32BE(5) + 4;
    while (at < bytes.length / 2) at += 11 + bytes.readUIntBE(at + 1, 3) + 4;
    const bad = Buffer.from(bytes);
    bad[at] = 0x33;
    const corrupt = path.join(dir, 'corrupt.flv');
    fs.writeFileSync(corrupt, bad);
    const layout = await mp4LayoutOf(corrupt);
    assert.match(layout.stopped ?? '', new RegExp(`tag type 51 at byte ${at}`));
    assert.equal(layout.flvLength, at);
    const file = path.join(dir, 'corrupt.mp4');
    fs.writeFileSync(file, await remux(corrupt, layout));
    const frames = framesOf(probe(file), 'video');
    assert.ok(frames > 0 && frames < clip.frameCount, `${frames} frames`);
  });

  it('what is not FLV, or a header alone, gives no samples rather than an error', async () => {
    const junk = path.join(dir, 'junk.flv');
    fs.writeFileSync(junk, Buffer.from('not a video at all'));
    assert.equal((await mp4LayoutOf(junk)).samples.count, 0);
    const empty = path.join(dir, 'empty.flv');
    writeFlv(empty, []);
    const l = await mp4LayoutOf(empty);
    assert.equal(l.samples.count, 0);
    assert.equal(l.stopped, undefined);
  });
});
