/**
 * A terminal that drops its connection and comes back within the disconnect grace: the stream, the request and
 * the player carry on, on one continuous timeline. One that does not come back: the request closes with
 * closeCause 2 (termStrmClose) and the player ends.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  HttpFlvPlayer,
  TcpTerminal,
  capture,
  codedVideo,
  encodeCapture,
  expectedFrom,
  ffprobe,
  firstNonMonotonic,
  metric,
  openLive,
  useE2eGateway,
  statusOf,
  waitFor,
} from './helpers';
import { parseFlv } from '../support/flv-reader';

const GRACE_MS = 2000;

describe('e2e: terminal disconnect and reconnect', function () {
  this.timeout(30_000);
  const e = useE2eGateway({ disconnectGraceMs: GRACE_MS });

  it('reconnect within the grace: the player continues, timestamps monotonic across; then no reconnect: closeCause 2', async () => {
    const cap = capture('jt1078/glaciall-cif-h264-2013.bin');
    // cut between two frames in the middle of a GOP, so the second connection starts on P frames
    let split = 2000;
    while (!(cap.packets[split - 1].marker && cap.packets[split].dataType === 1)) split++;
    const first = cap.packets.slice(0, split);
    const second = cap.packets.slice(split);
    const want1 = expectedFrom(first);
    const want2 = expectedFrom(second);
    assert.ok(want1.video > 1000 && want2.video > 1000);
    const bufs = encodeCapture(cap.packets);

    const open = await openLive(e.gw, '013800138000', 1);
    const player = await HttpFlvPlayer.connect(open.playUrl);

    const a = await TcpTerminal.connect(e.live2013);
    await a.send(bufs.slice(0, split));
    await a.end();
    await waitFor("the first connection's frames", () => player.videoFrames() === want1.video);
    await sleep(400);
    assert.equal(player.isEnded, false, 'the player is held through the grace');
    assert.ok(await statusOf(e.gw, open.reqId), 'the request is still open');
    assert.equal(
      e.notices.some((n) => n.payload.reqId === open.reqId && n.payload.act === 'closed'),
      false,
    );

    const b = await TcpTerminal.connect(e.live2013);
    await b.send(bufs.slice(split));
    await b.end();
    const ended = Date.now();
    await player.ended;
    assert.ok(player.endedAt - ended >= GRACE_MS - 100, 'the stream stayed open through the second grace');
    const closed = e.notices.find((n) => n.payload.reqId === open.reqId && n.payload.act === 'closed');
    assert.ok(closed, 'a closed notice');
    assert.equal(closed.payload.closeCause, 2);
    assert.equal(closed.payload.closeReason, 'termStrmClose');
    assert.equal(await statusOf(e.gw, open.reqId), undefined);
    assert.equal(await metric(e.gw, 'gw_jt1078_ingest_reconnects_total'), 1);
    assert.equal(await metric(e.gw, 'gw_jt1078_ingest_disconnects_total'), 1);

    const flv = parseFlv(player.data());
    const video = codedVideo(flv.tags);
    assert.equal(video.length, want1.video + want2.video, "both connections' frames, the second from its first keyframe");
    assert.equal(firstNonMonotonic(video, true), -1, 'timestamps strictly increase across the reconnect');
    const resumed = video[want1.video];
    assert.equal(resumed.keyframe, true, 'the second connection starts at a keyframe');
    // the bus continues the timeline: the first frame after the reconnect follows the last one by 20 ms
    const last1 = want1.videoDts[want1.videoDts.length - 1];
    assert.deepEqual(
      video.slice(0, want1.video).map((t) => t.timestamp),
      want1.videoDts,
    );
    assert.deepEqual(
      video.slice(want1.video).map((t) => t.timestamp),
      want2.videoDts.map((d) => d - want2.videoDts[0] + last1 + 20),
    );
    const p = ffprobe(player.data(), 'flv');
    assert.equal(`${p.codec} ${p.width}x${p.height}`, 'h264 352x288');
    assert.equal(p.frames, want1.video + want2.video);
  });
});
