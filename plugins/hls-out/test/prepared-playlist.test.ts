/**
 * The playlist prepared once per segmenter change (prepared-playlist.ts) against renderPlaylist, the reference:
 * byte for byte, for several queries, at every change the segmenter announces and after every unit it is given
 * (some changes, an eviction for memory or a segment started, are announced to no listener), across LL and not,
 * fMP4 and MPEG-TS, discontinuities, dates present or not, init versions changing, audio only, memory drops and a
 * close. And made once per version of the segmenter, not per request.
 */
import assert from 'node:assert/strict';
import { audioUnit, shiftUnit, type AccessUnit, type AudioTrackInfo, type TrackInfo } from '../../../plugin-sdk';
import { renderPlaylist } from '../src/playlist';
import { PreparedPlaylist, PreparedPlaylists } from '../src/prepared-playlist';
import { Segmenter, type Container, type SegmenterOptions } from '../src/segmenter';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { segmenterOptions } from './segmenter-options';

/** as the server makes them, and ones that would catch a join that is not plain (replacement patterns, non-ASCII) */
const QUERIES = ['?reqId=r-1&token=t1', '?reqId=a%20b&token=%24%26%241&via=keys', '', '?reqId=$&&token=$1$`', '?reqId=é€'];

const AAC: AudioTrackInfo = { kind: 'audio', codec: 'aac', sampleRate: 8000, channels: 1, config: Buffer.from([0x15, 0x88]) };

function segmenter(o: Partial<SegmenterOptions>): Segmenter {
  return new Segmenter(segmenterOptions(o));
}

/** the clip's units, `passes` times on one timeline from `fromMs` */
function looped(units: readonly AccessUnit[], passes: number, spanMs: number, fromMs = 0): AccessUnit[] {
  const out: AccessUnit[] = [];
  for (let p = 0; p < passes; p++) for (const u of units) out.push(shiftUnit(u, fromMs + p * spanMs));
  return out;
}

/** what happens to a segmenter: units, new tracks, a new publisher */
type Step = AccessUnit | { tracks: TrackInfo[] } | 'publisher';

interface Run {
  /** comparisons made */
  checks: number;
  prepares: number;
  /** segmenter versions seen at a comparison */
  versions: number;
  /** every line of every playlist seen (with the first query) */
  lines: Set<string>;
  /** a preload hint for the first part of a segment not begun (current undefined), seen */
  hintAtBoundary: boolean;
}

function run(o: Partial<SegmenterOptions>, lowLatency: boolean, steps: readonly Step[]): Run {
  const container: Container = o.container ?? 'fmp4';
  const seg = segmenter(o);
  let prepares = 0;
  const cache = new PreparedPlaylists(() => prepares++);
  const versions = new Set<number>();
  const r: Run = { checks: 0, prepares: 0, versions: 0, lines: new Set(), hintAtBoundary: false };
  const check = (when: string): void => {
    for (const q of QUERIES) {
      const want = renderPlaylist(seg, { container, lowLatency, query: q });
      const got = cache.of(seg, container, lowLatency).body(q);
      if (!got.equals(Buffer.from(want))) assert.equal(got.toString(), want, `${when}, query ${JSON.stringify(q)}`);
      if (q === QUERIES[0]) for (const l of want.split('\n')) r.lines.add(l);
    }
    // the same query twice: the same body, not made again
    const p = cache.of(seg, container, lowLatency);
    assert.equal(p.body(QUERIES[1]), p.body(QUERIES[1]));
    if (lowLatency && seg.hasMedia && !seg.current) r.hintAtBoundary = true;
    versions.add(seg.version);
    r.checks++;
  };
  seg.onChange(() => check('at a change'));
  steps.forEach((s, i) => {
    if (s === 'publisher') seg.publisherChanged();
    else if ('tracks' in s) seg.tracks(s.tracks);
    else seg.write(s);
    check(`after step ${i}`);
  });
  seg.close();
  check('closed');
  r.prepares = prepares;
  r.versions = versions.size;
  return r;
}

