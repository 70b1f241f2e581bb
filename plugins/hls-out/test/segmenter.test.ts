/**
 * The segmenter on its own, fed units directly: where it cuts, what it holds, and that its memory stays within
 * maxStreamBytes after every single unit (not only at the end).
 */
import assert from 'node:assert/strict';
import { audioUnit, type AccessUnit } from '../../../plugin-sdk';
import { Segmenter, type SegmenterOptions } from '../src/segmenter';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { segmenterOptions } from './segmenter-options';

function segmenter(o: Partial<SegmenterOptions> = {}): { seg: Segmenter; drops: () => number } {
  let drops = 0;
  const seg = new Segmenter(
    segmenterOptions({
      stats: {
        parts: () => undefined,
        segments: () => undefined,
        memoryDrops: () => {
          drops++;
        },
        unitsLeftOut: () => undefined,
      },
      ...o,
    }),
  );
  return { seg, drops: () => drops };
}

/** the clip's units looped `passes` times on one timeline */
function looped(units: ReadonlyArray<AccessUnit>, passes: number, spanMs: number): AccessUnit[] {
  const out: AccessUnit[] = [];
  for (let p = 0; p < passes; p++) {
    for (const u of units) {
      out.push({
        ...u,
        dts: u.dts + p * spanMs,
        pts: u.pts + p * spanMs,
        dtsTicks: u.dtsTicks + Math.round((p * spanMs * u.timescale) / 1000),
        ptsTicks: u.ptsTicks + Math.round((p * spanMs * u.timescale) / 1000),
      });
    }
  }
  return out;
}

