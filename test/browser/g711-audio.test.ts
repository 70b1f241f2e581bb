/**
 * G.711A audio, the usual JT/T 1078 terminal audio, in front of a browser player. FLV can carry G.711 and ffmpeg/VLC
 * play it, but mpegts.js (like flv.js) decodes only AAC and MP3: it raises an error for every G.711 tag and, told by
 * the FLV that audio is coming, never starts the video. So flv-out leaves G.711 out by default (`audioCodecs`), and a
 * site that carries it for other players needs front ends that tell mpegts.js `hasAudio: false` (they learn the codec
 * from /strm/status or the ready notice's `ac`). Both checked with the gojt808 capture (H.264 720x576 + G.711A).
 */
import assert from 'node:assert/strict';
import { runSimulator } from '../../plugins/jt1078-ingest/tools/simulator';
import { fixturePath } from '../support/paths';
import { CAPTURES, closeReq, httpUrlOf, metric, openLive, statusOf, useE2eGateway, waitFor, wsUrlOf, type E2eGateway, type OpenResult } from '../e2e/helpers';
import { BrowserPlayer, within, type PlayerSnapshot } from './page';

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;
const UNSUPPORTED_G711A = 'Flv: Unsupported audio codec idx: 7';

/** The capture (about 4 s) replayed in real time, looped, until stopped. */
function loopingTerminal(e: E2eGateway): { stop(): Promise<void> } {
  const ac = new AbortController();
  const run = runSimulator({ file: fixturePath(CAP.file), port: e.live2013, speed: 1, loop: true, signal: ac.signal });
  return {
    async stop() {
      ac.abort();
      await within('the simulator to stop', 10_000, run);
    },
  };
}

async function release(e: E2eGateway, open: OpenResult): Promise<void> {
  await closeReq(e.gw, open.reqId).catch(() => undefined);
  await waitFor('the request to close', () => e.notices.find((n) => n.payload.reqId === open.reqId && n.payload.act === 'closed'), 10_000);
}

/** Plays until the clock has run `seconds` past the first decoded picture; returns the first and last snapshots. */
async function watch(b: BrowserPlayer, id: string, seconds: number): Promise<[PlayerSnapshot, PlayerSnapshot]> {
  const s0 = await b.waitUntil(
    id,
    'the video to start playing',
    (s) => s.mediaError !== 0 || (s.videoWidth > 0 && s.totalVideoFrames > 0 && s.currentTime > 0),
    20_000,
  );
  const s1 = await b.waitUntil(id, `${seconds} s of playback`, (s) => s.mediaError !== 0 || s.currentTime >= s0.currentTime + seconds, (seconds + 10) * 1000);
  return [s0, s1];
}

function assertVideoPlayed(s0: PlayerSnapshot, s1: PlayerSnapshot, what: string): void {
  assert.equal(s1.mediaError, 0, `${what}: the video element has no MediaError`);
  // the SPS's sample aspect ratio (64:45) makes Chromium show 720x576 as 1024x576: the coded size is mpegts.js's
  assert.equal(`${s1.mediaInfo?.width}x${s1.mediaInfo?.height}`, `${CAP.width}x${CAP.height}`, `${what}: the capture's coded size`);
  assert.equal(s1.videoHeight, CAP.height, `${what}: a picture of the capture's height`);
  assert.ok(s1.currentTime - s0.currentTime >= 3, `${what}: the clock ran ${(s1.currentTime - s0.currentTime).toFixed(2)} s`);
  // the capture is ~25 fps: half that rate over the window rules out a stalled or keyframe-only decode
  const decoded = s1.totalVideoFrames - s0.totalVideoFrames;
  assert.ok(decoded >= 12 * (s1.currentTime - s0.currentTime), `${what}: ${decoded} frames decoded`);
}

