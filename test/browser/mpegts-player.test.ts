/**
 * A real browser plays the gateway's live streams: mpegts.js (the FLV-over-MSE player web front ends use) in
 * Debian's headless Chromium, driven by playwright-core. A terminal pushes an H.264 capture over TCP at real speed;
 * the page plays the WS-FLV play URL and the HTTP-FLV one, and what the <video> element shows is checked: the
 * capture's resolution, a clock that advances with the wall clock, frames decoded at the capture's rate, and no
 * mpegts.js error. A wrong token gets an error from mpegts.js and not one decoded frame.
 */
import assert from 'node:assert/strict';
import { runSimulator } from '../../plugins/jt1078-ingest/tools/simulator';
import { fixturePath } from '../support/paths';
import {
  CAPTURES,
  capture,
  closeReq,
  expectedFrom,
  httpUrlOf,
  metric,
  openLive,
  useE2eGateway,
  waitFor,
  wsUrlOf,
  type E2eGateway,
  type OpenResult,
} from '../e2e/helpers';
import { BrowserPlayer, within } from './page';

/** glaciall: H.264 Main, 352x288, ~25 fps, 174 s, video only (../shared/fixtures/README.md) */
const CAP = CAPTURES.find((c) => c.file === 'jt1078/glaciall-cif-h264-2013.bin')!;
/** seconds of playback watched per protocol (the player's clock must advance this far) */
const WATCH_S = 5;

function withParam(url: string, key: string, value: string): string {
  const u = new URL(url);
  u.searchParams.set(key, value);
  return u.toString();
}

/**
 * Stream times (ms from the first published frame) of the frames the ingest publishes for the capture: a player
 * that connects before the terminal starts gets them from the first one on, and mpegts.js starts its clock there.
 * (The capture's rate is not flat: ~16 fps over its first seconds, ~25 fps later.)
 */
function captureFrameTimes(): number[] {
  const dts = expectedFrom(capture(CAP.file).packets).videoDts;
  return dts.map((t) => t - dts[0]);
}
/** A terminal replaying the capture over TCP in real time until stopped. */
function realTimeTerminal(e: E2eGateway): { stop(): Promise<void> } {
  const ac = new AbortController();
  const run = runSimulator({ file: fixturePath(CAP.file), port: e.live2013, speed: 1, signal: ac.signal });
  return {
    async stop() {
      ac.abort();
      await within('the simulator to stop', 10_000, run);
    },
  };
}