describe('hls-out: the segmenter', () => {
  it('cuts 2 s segments at keyframes and parts of at most the part target; the window keeps its size', () => {
    const clip = fixtureClip({ seconds: 2 });
    const { seg } = segmenter();
    seg.tracks([clip.video]);
    for (const u of looped(clip.units, 12, clip.durationMs)) seg.write(u);
    assert.equal(seg.segments.length - seg.listedFrom, 3, "three listed: 6 s, three target durations, RFC 8216's least");
    assert.equal(seg.segments.length, 4, 'and one kept for a late fetch');
    for (const s of seg.segments) {
      assert.equal(s.duration, 2);
      assert.equal(s.parts[0].independent, true);
      for (const p of s.parts) assert.ok(p.duration <= 0.333, `part of ${p.duration}`);
      assert.equal(
        s.bytes,
        s.parts.reduce((n, p) => n + p.data.reduce((m, b) => m + b.length, 0), 0),
      );
    }
    assert.equal(seg.segments[3].msn, seg.segments[0].msn + 3);
    assert.equal(seg.targetDuration, 2);
  });

  it('windowSec lists more, windowSegments caps what it lists, and memory follows what is listed', () => {
    const clip = fixtureClip({ seconds: 2 });
    const run = (o: Partial<SegmenterOptions>) => {
      const { seg } = segmenter(o);
      seg.tracks([clip.video]);
      for (const u of looped(clip.units, 12, clip.durationMs)) seg.write(u);
      return { listed: seg.segments.length - seg.listedFrom, kept: seg.segments.length, bytes: seg.bytes };
    };
    const least = run({});
    const ten = run({ windowSec: 10 });
    assert.deepEqual([ten.listed, ten.kept], [5, 6], '10 s of 2 s segments');
    assert.deepEqual([run({ windowSec: 10, windowSegments: 4 }).listed, run({ windowSec: 10, windowSegments: 4 }).kept], [4, 5]);
    assert.deepEqual([run({ windowSec: 7 }).listed], [4], 'at least 7 s: four segments');
    assert.ok(ten.bytes > least.bytes * 1.3, `${ten.bytes} against ${least.bytes}`);
  });

  it('keeps nothing the bus gave it: payloads overwritten after write() leave its parts as they were', () => {
    const clip = fixtureClip({ seconds: 2 });
    const units = looped(clip.units, 3, clip.durationMs);
    const bytesOf = (seg: Segmenter) => Buffer.concat(seg.segments.flatMap((x) => x.parts.flatMap((p) => p.data)));
    const pristine = segmenter().seg;
    pristine.tracks([clip.video]);
    for (const u of units) pristine.write({ ...u, payload: Buffer.from(u.payload) });
    const reused = segmenter().seg;
    assert.equal(reused.holdsPayloads(), false, 'so the bus reuses payload memory of streams HLS reads');
    reused.tracks([clip.video]);
    for (const u of units) {
      // what the bus does with a payload it may reuse: the next frame's bytes, or the tests' poison pattern
      const given = Buffer.from(u.payload);
      reused.write({ ...u, payload: given });
      given.fill(0xee);
    }
    assert.ok(pristine.segments.length >= 2);
    assert.equal(reused.segments.length, pristine.segments.length);
    assert.ok(bytesOf(reused).equals(bytesOf(pristine)), 'the same bytes');
    // and a part refers to the store's bytes, not a copy per part: its samples are slices of a few chunks
    const part = reused.segments[0].parts[0];
    assert.ok(part.data.length >= 2 && part.data.length <= 4, `boxes and sample slices: ${part.data.length}`);
  });

  it('a GOP longer than the target is cut at the target without a keyframe: EXT-X-TARGETDURATION never changes', () => {
    // a capture's 3 s GOP (30 frames at 10 fps), and the first 1 s of the GOP after it
    const clip = fixtureClip({ capture: 'cifSlow', fps: 10, gopFrames: 30, seconds: 4 });
    // (eight segments kept, as the window was before it followed windowSec)
    const { seg } = segmenter({ windowSegments: 7, windowSec: 600 });
    seg.tracks([clip.video]);
    const targets = new Set<number>();
    for (const u of looped(clip.units, 3, clip.durationMs)) {
      seg.write(u);
      targets.add(seg.targetDuration);
    }
    assert.deepEqual([...targets], [2], 'the declared target stays');
    // keyframes at 0 and 3 s of each 4 s pass (a 3 s GOP, then a 1 s one)
    for (const s of seg.segments) assert.ok(Math.round(s.duration) <= 2, `segment of ${s.duration} s`);
    const starts = seg.segments.map((s) => s.parts[0].independent);
    assert.ok(starts.includes(false), 'some segments start inside a GOP');
    assert.ok(starts.includes(true), 'the ones at a keyframe are independent');
    // the 3 s keyframe of each pass starts a segment (the 1 s GOP after it would overshoot), an independent one
    assert.equal(seg.segments.flatMap((s) => s.parts).filter((p) => p.independent).length, 3);
  });

  it('audio only: segments by time from any frame', () => {
    const { seg } = segmenter({ windowSegments: 7, windowSec: 600 });
    seg.tracks([{ kind: 'audio', codec: 'aac', sampleRate: 16000, channels: 1, config: Buffer.from([0x14, 0x08]) }]);
    for (let i = 0; i < 200; i++) seg.write(audioUnit({ codec: 'aac', dts: i * 64, timescale: 16000, duration: 1024, payload: Buffer.alloc(40, i) }));
    assert.ok(seg.segments.length >= 5);
    for (const s of seg.segments) assert.ok(s.duration >= 2 && s.duration < 2.1, `segment of ${s.duration}`);
  });

  it('holds no more than maxStreamBytes after any unit, dropping old segments (and an oversized one) and counting it', () => {
    const max = 256 * 1024;
    const clip = fixtureClip({ seconds: 2 });
    const { seg, drops } = segmenter({ maxStreamBytes: max });
    seg.tracks([clip.video]);
    let peak = 0;
    for (const u of looped(clip.units, 20, clip.durationMs)) {
      seg.write(u);
      peak = Math.max(peak, seg.bytes);
      assert.ok(seg.bytes <= max, `holds ${seg.bytes} bytes after the unit at ${u.dts} ms`);
    }
    assert.ok(peak > max / 2, `it did fill up (${peak})`);
    assert.ok(drops() > 0);
    // a GOP that never ends cannot grow without bound either
    const { seg: long, drops: longDrops } = segmenter({ maxStreamBytes: max });
    long.tracks([clip.video]);
    const oneKey = looped(clip.units, 20, clip.durationMs).map((u, i) => (i === 0 ? u : { ...u, keyframe: false }));
    for (const u of oneKey) {
      long.write(u);
      assert.ok(long.bytes <= max, `holds ${long.bytes} bytes in an endless GOP`);
    }
    assert.ok(longDrops() > 0);
  });

  it('with AAC that comes 200 ms after its video (as from the AAC stage), stays within maxStreamBytes too', () => {
    const max = 256 * 1024;
    const clip = fixtureClip({ seconds: 2 });
    const { seg } = segmenter({ maxStreamBytes: max, wantsAudioWithVideo: true });
    const aac = { kind: 'audio' as const, codec: 'aac' as const, sampleRate: 8000, channels: 1, config: Buffer.from([0x15, 0x88]) };
    seg.tracks([clip.video, aac]);
    const video = looped(clip.units, 10, clip.durationMs);
    let nextAudio = 0;
    for (const v of video) {
      // AAC frames of 128 ms, each delivered once the video is 200 ms past its end
      while ((nextAudio + 1) * 128 + 200 <= v.dts) {
        seg.write(audioUnit({ codec: 'aac', dts: nextAudio * 128, timescale: 8000, duration: 1024, payload: Buffer.alloc(200, nextAudio) }));
        nextAudio++;
      }
      seg.write(v);
      assert.ok(seg.bytes <= max, `holds ${seg.bytes} bytes after the unit at ${v.dts} ms`);
    }
    assert.ok(seg.segments.length > 0);
  });
});

describe('hls-out: the segmenter across configuration changes', () => {
  it('new parameter sets (another picture size) start a segment with EXT-X-DISCONTINUITY and a new init segment', () => {
    const a = fixtureClip({ seconds: 2 });
    const b = fixtureClip({ seconds: 2, capture: 'cif' });
    const { seg } = segmenter();
    seg.tracks([a.video]);
    for (const u of looped(a.units, 2, a.durationMs)) seg.write(u);
    seg.tracks([b.video]);
    for (const u of looped(b.units, 3, b.durationMs))
      seg.write({ ...u, dts: u.dts + 4000, pts: u.pts + 4000, dtsTicks: u.dtsTicks + 360_000, ptsTicks: u.ptsTicks + 360_000 });
    const versions = seg.segments.map((s) => `${s.init.version}${s.discontinuity ? 'd' : ''}`);
    assert.deepEqual(versions, ['1', '1', '2d', '2'], 'the first segment of the new size starts after a discontinuity, with init 2');
    assert.ok(seg.initOf(1)?.data && seg.initOf(2)?.data);
    assert.notDeepEqual(seg.initOf(1)!.data, seg.initOf(2)!.data);
  });
});
