/**
 * A player that stops reading must not make the gateway hold the stream for it: its backlog (socket buffer and
 * queue on the bus) stays capped (then it is skipped to keyframes, then dropped), the process's memory stays flat, and a normal
 * player of the same stream keeps getting every frame.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpFlvPlayer, TcpTerminal, capture, closeReq, encodeLazily, expectedFrom, loopedPackets, openLive, useE2eGateway, waitFor } from './helpers';
import { collector } from '../support/gc';

/** flv-out's default maxPlayerBacklogBytes: a player's queue on the bus */
const CAP = 2 * 1024 * 1024;
/** what a player's socket may hold on top of it before the bus queues for it (flv-out's WRITABLE_BELOW), and a frame */
const SOCKET_ALLOWANCE = 64 * 1024 + 256 * 1024;
const PASSES = 12;

describe('e2e: a stalled player', function () {
  this.timeout(60_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 });

  it('its backlog stays capped and memory flat over a long stream, while a normal player gets every frame', async () => {
    const cap = capture('jt1078/glaciall-cif-h264-2013.bin');
    const want = expectedFrom(loopedPackets(cap, PASSES));
    const gc = collector();
    const open = await openLive(e.gw, '013800138000', 1);
    // the normal player counts tags as they come: keeping 40 MB would be the test's memory, not the gateway's
    const normal = await HttpFlvPlayer.connect(open.playUrl, { keep: false });
    const slow = await HttpFlvPlayer.connect(open.playUrl, { keep: false });
    slow.pause();
    // (flv-out's player statistics carry the peer address, which tells the two apart)
    const stats = () => e.flv.playerStats();
    await waitFor('two players', () => stats().length === 2);
    const slowId = stats().find((p) => p.remote === slow.remote)!.id;
    const normalId = stats().find((p) => p.remote === normal.remote)!.id;
    const term = await TcpTerminal.connect(e.live2013);
    // one pass first, so what the hot paths allocate once (compiled code, caches, pools) is in the baseline;
    // about 10 MB/s: 64 packets (~40 kB) every 4 ms, each encoded only when it is sent
    await term.send(encodeLazily(loopedPackets(cap, 1)), 64, 4);
    // and with that pass delivered, so no frame of it is in flight (buffers in transit made the baseline noisy)
    const firstPass = expectedFrom(loopedPackets(cap, 1)).video;
    await waitFor('the normal player to get the first pass', () => normal.videoFrames() >= firstPass, 10_000);
    const used = (): number => {
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    // The least of a few full collections 50 ms apart: this process is also the terminal and both players, and under
    // a busy machine (CI) bytes in flight between them swung one reading by +-9 MB, more than the limit below.
    const settled = async (): Promise<number> => {
      let least = Infinity;
      for (let i = 0; i < 5; i++) {
        gc();
        least = Math.min(least, used());
        await sleep(50);
      }
      return least;
    };
    const base = await settled();
    const bytesAtBase = normal.bytes;

    let peakBacklog = 0;
    let slowDropped = false;
    let normalSkips = 0;
    let peakHeld = 0;
    let ticks = 0;
    const timer = setInterval(() => {
      const all = stats();
      const mine = all.find((p) => p.id === slowId);
      if (!mine) slowDropped = true;
      else peakBacklog = Math.max(peakBacklog, mine.backlogBytes);
      normalSkips = all.find((p) => p.id === normalId)?.skips ?? normalSkips;
      if (++ticks % 20 === 0) {
        gc();
        peakHeld = Math.max(peakHeld, used() - base);
      }
    }, 25);
    try {
      await term.send(encodeLazily(loopedPackets(cap, PASSES, 1)), 64, 4);
      await waitFor('the normal player to get every frame', () => normal.videoFrames() >= want.video, 10_000);
      await term.end();
    } finally {
      clearInterval(timer);
    }
    const heldAtEnd = (await settled()) - base;
    await closeReq(e.gw, open.reqId);
    await normal.ended;
    slow.close();

    const streamed = normal.bytes - bytesAtBase;
    assert.ok(streamed > 40e6, `a long stream went through (${Math.round(streamed / 1e6)} MB)`);
    assert.ok(peakBacklog > CAP / 2, `the stalled player did back up (${peakBacklog} bytes)`);
    assert.ok(peakBacklog <= CAP + SOCKET_ALLOWANCE, `its backlog stayed at the cap (${peakBacklog} bytes)`);
    assert.ok(slowDropped, 'the stalled player was dropped once it owed far more than the cap');
    // were the stalled player's backlog unbounded, the ~35 MB the kernel's socket buffers cannot absorb would be held
    assert.ok(heldAtEnd < 8e6, `memory held after 40 MB streamed: ${Math.round(heldAtEnd / 1e6)} MB over the baseline`);
    assert.ok(peakHeld < 28e6, `memory held at its peak (sender and socket buffers in flight included): ${Math.round(peakHeld / 1e6)} MB over the baseline`);

    const c = normal.counter!;
    assert.equal(c.videoFrames, want.video, 'the normal player got every frame of every pass');
    assert.equal(normalSkips, 0, 'and was never skipped');
    assert.equal(c.backwards, 0, 'its timestamps strictly increase over the loops');
    const health = await e.gw.api('GET', '/healthz', undefined, null);
    assert.equal(health.status, 200);
  });
});
