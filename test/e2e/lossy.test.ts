/**
 * Imperfect transports, end to end: UDP with reordering and loss, and TCP with junk between packets.
 * The reference is the ingest's own assembler fed the very packets (in the very order) the gateway got.
 */
import assert from 'node:assert/strict';
import {
  HttpFlvPlayer,
  TcpTerminal,
  capture,
  closeReq,
  codedVideo,
  encodeCapture,
  expectedFrom,
  ffprobe,
  firstNonMonotonic,
  framesSettled,
  lossyOrder,
  metric,
  openLive,
  randomChunks,
  sendUdp,
  useE2eGateway,
  withJunk,
} from './helpers';
import { parseFlv } from '../support/flv-reader';

describe('e2e: UDP reordering and loss, TCP junk', function () {
  this.timeout(60_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 });
  const listenerTotals = async (labels: Record<string, string>) => ({
    packets: await metric(e.gw, 'gw_jt1078_ingest_listener_packets', labels),
    frames: await metric(e.gw, 'gw_jt1078_ingest_listener_frames', labels),
    lost: await metric(e.gw, 'gw_jt1078_ingest_listener_lost_packets', labels),
  });

  it('UDP, shuffled within 8 packets and 1% dropped (seeded): frames keep coming, decode cleanly, gateway stays healthy', async () => {
    const file = 'jt1078/xunilcyl-d1-h264-2013.bin';
    const cap = capture(file);
    const all = expectedFrom(cap.packets);
    const plan = lossyOrder(cap.packets.length, { window: 8, loss: 0.01, seed: 1 });
    assert.ok(plan.dropped >= 8, `the plan drops packets (${plan.dropped})`);
    const sent = plan.order.map((i) => cap.packets[i]);
    // what the gateway can make of this: lost packets cost their frame and the rest of its GOP, nothing more
    const want = expectedFrom(sent, { reorder: true });
    assert.ok(want.video > all.video / 2 && want.video < all.video, `reference: ${want.video} of ${all.video} frames survive`);

    const listener = { listener: 'live2013' };
    const listenerBefore = await listenerTotals(listener);
    const open = await openLive(e.gw, '132570034500', 1);
    const player = await HttpFlvPlayer.connect(open.playUrl);
    const bufs = encodeCapture(cap.packets);
    await sendUdp(
      e.live2013,
      plan.order.map((i) => bufs[i]),
      { perTick: 8, tickMs: 4 },
    );

    // UDP has no end: wait until the frames stop coming, then close the request
    await framesSettled(player, 10_000, 400);
    const lost = await metric(e.gw, 'gw_jt1078_ingest_stream_lost_packets', { transport: 'udp' });
    const listenerAfter = await listenerTotals(listener);
    await closeReq(e.gw, open.reqId);
    await player.ended;

    const flv = parseFlv(player.data());
    const video = codedVideo(flv.tags);
    // (a drop among the last packets leaves no later number to reveal it)
    assert.ok(want.lostPackets >= plan.dropped - 2 && want.lostPackets <= plan.dropped, `reference loss ${want.lostPackets} of ${plan.dropped}`);
    assert.equal(lost, want.lostPackets, 'the gateway counts the dropped packets as lost, and only those (reordered ones are put back)');
    assert.equal(video.length, want.video, 'every frame the reorder buffer can rebuild reaches the player');
    assert.equal(listenerAfter.packets - listenerBefore.packets, sent.length, 'the listener counts every packet it got');
    assert.equal(listenerAfter.lost - listenerBefore.lost, want.lostPackets, 'and the lost ones, as the stream does');
    assert.ok(listenerAfter.frames - listenerBefore.frames >= want.video, 'and the frames published');
    assert.equal(video[0].keyframe, true);
    assert.equal(firstNonMonotonic(video, true), -1, 'timestamps strictly increase across the gaps');
    assert.ok(video[video.length - 1].timestamp >= want.videoDts[want.videoDts.length - 1] - 1000, 'playback continued to the end of the capture');
    const p = ffprobe(player.data(), 'flv');
    assert.equal(`${p.codec} ${p.width}x${p.height}`, 'h264 704x576');
    assert.equal(p.frames, want.video);
    assert.equal(p.errors, '', 'no frame refers to one that was lost: the decoder has nothing to complain about');

    const health = await e.gw.api('GET', '/healthz', undefined, null);
    assert.equal(health.status, 200);
    assert.equal(health.json.status, 'ok');
  });

  it('TCP with junk between packets (random bytes, false magics, random chunking): no frame lost', async () => {
    const file = 'jt1078/glaciall-cif-h264-2013.bin';
    const cap = capture(file);
    // up to the last complete frame, whose final packet comes right after junk and ends the connection: a parser
    // that waits for the next header to confirm a packet found after junk must take the end of stream as that
    let last = cap.packets.length - 1;
    while (!cap.packets[last].marker) last--;
    const packets = cap.packets.slice(0, last + 1);
    const want = expectedFrom(packets);
    const bufs = encodeCapture(packets);
    // junk after every 7th packet and right before the last one, never after the last one (nothing follows it)
    const n = bufs.length;
    const { stream, insertions } = withJunk(bufs, { after: (i) => i === n - 2 || (i % 7 === 6 && i < n - 1), maxLen: 300, seed: 7 });
    assert.ok(insertions > 800);
    const resyncsBefore = await metric(e.gw, 'gw_jt1078_ingest_listener_resyncs', { listener: 'live2013' });

    const open = await openLive(e.gw, '013800138000', 1);
    const player = await HttpFlvPlayer.connect(open.playUrl);
    const term = await TcpTerminal.connect(e.live2013);
    await term.send(randomChunks(stream, 3, 3000), 16);
    await term.end();
    await player.ended;

    const flv = parseFlv(player.data());
    const video = codedVideo(flv.tags);
    // junk between packets corrupts no packet, so nothing may be lost, the last frame included
    assert.equal(video.length, want.video, 'every frame arrives');
    assert.deepEqual(
      video.map((t) => t.timestamp),
      want.videoDts,
    );
    const resyncs = (await metric(e.gw, 'gw_jt1078_ingest_listener_resyncs', { listener: 'live2013' })) - resyncsBefore;
    assert.equal(resyncs, insertions, 'the parser found its way back after each piece of junk');
    const p = ffprobe(player.data(), 'flv');
    assert.equal(`${p.codec} ${p.width}x${p.height}`, 'h264 352x288');
    assert.equal(p.frames, want.video);
    assert.equal(p.errors, '');
  });
});