describe('browser: G.711A audio and mpegts.js', function () {
  this.timeout(60_000);
  let bp: BrowserPlayer | undefined;
  const browser = (): BrowserPlayer => {
    if (!bp) throw new Error('the browser did not start');
    return bp;
  };
  before(async function () {
    this.timeout(45_000);
    bp = await BrowserPlayer.start();
  });
  after(async () => {
    await bp?.close();
    bp = undefined;
  });

  describe("G.711A carried in the FLV (flv-out audioCodecs: ['aac', 'g711a', 'g711u'])", () => {
    const e = useE2eGateway({ disconnectGraceMs: 200 }, { audioCodecs: ['aac', 'g711a', 'g711u'] });

    it('mpegts.js shows nothing and reports CodecUnsupported, unless the front end, knowing the codec, says hasAudio: false', async () => {
      const b = browser();
      const open = await openLive(e.gw, CAP.sim, CAP.channel);
      const term = loopingTerminal(e);
      try {
        // what a front end reads to choose (the ready notice's ac names it too when audio came before the first keyframe)
        const codecs = await waitFor(
          'the audio codec in /strm/status',
          async () => {
            const st = await statusOf(e.gw, open.reqId);
            const list = (st?.codecs ?? []) as Array<{ kind: string; codec: string }>;
            return list.some((c) => c.kind === 'audio') ? list : undefined;
          },
          10_000,
        );
        assert.deepEqual(codecs.map((c) => `${c.kind}:${c.codec}`).sort(), ['audio:g711a', 'video:h264']);
        await b.play('plain', wsUrlOf(open.playUrl));
        await b.play('no-audio', wsUrlOf(open.playUrl), { hasAudio: false });
        const [n0, n1] = await watch(b, 'no-audio', 3);
        assert.deepEqual(n1.errors, [], 'with hasAudio: false, mpegts.js reports nothing');
        assertVideoPlayed(n0, n1, 'with hasAudio: false');
        // the plain player got the same bytes all along: its demuxer waits for audio it cannot decode
        const p = await b.snapshot('plain');
        assert.ok(p.errors.length > 0, 'mpegts.js reports the G.711A tags');
        assert.deepEqual(
          [...new Set(p.errors.map((x) => `${x.type}/${x.detail}/${String(x.info)}`))],
          [`MediaError/CodecUnsupported/${UNSUPPORTED_G711A}`],
          'and nothing else',
        );
        assert.equal(p.totalVideoFrames, 0, 'without the hint, not one video frame is decoded');
        assert.equal(p.videoWidth, 0, 'and no picture is shown');
      } finally {
        for (const id of ['plain', 'no-audio'])
          await browser()
            .stopPlayer(id)
            .catch(() => undefined);
        await term.stop();
        await release(e, open);
      }
    });
  });

  describe("flv-out's default (audioCodecs: ['aac']): G.711 left out of the FLV", () => {
    const e = useE2eGateway({ disconnectGraceMs: 200 });

    it('mpegts.js plays the video over WS-FLV and HTTP-FLV with no error and sees no audio track', async () => {
      const b = browser();
      const open = await openLive(e.gw, CAP.sim, CAP.channel);
      const term = loopingTerminal(e);
      try {
        await b.play('ws', wsUrlOf(open.playUrl));
        await b.play('http', httpUrlOf(open.playUrl));
        for (const id of ['ws', 'http']) {
          const [s0, s1] = await watch(b, id, 3);
          assert.deepEqual(s1.errors, [], `${id}: mpegts.js reports nothing`);
          assert.equal(s1.mediaInfo?.hasAudio, false, `${id}: mpegts.js sees a video-only stream`);
          assertVideoPlayed(s0, s1, id);
        }
        assert.ok((await metric(e.gw, 'gw_flv_out_audio_skipped_total')) > 0, 'the left-out G.711A units are counted');
      } finally {
        for (const id of ['ws', 'http'])
          await browser()
            .stopPlayer(id)
            .catch(() => undefined);
        await term.stop();
        await release(e, open);
      }
    });
  });
});
