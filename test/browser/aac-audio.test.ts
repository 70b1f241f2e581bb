/**
 * Terminal audio heard in a browser: the gojt808 capture (H.264 720x576 + G.711A) with its audio replaced by a
 * continuous 1 kHz tone, pushed over TCP in real time (looped), through jt1078-ingest + audio-aac + flv-out with
 * their defaults (AAC-LC 8 kHz mono for FLV players), played by mpegts.js in headless Chromium over WS-FLV and
 * HTTP-FLV with audio on. The video must play as in the other browser tests, the element's audio decoder must take
 * bytes all along, and the sound, taken off the element through Web Audio, must be the terminal's tone at its
 * frequency and level: so the AAC is decoded, at the right rate, and played. Headless Chromium has no sound card
 * here: it runs with its fake audio output (--disable-audio-output, see page.ts), which plays on a real-time clock.
 *
 * mpegts.js tells Chromium's MediaSource that AAC under 24 kHz is HE-AAC ('mp4a.40.5'; for 8 kHz, an SBR extension
 * at 16 kHz: _parseAACAudioSpecificConfig in its flv-demuxer), though the stream is AAC-LC; the test checks that this
 * plays too: a decoder running the stream at twice or half its rate would put the tone at 2 kHz or 500 Hz.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { linearToAlaw } from '../../plugin-sdk/testkit';
import { runSimulator } from '../../plugins/jt1078-ingest/tools/simulator';
import { scratchDir } from '../support/paths';
import {
  CAPTURES,
  capture,
  closeReq,
  encodeOne,
  httpUrlOf,
  metric,
  openLive,
  useE2eGateway,
  waitFor,
  wsUrlOf,
  type E2eGateway,
  type OpenResult,
} from '../e2e/helpers';
import { BrowserPlayer, within, type AudioSnapshot, type PlayerSnapshot } from './page';

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;
const TONE_HZ = 1000;
/** about -8.7 dBFS: loud, and far from A-law's clipping */
const TONE_AMPLITUDE = 12000;
/** the tone's RMS, full scale 1: what a listener must hear if nothing on the way changes its level */
const TONE_RMS = TONE_AMPLITUDE / 32768 / Math.SQRT2;
/** seconds of playback watched per protocol */
const WATCH_S = 4;
/** the analyser's window: 32768 samples at the context's rate (0.74 s, bins of 1.35 Hz at the 44.1 kHz measured) */
const FFT_SIZE = 32768;
/** where the tone is searched for: the band the terminal's 8 kHz audio can carry */
const BAND: [number, number] = [50, 4000];

/**
 * The capture with every audio packet's G.711A replaced by the tone, as a capture file the simulator replays. The
 * tone's phase runs on from packet to packet, and from one loop pass to the next: a pass holds a whole number of
 * its periods (8 samples at 8 kHz), and so does the 20 ms the simulator's loop leaves between passes (which the
 * AAC stage fills with silence).
 *
 * The packets go in timestamp order (a stable sort: each track keeps its own order; audio moves at most 150 ms
 * against the video). As captured, audio and video runs alternate with their clocks up to 150 ms apart, and the
 * simulator paces by the sum of forward timestamp steps: it sends this capture's 4.26 s in 6.87 s, then, looping
 * on a 4.3 s period, bursts the next pass's first ~2.6 s to catch up. A player fed that stalls again and again in
 * its first seconds (measured: 4.5 s played in 7.4 s of wall time), which is the sender's doing, not the gateway's.
 * The sequence numbers are then given again in the new order: the terminal counts a channel's audio and video
 * packets on one counter, and the ingest reads the jumps a reordering leaves in it as loss (measured: only the
 * keyframes got through).
 */