describe('browser: mpegts.js in headless Chromium plays live streams', function () {
  this.timeout(60_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 });
  let bp: BrowserPlayer | undefined;
  const frameTimes = captureFrameTimes();
  const report: string[] = [];

  before(async function () {
    this.timeout(45_000);
    bp = await BrowserPlayer.start();
    // Debian's Chromium plays H.264 through its FFmpeg: if this build cannot, the test fails saying so
    assert.equal(
      await bp.h264Supported(),
      true,
      'this Chromium cannot decode H.264: MediaSource.isTypeSupported(\'video/mp4; codecs="avc1.42E01E"\') is false',
    );
    const features = await bp.mpegtsFeatures();
    assert.equal(features.mseLivePlayback, true, `mpegts.js: live FLV over MSE is not supported here: ${JSON.stringify(features)}`);
  });

  after(async () => {
    await bp?.close();
    bp = undefined;
    if (report.length) console.log(report.map((l) => `      ${l}`).join('\n'));
  });

  function browser(): BrowserPlayer {
    if (!bp) throw new Error('the browser did not start');
    return bp;
  }

  /** Waits for the request's closed notice, so the next test starts on a channel nobody holds. */
  async function release(open: OpenResult): Promise<void> {
    await closeReq(e.gw, open.reqId).catch(() => undefined);
    await waitFor('the request to close', () => e.notices.find((n) => n.payload.reqId === open.reqId && n.payload.act === 'closed'), 10_000);
  }

  for (const proto of ['ws-flv', 'http-flv'] as const) {
    it(`${proto}: plays the ${CAP.width}x${CAP.height} H.264 stream, its clock and decoded frames advance in real time, no error`, async () => {
      const b = browser();
      const open = await openLive(e.gw, CAP.sim, CAP.channel);
      const url = proto === 'ws-flv' ? wsUrlOf(open.playUrl) : httpUrlOf(open.playUrl);
      assert.match(url, proto === 'ws-flv' ? /^ws:\/\/127\.0\.0\.1:\d+\/live\// : /^http:\/\/127\.0\.0\.1:\d+\/live\//);
      const id = proto;
      let term: { stop(): Promise<void> } | undefined;
      try {
        // the player first, so it gets the stream from its first frame (and its clock maps onto the capture's)
        await b.play(id, url);
        term = realTimeTerminal(e);
        // the capture's first keyframe comes within its first GOP (2 s); then MSE needs a moment to start
        const s0 = await b.waitUntil(
          id,
          'the video to start playing (a decoded frame, its size known, the clock running)',
          (s) => s.errors.length > 0 || (s.videoWidth > 0 && s.totalVideoFrames > 0 && s.currentTime > 0 && !s.paused),
          20_000,
        );
        assert.deepEqual(s0.errors, [], 'mpegts.js reported no error while starting');
        const s1 = await b.waitUntil(
          id,
          `${WATCH_S} s of playback`,
          (s) => s.errors.length > 0 || s.mediaError !== 0 || s.currentTime >= s0.currentTime + WATCH_S,
          (WATCH_S + 10) * 1000,
        );

        // the gateway served this very browser over the protocol asked for
        const players = e.flv.playerStats().filter((p) => `/live/${p.stream}.flv` === new URL(url).pathname);
        assert.deepEqual(
          players.map((p) => p.protocol),
          [proto],
          'the gateway has one player of the stream, over the protocol the page used',
        );

        assert.deepEqual(s1.errors, [], 'mpegts.js reported no error');
        assert.equal(s1.mediaError, 0, 'the video element has no MediaError');
        assert.equal(`${s1.videoWidth}x${s1.videoHeight}`, `${CAP.width}x${CAP.height}`, "the decoded picture has the capture's resolution");
        assert.equal(s1.mediaInfo?.videoCodec?.startsWith('avc1.'), true, `mpegts.js saw H.264 (${s1.mediaInfo?.videoCodec})`);
        assert.equal(`${s1.mediaInfo?.width}x${s1.mediaInfo?.height}`, `${CAP.width}x${CAP.height}`, 'mpegts.js read the resolution from the SPS');

        const played = s1.currentTime - s0.currentTime;
        const wall = (s1.at - s0.at) / 1000;
        const decoded = s1.totalVideoFrames - s0.totalVideoFrames;
        assert.ok(played >= 2, `currentTime advanced by ${played.toFixed(2)} s (>= 2)`);
        // the stream comes in real time: the player keeps up with the wall clock, it does not stall or run away
        assert.ok(played / wall > 0.75 && played / wall < 1.25, `played ${played.toFixed(2)} s in ${wall.toFixed(2)} s of wall time`);
        // frames decoded while the clock advanced, against the frames the capture holds for that stretch of its
        // timeline, less 15% for frames still in the decoder queue at either end of the window (a stalled,
        // keyframe-only or frame-dropping decode would be far below: a GOP is 2 s, ~32-50 frames)
        const inWindow = frameTimes.filter((t) => t >= s0.currentTime * 1000 && t < s1.currentTime * 1000).length;
        const minFrames = Math.floor(0.85 * inWindow);
        assert.ok(
          decoded >= minFrames,
          `${decoded} frames decoded over ${played.toFixed(2)} s of playback (>= ${minFrames}: the capture holds ${inWindow} there)`,
        );
        assert.ok(s1.totalVideoFrames >= minFrames, `${s1.totalVideoFrames} frames decoded in all`);
        report.push(
          `${proto}: ${s1.videoWidth}x${s1.videoHeight} ${s1.mediaInfo?.videoCodec}; currentTime ${s0.currentTime.toFixed(2)} -> ${s1.currentTime.toFixed(2)} s ` +
            `in ${wall.toFixed(2)} s wall; frames ${s0.totalVideoFrames} -> ${s1.totalVideoFrames} (+${decoded}; the capture holds ${inWindow} there, >= ${minFrames} needed), ` +
            `dropped ${s1.droppedVideoFrames}, buffered to ${s1.bufferedEnd.toFixed(2)} s`,
        );
      } finally {
        await b.stopPlayer(id).catch(() => undefined);
        await term?.stop();
        await release(open);
      }
    });
  }

  it('a wrong token: mpegts.js reports the refusal (HTTP 401 / WS close 4401) and decodes nothing, while the right token plays', async () => {
    const b = browser();
    const open = await openLive(e.gw, CAP.sim, CAP.channel);
    const refusedBefore = await metric(e.gw, 'gw_flv_out_plays_refused_total');
    const term = realTimeTerminal(e);
    try {
      // the stream is live, so nothing below is "no media yet": a player with the right token gets frames now
      await b.play('good', httpUrlOf(open.playUrl));
      await b.play('bad-http', withParam(httpUrlOf(open.playUrl), 'token', 'tok-e2e-wrong'));
      await b.play('bad-ws', withParam(wsUrlOf(open.playUrl), 'token', 'tok-e2e-wrong'));
      const badHttp = await b.waitUntil('bad-http', 'mpegts.js to report the refused HTTP-FLV play', (s) => s.errors.length > 0, 10_000);
      assert.deepEqual(
        badHttp.errors.map((x) => [x.type, x.detail, (x.info as { code?: number } | null)?.code]),
        [['NetworkError', 'HttpStatusCodeInvalid', 401]],
        'HTTP-FLV: a NetworkError with status 401',
      );
      // mpegts.js's WebSocket loader takes any close for the end of the stream (it reports LOADING_COMPLETE, not
      // an error, and never shows the code): the page's own WebSocket wrapper reads the close code
      const badWs = await b.waitUntil(
        'bad-ws',
        'the refused WS-FLV play to end (close 4401, mpegts.js loading complete)',
        (s) => s.wsCloseCodes.length > 0 && (s.errors.length > 0 || s.events.includes('loading_complete')),
        10_000,
      );
      assert.deepEqual(badWs.wsCloseCodes, [4401], 'WS-FLV: the gateway closed the WebSocket with 4401');
      assert.deepEqual(badWs.errors, [], 'WS-FLV: mpegts.js itself raises no error for a closed WebSocket');
      // with nothing received, mpegts.js ends the MediaSource empty: the page sees the element fail
      await b.waitUntil('bad-ws', 'the video element to fail (MEDIA_ERR_SRC_NOT_SUPPORTED)', (s) => s.mediaError !== 0, 5_000);
      assert.equal((await b.snapshot('bad-ws')).mediaError, 4, 'WS-FLV: the video element fails with MEDIA_ERR_SRC_NOT_SUPPORTED');
      await b.waitUntil('good', 'the right token to play', (s) => s.errors.length > 0 || (s.totalVideoFrames > 25 && s.currentTime > 0.5), 20_000);
      // the good player has played half a second and more: were the refused ones fed, they would have frames too
      for (const id of ['bad-http', 'bad-ws']) {
        const s = await b.snapshot(id);
        assert.equal(s.totalVideoFrames, 0, `${id}: no frame decoded`);
        assert.equal(s.videoWidth, 0, `${id}: no picture`);
        assert.equal(s.currentTime, 0, `${id}: the clock never ran`);
        assert.equal(s.mediaInfo, undefined, `${id}: mpegts.js never saw the stream`);
        report.push(
          `${id}: errors ${JSON.stringify(s.errors)}, events ${JSON.stringify(s.events)}, WS close codes ${JSON.stringify(s.wsCloseCodes)}, video error ${s.mediaError}, frames ${s.totalVideoFrames}`,
        );
      }
      const good = await b.snapshot('good');
      assert.deepEqual(good.errors, [], 'the right token: no error');
      assert.equal(`${good.videoWidth}x${good.videoHeight}`, `${CAP.width}x${CAP.height}`);
      report.push(`good (same moment): frames ${good.totalVideoFrames}, currentTime ${good.currentTime.toFixed(2)} s`);
      assert.equal((await metric(e.gw, 'gw_flv_out_plays_refused_total')) - refusedBefore, 2, 'the gateway refused both plays');
    } finally {
      for (const id of ['good', 'bad-http', 'bad-ws']) await b.stopPlayer(id).catch(() => undefined);
      await term.stop();
      await release(open);
    }
  });
});
