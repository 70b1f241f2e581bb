/**
 * Live ingest to FLV playback, end to end, with every real capture: terminal (simulator over TCP) -> jt1078-ingest
 * -> media bus -> flv-out (its own FLV muxer and port) -> HTTP-FLV / WS-FLV player, decoded by ffprobe.
 * Also the same captures re-packed in the 2019 layout, pushed to the 2019 port and to the 2013 port.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { runSimulator } from '../../plugins/jt1078-ingest/tools/simulator';
import type { Jt1078Layout } from '../../plugins/jt1078-ingest/src/packet';
import { fixturePath } from '../support/paths';
import {
  CAPTURES,
  HttpFlvPlayer,
  WsFlvPlayer,
  capture,
  codedAudio,
  codedVideo,
  expectedFrom,
  ffprobe,
  framesFromFirstI,
  firstNonMonotonic,
  maxBackStep,
  metric,
  openLive,
  useE2eGateway,
  waitFor,
  wsUrlOf,
  type CaptureInfo,
} from './helpers';
import { parseFlv } from '../support/flv-reader';

describe('e2e: JT/T 1078 captures to HTTP-FLV / WS-FLV players', function () {
  this.timeout(60_000);
  // G.711 is carried for these players (ffprobe reads it); flv-out leaves it out by default, for browsers
  const e = useE2eGateway({ disconnectGraceMs: 200 }, { audioCodecs: ['aac', 'g711a', 'g711u'] });

  /** Everything a player of one whole capture must have got. */
  function checkPlayback(cap: CaptureInfo, buf: Buffer, what: string): void {
    const flv = parseFlv(buf);
    const want = expectedFrom(capture(cap.file).packets);
    const video = codedVideo(flv.tags);
    // the reference: the ingest's own assembler, cross-checked by counting M bits from the first I frame
    assert.equal(want.video, framesFromFirstI(capture(cap.file).packets), `${cap.file}: reference frame count`);
    assert.equal(video.length, want.video, `${what}: every frame from the first keyframe on reaches the player`);
    assert.equal(video[0].keyframe, true, `${what}: the player starts at a keyframe`);
    assert.equal(video.filter((t) => t.keyframe).length, want.keyframes, `${what}: keyframes`);
    assert.equal(firstNonMonotonic(video, true), -1, `${what}: video timestamps strictly increase`);
    assert.equal(firstNonMonotonic(codedAudio(flv.tags), true), -1, `${what}: audio timestamps strictly increase`);
    // audio and video interleave as the terminal sent them (gojt808 sends audio up to ~60 ms ahead of video)
    assert.ok(maxBackStep(flv.tags) <= 250, `${what}: tags go back by at most 250 ms across tracks (${maxBackStep(flv.tags)})`);
    assert.deepEqual(
      video.map((t) => t.timestamp),
      want.videoDts,
      `${what}: each frame keeps its place on the stream timeline`,
    );
    const audio = codedAudio(flv.tags);
    assert.equal(audio.length, want.audioAfterVideo, `${what}: audio units after the first keyframe`);
    const p = ffprobe(buf, 'flv');
    assert.equal(p.codec, 'h264');
    assert.equal(`${p.width}x${p.height}`, `${cap.width}x${cap.height}`, `${what}: resolution`);
    assert.equal(p.frames, want.video, `${what}: ffprobe decodes every frame`);
    assert.equal(p.errors, '', `${what}: without a decoder complaint`);
    if (cap.audio) assert.deepEqual(p.audio, { codec: 'pcm_alaw', sampleRate: 8000 }, `${what}: G.711A audio track`);
    else assert.equal(p.audio, undefined, `${what}: no audio track announced`);
  }

  /** Opens the channel, connects a player, replays the capture at full speed, returns what the player got. */
  async function playCapture(cap: CaptureInfo, o: { proto?: Jt1078Layout; port?: number; ws?: boolean } = {}): Promise<Buffer> {
    const open = await openLive(e.gw, cap.sim, cap.channel);
    let data: Buffer;
    if (o.ws) {
      const player = await WsFlvPlayer.connect(wsUrlOf(open.playUrl));
      await runSimulator({ file: fixturePath(cap.file), port: o.port ?? e.live2013, speed: 0, proto: o.proto });
      const code = await player.closed;
      assert.equal(code, 1000, 'the WS-FLV player is closed normally when the stream ends');
      data = player.data();
    } else {
      const player = await HttpFlvPlayer.connect(open.playUrl);
      assert.equal(player.status, 200);
      await sleep(30);
      assert.equal(player.bytes, 0, 'before any media the player is held open with nothing sent');
      assert.equal(player.isEnded, false);
      await runSimulator({ file: fixturePath(cap.file), port: o.port ?? e.live2013, speed: 0, proto: o.proto });
      // the terminal went and did not come back within the grace: the request closes and the player ends
      await player.ended;
      data = player.data();
    }
    const closed = await waitFor('closed notice', () => e.notices.find((n) => n.payload.reqId === open.reqId && n.payload.act === 'closed'));
    assert.equal(closed.payload.closeCause, 2, 'closed as termStrmClose after the disconnect grace');
    return data;
  }

  for (const cap of CAPTURES) {
    it(`${cap.file.replace('jt1078/', '')}: HTTP-FLV player gets every frame, ffprobe decodes ${cap.width}x${cap.height}`, async () => {
      const buf = await playCapture(cap);
      checkPlayback(cap, buf, 'HTTP-FLV');
    });
  }

  it('WS-FLV player (gojt808, video + G.711A) gets the same stream', async () => {
    const cap = CAPTURES[2];
    const buf = await playCapture(cap, { ws: true });
    checkPlayback(cap, buf, 'WS-FLV');
  });

  for (const cap of CAPTURES) {
    it(`${cap.file.replace('jt1078/', '')} re-packed as 2019 (10-byte SIM): to the 2019 port and to the 2013 port`, async () => {
      for (const [listener, port] of [
        ['live2019', e.live2019],
        ['live2013', e.live2013],
      ] as const) {
        const detected = () => metric(e.gw, 'gw_jt1078_ingest_layouts_detected_total', { listener, layout: '2019' });
        const before = await detected();
        checkPlayback(cap, await playCapture(cap, { proto: '2019', port }), `2019 layout on the ${listener} port`);
        assert.equal((await detected()) - before, 1, `the ${listener} listener detected the 2019 layout`);
      }
    });
  }
});