function toneCaptureFile(dir: string): string {
  const cap = capture(CAP.file);
  const seq0 = cap.packets[0]!.seq;
  let n = 0;
  const inTimeOrder = [...cap.packets].sort((a, b) => a.timestamp - b.timestamp).map((p, i) => ({ ...p, seq: (seq0 + i) & 0xffff }));
  const out = inTimeOrder.map((p) => {
    if (p.dataType !== 3) return encodeOne(p);
    const body = Buffer.alloc(p.body.length);
    for (let i = 0; i < body.length; i++, n++) body[i] = linearToAlaw(Math.round(TONE_AMPLITUDE * Math.sin((2 * Math.PI * TONE_HZ * n) / 8000)));
    return encodeOne({ ...p, body });
  });
  assert.ok(n > 0 && n % (8000 / TONE_HZ) === 0, `the capture's audio holds whole periods of the tone (${n} samples)`);
  const file = path.join(dir, 'gojt808-tone.bin');
  fs.writeFileSync(file, Buffer.concat(out));
  return file;
}

function loopingTerminal(e: E2eGateway, file: string): { stop(): Promise<void> } {
  const ac = new AbortController();
  const run = runSimulator({ file, port: e.live2013, speed: 1, loop: true, signal: ac.signal });
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

const fmt = (a: AudioSnapshot): string =>
  `peak ${a.peakHz.toFixed(1)} Hz at ${a.peakDb.toFixed(1)} dB, next ${a.nextDb.toFixed(1)} dB at ${a.nextHz.toFixed(0)} Hz, floor ${a.floorDb.toFixed(1)} dB, rms ${a.rms.toFixed(3)}`;

/** a window's level against the tone the terminal sent, in dB */
const levelDb = (a: AudioSnapshot): number => 20 * Math.log10(a.rms / TONE_RMS);

describe("browser: AAC audio (from the terminal's G.711A) heard through mpegts.js in headless Chromium", function () {
  this.timeout(60_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'audio-aac' }]);
  let bp: BrowserPlayer | undefined;
  let dir: string | undefined;
  let toneFile = '';
  const report: string[] = [];

  before(async function () {
    this.timeout(45_000);
    dir = scratchDir('browser-aac-audio');
    toneFile = toneCaptureFile(dir);
    bp = await BrowserPlayer.start();
    assert.equal(await bp.h264Supported(), true, 'this Chromium cannot decode H.264 (MediaSource.isTypeSupported avc1.42E01E is false)');
    // what mpegts.js will ask of MediaSource for 8 kHz AAC in Chromium, and the AAC-LC the stream really is: if this
    // build cannot decode them, the test fails here saying so
    const types = ['audio/mp4; codecs="mp4a.40.5"', 'audio/mp4; codecs="mp4a.40.2"'];
    const supported = await within(
      'MediaSource.isTypeSupported in the page',
      5_000,
      bp.page.evaluate((ts) => ts.map((t) => (globalThis as any).MediaSource.isTypeSupported(t) as boolean), types),
    );
    types.forEach((t, i) => assert.equal(supported[i], true, `this Chromium cannot decode AAC: MediaSource.isTypeSupported('${t}') is false`));
  });

  after(async () => {
    await bp?.close();
    bp = undefined;
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    if (report.length) console.log(report.map((l) => `      ${l}`).join('\n'));
  });

  function browser(): BrowserPlayer {
    if (!bp) throw new Error('the browser did not start');
    return bp;
  }

  for (const proto of ['ws-flv', 'http-flv'] as const) {
    it(`${proto}: video plays and the terminal's ${TONE_HZ} Hz tone comes out of the element at ${TONE_HZ} Hz`, async () => {
      const b = browser();
      const open = await openLive(e.gw, CAP.sim, CAP.channel);
      const url = proto === 'ws-flv' ? wsUrlOf(open.playUrl) : httpUrlOf(open.playUrl);
      const id = proto;
      const framesOutBefore = await metric(e.gw, 'gw_audio_aac_frames_out_total');
      let term: { stop(): Promise<void> } | undefined;
      try {
        await b.play(id, url, { hasAudio: true });
        const ctx = await b.listen(id, FFT_SIZE);
        assert.equal(ctx.state, 'running', "the page's AudioContext runs (headless, without a sound card)");
        term = loopingTerminal(e, toneFile);

        const s0 = await b.waitUntil(
          id,
          'the video to start playing',
          (s) => s.errors.length > 0 || s.mediaError !== 0 || (s.videoWidth > 0 && s.totalVideoFrames > 0 && s.currentTime > 0 && !s.paused),
          20_000,
        );
        assert.deepEqual(s0.errors, [], 'mpegts.js reported no error while starting');
        const a0 = await b.hear(id, BAND);
        // the sound, read through the watch: each reading a window of its own
        const heard: AudioSnapshot[] = [];
        let s1: PlayerSnapshot = s0;
        for (;;) {
          await new Promise((r) => setTimeout(r, 600));
          heard.push(await b.hear(id, BAND));
          s1 = await b.snapshot(id);
          if (s1.errors.length > 0 || s1.mediaError !== 0 || s1.currentTime >= s0.currentTime + WATCH_S) break;
          if (s1.at - s0.at > (WATCH_S + 10) * 1000)
            assert.fail(`${WATCH_S} s of playback did not come in ${WATCH_S + 10} s: ${JSON.stringify(s1)}; page console: ${b.console.slice(-20).join(' | ')}`);
        }
        const a1 = heard[heard.length - 1]!;

        assert.deepEqual(s1.errors, [], 'mpegts.js reported no error');
        assert.equal(s1.mediaError, 0, 'the video element has no MediaError');
        const players = e.flv.playerStats().filter((p) => `/live/${p.stream}.flv` === new URL(url).pathname);
        assert.deepEqual(
          players.map((p) => p.protocol),
          [proto],
          'the gateway has one player of the stream, over the protocol the page used',
        );

        // the video, as the other browser tests check it
        assert.equal(`${s1.mediaInfo?.width}x${s1.mediaInfo?.height}`, `${CAP.width}x${CAP.height}`, "mpegts.js read the capture's coded size");
        assert.equal(s1.videoHeight, CAP.height, "a picture of the capture's height (Chromium widens it by the SPS's 64:45 aspect)");
        const played = s1.currentTime - s0.currentTime;
        const wall = (s1.at - s0.at) / 1000;
        assert.ok(played >= 3, `currentTime advanced by ${played.toFixed(2)} s`);
        assert.ok(played / wall > 0.75 && played / wall < 1.25, `played ${played.toFixed(2)} s in ${wall.toFixed(2)} s of wall time`);
        const decoded = s1.totalVideoFrames - s0.totalVideoFrames;
        // the capture is ~25 fps: half that rules out a stalled or keyframe-only decode
        assert.ok(decoded >= 12 * played, `${decoded} video frames decoded over ${played.toFixed(2)} s`);

        // the audio: what mpegts.js made of the stream, and the element's decoder taking it all along
        assert.equal(s1.mediaInfo?.hasAudio, true, 'mpegts.js sees an audio track');
        assert.deepEqual(
          [a1.audioCodec, a1.audioSampleRate, a1.audioChannelCount],
          ['mp4a.40.2', 8000, 1],
          'AAC-LC 8 kHz mono, as the AAC stage makes it by default',
        );
        const audioBuffers = a1.sourceBufferTypes.filter((t) => t.startsWith('audio/'));
        assert.deepEqual(audioBuffers, ['audio/mp4;codecs=mp4a.40.5'], 'mpegts.js has Chromium decode it as HE-AAC (its rewrite for rates under 24 kHz)');
        assert.equal(a1.muted, false, 'the element is not muted');
        const bytes = a1.decodedAudioBytes - a0.decodedAudioBytes;
        const audioSeconds = (a1.at - a0.at) / 1000;
        // 24 kbit/s is the stage's target; a tone is easy to code, so the floor is well under it, and a decoder that
        // stopped after the first frames would be far below it
        assert.ok(bytes / audioSeconds > 500, `the element decoded ${bytes} bytes of audio in ${audioSeconds.toFixed(2)} s`);
        assert.ok(
          heard.every((a, i) => i === 0 || a.decodedAudioBytes > heard[i - 1]!.decodedAudioBytes),
          `audio decoded at every reading: ${heard.map((a) => a.decodedAudioBytes).join(', ')}`,
        );
        assert.ok(a1.contextTime - a0.contextTime > 0.75 * audioSeconds, 'the AudioContext rendered all along');

        // the sound: the tone, at its frequency, far above anything else in the band, at every reading
        const tolerance = 2 * a1.binHz;
        for (const [i, a] of heard.entries()) {
          const what = `reading ${i + 1}/${heard.length} (${fmt(a)})`;
          assert.ok(a.rms > 0.05, `${what}: the element sounds`);
          assert.ok(
            Math.abs(a.peakHz - TONE_HZ) <= tolerance,
            `${what}: the strongest component is ${TONE_HZ} Hz within ${tolerance.toFixed(1)} Hz (two bins)`,
          );
          // measured: 49 dB (the next is at 3 kHz, an odd harmonic as A-law's quantisation of the tone makes); noise or a
          // garbled decode comes far closer
          assert.ok(a.peakDb - a.nextDb >= 40, `${what}: the tone stands 40 dB above anything else in ${BAND[0]}-${BAND[1]} Hz`);
          // the first window (FFT_SIZE samples, ~0.7 s) reaches back to before the element started playing. A gap in
          // Chromium's own playout on a loaded machine dents one window (seen: -1.93 dB, with a side tone at 947 Hz from
          // the cut), so a window may be 3 dB off; the chain's gain is the windows' median, held to 1.5 dB below
          if (i > 0) {
            const db = levelDb(a);
            assert.ok(Math.abs(db) <= 3, `${what}: the tone's level as the terminal sent it (${db.toFixed(2)} dB off, within 3)`);
          }
        }
        const levels = heard.slice(1).map(levelDb);
        const median = levels.sort((x, y) => x - y)[levels.length >> 1]!;
        assert.ok(Math.abs(median) <= 1.5, `the tone's level, the median of ${levels.length} windows, is ${median.toFixed(2)} dB off (within 1.5)`);
        assert.ok((await metric(e.gw, 'gw_audio_aac_frames_out_total')) > framesOutBefore, "the gateway's AAC stage made the frames");

        const peaks = heard.map((a) => a.peakHz);
        report.push(
          `${proto}: video ${s1.videoWidth}x${s1.videoHeight} (coded ${s1.mediaInfo?.width}x${s1.mediaInfo?.height}) ${s1.mediaInfo?.videoCodec}, ` +
            `currentTime ${s0.currentTime.toFixed(2)} -> ${s1.currentTime.toFixed(2)} s in ${wall.toFixed(2)} s wall, frames +${decoded}`,
        );
        report.push(
          `${proto}: audio ${a1.audioCodec} ${a1.audioSampleRate} Hz x${a1.audioChannelCount}, SourceBuffers ${a1.sourceBufferTypes.join(' + ')}; decoded bytes ${a0.decodedAudioBytes} -> ` +
            `${a1.decodedAudioBytes} (+${bytes} in ${audioSeconds.toFixed(2)} s, ${((8 * bytes) / audioSeconds / 1000).toFixed(1)} kbit/s); ` +
            `AudioContext ${ctx.sampleRate} Hz, bins ${a1.binHz.toFixed(2)} Hz`,
        );
        report.push(
          `${proto}: ${heard.length} readings, peak ${Math.min(...peaks).toFixed(2)}-${Math.max(...peaks).toFixed(2)} Hz; last: ${fmt(a1)} ` +
            `(the terminal's tone: rms ${TONE_RMS.toFixed(3)})`,
        );
      } finally {
        await b.stopPlayer(id).catch(() => undefined);
        await term?.stop();
        await release(e, open);
      }
    });
  }
});