describe('hls-out: the prepared playlist is the rendered one, made once per segmenter change', () => {
  const clip = fixtureClip({ seconds: 2 });
  const video = looped(clip.units, 8, clip.durationMs);
  const steps: Step[] = [{ tracks: [clip.video] }, ...video];

  /** prepared once per version seen, and far fewer times than asked for */
  function once(r: Run): void {
    assert.equal(r.prepares, r.versions, 'one text per version of the segmenter');
    assert.ok(r.prepares * 3 < r.checks, `${r.prepares} made for ${r.checks} asked`);
  }

  function seen(r: Run, ...patterns: RegExp[]): void {
    for (const re of patterns)
      assert.ok(
        [...r.lines].some((l) => re.test(l)),
        `a line like ${re} seen`,
      );
  }

  it('fMP4, LL-HLS: parts, preload hints (one at a segment boundary), dates, a moving window', () => {
    const r = run({}, true, steps);
    once(r);
    assert.ok(r.hintAtBoundary, 'a state between a segment ended and the next begun was compared');
    seen(r, /^#EXT-X-PART:DURATION=[\d.]+,URI="part-\d+\.\d+\.m4s\?reqId=r-1&token=t1",INDEPENDENT=YES$/, /^#EXT-X-PROGRAM-DATE-TIME:20\d\d-/);
  });

  it('fMP4 without LL, and MPEG-TS', () => {
    const fmp4 = run({}, false, steps);
    const ts = run({ container: 'mpegts' }, false, steps);
    once(fmp4);
    once(ts);
    seen(ts, /^seg-\d+\.ts\?reqId=r-1&token=t1$/);
    assert.ok(![...fmp4.lines, ...ts.lines].some((l) => l.startsWith('#EXT-X-PART')));
  });

  it('discontinuities (a new publisher, new parameter sets) leaving the window, init versions changing', () => {
    const cif = fixtureClip({ seconds: 2, capture: 'cif' });
    const r = run({}, true, [
      { tracks: [clip.video] },
      ...looped(clip.units, 2, clip.durationMs),
      'publisher',
      ...looped(clip.units, 2, clip.durationMs, 4000),
      { tracks: [cif.video] },
      ...looped(cif.units, 6, cif.durationMs, 8000),
    ]);
    once(r);
    seen(r, /^#EXT-X-DISCONTINUITY$/, /^#EXT-X-DISCONTINUITY-SEQUENCE:[1-9]/, /^#EXT-X-MAP:URI="init-2\.mp4\?reqId=r-1&token=t1"$/);
  });

  it('dates missing for some segments; audio with a lagging AAC track; audio only', () => {
    const noDates = run({ wallClock: (d) => (d < 5000 ? undefined : 1_700_000_000_000 + d) }, true, steps);
    once(noDates);
    seen(noDates, /^#EXT-X-PROGRAM-DATE-TIME:/);
    assert.ok(!noDates.lines.has(`#EXT-X-PROGRAM-DATE-TIME:${new Date(1_700_000_000_000).toISOString()}`), 'the first segments have no date');
    const av: Step[] = [{ tracks: [clip.video, AAC] }];
    let next = 0;
    for (const v of looped(clip.units, 6, clip.durationMs)) {
      // AAC frames of 128 ms, each once the video is 200 ms past its end (as from the AAC stage)
      for (; (next + 1) * 128 + 200 <= v.dts; next++)
        av.push(audioUnit({ codec: 'aac', dts: next * 128, timescale: 8000, duration: 1024, payload: Buffer.alloc(200, next) }));
      av.push(v);
    }
    once(run({ wantsAudioWithVideo: true, audioWaitMs: 500 }, true, av));
    const audio: Step[] = [{ tracks: [{ ...AAC, sampleRate: 16000 }] }];
    for (let i = 0; i < 300; i++) audio.push(audioUnit({ codec: 'aac', dts: i * 64, timescale: 16000, duration: 1024, payload: Buffer.alloc(40, i) }));
    const a = run({}, true, audio);
    once(a);
    seen(a, /^#EXT-X-INDEPENDENT-SEGMENTS$/);
  });

  it('memory drops: old segments evicted for memory (no listener hears of it) and a GOP too long dropped', () => {
    const big = run({ maxStreamBytes: 256 * 1024 }, true, steps);
    once(big);
    const endless = [{ tracks: [clip.video] }, ...video.map((u, i) => (i === 0 ? u : { ...u, keyframe: false }))];
    once(run({ maxStreamBytes: 256 * 1024 }, true, endless));
  });

  it('a body is the pieces with the query between them, whatever the query', () => {
    const seg = segmenter({});
    seg.tracks([clip.video]);
    for (const u of looped(clip.units, 3, clip.durationMs)) seg.write(u);
    const p = PreparedPlaylist.prepare(seg, 'fmp4', true);
    for (const q of [...QUERIES, '?x'.repeat(3000)]) {
      assert.ok(p.body(q).equals(Buffer.from(renderPlaylist(seg, { container: 'fmp4', lowLatency: true, query: q }))), q.slice(0, 40));
    }
  });
});
