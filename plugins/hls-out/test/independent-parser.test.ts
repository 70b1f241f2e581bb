/**
 * The playlists read by an independent parser, hls-parser (strict mode: it throws on what RFC 8216 forbids), over
 * several reloads of a live stream in each container: every segment within the target duration (EXTINF rounded,
 * RFC 8216 4.3.3.1), the target never changing, the media sequence never going back and segments numbered
 * consecutively, the version tag matching the features used (EXT-X-MAP in a media playlist: version 6 or more;
 * decimal EXTINF: 3 or more), LL-HLS parts within PART-TARGET, program date-times present.
 */
import assert from 'node:assert/strict';
import * as HLS from 'hls-parser';
import { testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { get, startHlsGateway, waitPlaylist } from './helpers';

HLS.setOptions({ strictMode: true });

function versionOf(text: string): number {
  const m = /^#EXT-X-VERSION:(\d+)$/m.exec(text);
  assert.ok(m, 'EXT-X-VERSION present');
  return Number(m[1]);
}

describe('hls-out: playlists read by an independent parser (hls-parser, strict)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const stops: Array<() => void> = [];
  before(async () => {
    gw = await startHlsGateway();
  });
  after(async () => {
    for (const s of stops) s();
    await gw?.stop();
  });

  for (const subFmt of ['fmp4', 'mpegts'] as const) {
    it(`${subFmt}: RFC 8216 rules hold over reloads`, async () => {
      const open = await gw.openStream({
        simNo: subFmt === 'fmp4' ? '13900000061' : '13900000062',
        chanId: 1,
        fmt: 1,
        ...(subFmt === 'mpegts' ? { extra: { subFmt } } : {}),
      });
      stops.push(gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true }).stop);
      await waitPlaylist(open.playUrl, (p) => p.segments.length >= 2);
      let prevBase = -1;
      let target = -1;
      let reloads = 0;
      let segmentsSeen = 0;
      for (let i = 0; i < 8; i++) {
        const r = await get(open.playUrl);
        assert.equal(r.status, 200);
        const p = HLS.parse(r.text);
        assert.equal(p.isMasterPlaylist, false);
        if (p.isMasterPlaylist) return;
        if (target < 0) target = p.targetDuration;
        assert.equal(p.targetDuration, target, 'EXT-X-TARGETDURATION never changes');
        const base = p.mediaSequenceBase ?? 0;
        assert.ok(base >= prevBase, `media sequence ${base} after ${prevBase}`);
        prevBase = base;
        const version = versionOf(r.text);
        if (subFmt === 'fmp4') {
          assert.ok(
            p.segments.filter((s) => s.uri).every((s) => s.map),
            'every fMP4 segment has its EXT-X-MAP',
          );
          assert.ok(version >= 6, `EXT-X-MAP needs version 6 or more, got ${version}`);
          assert.ok(p.partTargetDuration && p.partTargetDuration > 0, 'LL-HLS: PART-TARGET');
          assert.ok(p.lowLatencyCompatibility?.canBlockReload, 'LL-HLS: CAN-BLOCK-RELOAD');
        } else {
          assert.ok(version >= 3, `decimal EXTINF needs version 3 or more, got ${version}`);
        }
        p.segments.forEach((s, k) => {
          assert.equal(s.mediaSequenceNumber, base + k, 'segments numbered consecutively');
          if (s.uri) {
            segmentsSeen++;
            assert.ok(Math.round(s.duration) <= p.targetDuration, `segment ${s.mediaSequenceNumber}: ${s.duration} s within ${p.targetDuration}`);
            assert.ok(s.programDateTime instanceof Date, 'EXT-X-PROGRAM-DATE-TIME');
          }
          for (const part of s.parts ?? []) {
            if (part.hint) continue;
            assert.ok((part.duration ?? 0) <= (p.partTargetDuration ?? 0) + 0.001, `part of ${part.duration} s within PART-TARGET ${p.partTargetDuration}`);
          }
        });
        reloads++;
        await new Promise((res) => setTimeout(res, 400));
      }
      assert.equal(reloads, 8);
      assert.ok(segmentsSeen > 8);
    });
  }
});
