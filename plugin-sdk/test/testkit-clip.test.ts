/**
 * The test kit's testClip itself: ffmpeg's test pattern through libx264 (and G.711 A-law alongside), checked by
 * ffprobe and ffmpeg. Full tier; the kit's other helpers are tested in testkit.test.ts with a capture's frames.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { findFfmpeg, linearToAlaw, testClip } from '../testkit';

function ffprobeOf(): string {
  return path.join(path.dirname(findFfmpeg()), 'ffprobe');
}

describe('plugin-sdk test kit: testClip', () => {
  let scratch: string | undefined;
  afterEach(() => {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  });

  it('testClip: real H.264 that ffprobe decodes, as frozen units at exact 90 kHz ticks, cached per process', () => {
    const clip = testClip({ seconds: 2 });
    assert.equal(testClip({ seconds: 2 }), clip, 'encoded once per process');
    assert.equal(clip.frameCount, 50);
    assert.equal(clip.durationMs, 2000);
    assert.equal(clip.units.length, 50);
    assert.deepEqual(clip.tracks, [clip.video]);
    assert.equal(clip.video.codec, 'h264');
    assert.deepEqual([clip.video.width, clip.video.height], [320, 240]);
    assert.ok(clip.video.sps && clip.video.pps);
    clip.units.forEach((u, i) => {
      assert.deepEqual([u.kind, u.codec, u.timescale, u.dtsTicks, u.ptsTicks, u.dts], ['video', 'h264', 90_000, i * 3600, i * 3600, i * 40]);
      // one keyframe a second, first of all
      assert.equal(u.keyframe, i % 25 === 0, `frame ${i}`);
      assert.ok(Object.isFrozen(u));
    });
    assert.throws(() => {
      (clip.units[0] as { dts: number }).dts = 5;
    }, TypeError);

    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'testclip-'));
    const file = path.join(scratch, 'clip.h264');
    fs.writeFileSync(file, Buffer.concat(clip.units.map((u) => u.payload)));
    const probe = spawnSync(
      ffprobeOf(),
      ['-v', 'error', '-count_frames', '-select_streams', 'v:0', '-show_entries', 'stream=codec_name,width,height,nb_read_frames', '-of', 'json', file],
      { encoding: 'utf8' },
    );
    assert.equal(probe.status, 0, probe.stderr);
    const st = JSON.parse(probe.stdout).streams[0];
    assert.deepEqual([st.codec_name, st.width, st.height, Number(st.nb_read_frames)], ['h264', 320, 240, 50]);
  });

  it('testClip with audio: G.711 A-law units of a 1 kHz tone, interleaved by time after the video', () => {
    assert.equal(linearToAlaw(0), 0xd5);
    assert.equal(linearToAlaw(-1), 0x55);
    assert.equal(linearToAlaw(32767), 0xaa);
    assert.equal(linearToAlaw(-32768), 0x2a);
    const clip = testClip({ seconds: 1, audio: true });
    assert.deepEqual(clip.audio, { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1, bitsPerSample: 8, frameSamples: 320 });
    assert.deepEqual(
      clip.tracks.map((t) => t.kind),
      ['video', 'audio'],
    );
    const audio = clip.units.filter((u) => u.kind === 'audio');
    assert.equal(audio.length, 25);
    audio.forEach((u, i) => assert.deepEqual([u.timescale, u.dtsTicks, u.duration, u.payload.length, u.dts], [8000, i * 320, 320, 320, i * 40]));
    assert.equal(clip.units[0]!.kind, 'video');
    assert.ok(clip.units[0]!.keyframe);
    for (let i = 1; i < clip.units.length; i++) assert.ok(clip.units[i]!.dts >= clip.units[i - 1]!.dts, `unit ${i} in time order`);

    // ffmpeg hears a 1 kHz tone: about 2 zero crossings per ms
    const r = spawnSync(findFfmpeg(), ['-v', 'error', '-f', 'alaw', '-ar', '8000', '-ac', '1', '-i', '-', '-f', 's16le', '-'], {
      input: Buffer.concat(audio.map((u) => u.payload)),
    });
    assert.equal(r.status, 0, r.stderr?.toString());
    const pcm = r.stdout;
    let crossings = 0;
    for (let i = 2; i + 1 < pcm.length; i += 2) if (pcm.readInt16LE(i - 2) < 0 !== pcm.readInt16LE(i) < 0) crossings++;
    assert.equal(pcm.length / 2, 8000);
    assert.ok(Math.abs(crossings - 2000) <= 4, `${crossings} zero crossings in 1 s`);
  });
});
