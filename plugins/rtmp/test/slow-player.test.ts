/**
 * An RTMP player that stops reading, then reads again: its units go to the socket's handle past node's Writable
 * (plugin-sdk DirectWriter), so a unit the kernel took in part can be all its backlog, with nothing in the Writable
 * to emit 'drain'. The rest being sent must resume it, and every frame must come, in order.
 */
import assert from 'node:assert/strict';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { RtmpBenchPlayer } from '../../../test/bench/support/bench-rtmp-player';
import { filledFrame as frame } from '../../flv-out/test/helpers';
import { startRtmpGateway, type RtmpGateway } from './helpers';
import { waitFor } from '../../../test/support/until';
import { RtmpPlayer } from '../src/player';
import { countFromFirstWrite, type FirstWriteWatch } from '../../../test/support/state-reads';

describe('rtmp: a player that stops reading and comes back', function () {
  this.timeout(60_000);
  let g: RtmpGateway | undefined;
  afterEach(async () => {
    await g?.stop();
    g = undefined;
  });

  it('is resumed when a unit the kernel took in part is all its backlog, and gets every frame in order', async () => {
    // units of 100 KiB against a 16 KiB mark: one unit written in part puts the player over it with nothing in node
    g = await startRtmpGateway({ socketHighWaterBytes: 16 * 1024, maxPlayerBacklogBytes: 64 * 1024 * 1024 }, { outputs: false });
    const gw = g;
    const o = await gw.gw.openStream({ simNo: '13900000079', chanId: 1, fmt: 0, scheme: 'rtmp', keepIntv: 600 });
    const stream = gw.gw.bus.get(o.streamName);
    assert.ok(stream);
    const pub = stream.attachPublisher();
    pub.setTrack(fixtureClip().video);
    const size = 100 * 1024;
    let i = 0;
    pub.push(frame(i++, size));

    const player = new RtmpBenchPlayer(undefined);
    const ac = new AbortController();
    await player.connect(new URL(o.playUrl), ac.signal);
    await waitFor('the player to play the first frame', () => player.playing && player.videoFrames === 1 && gw.rtmp.playerStats().length === 1, 10_000);
    const s = player.socket!;
    s.pause();
    const backlog = (): number => gw.rtmp.playerStats()[0]?.backlogBytes ?? 0;
    while (backlog() < 2 * size && i < 300) {
      pub.push(frame(i++, size));
      await new Promise((r) => setImmediate(r));
    }
    assert.ok(i < 300, `the player never fell behind (${i} frames pushed)`);
    // more while it is behind: the bus queues these for it
    for (let k = 0; k < 10; k++) pub.push(frame(i++, size));
    const pushed = i;
    s.resume();
    await waitFor('the player to get every frame', () => player.videoFrames === pushed || player.error !== undefined, 20_000);
    assert.equal(player.error, undefined);
    assert.equal(player.videoFrames, pushed);
    assert.equal(gw.rtmp.playerStats()[0]?.skips, 0, 'never skipped: its queue cap is far away');
    s.destroy();
  });
});

describe("rtmp: a player in step reads none of node's stream state", function () {
  this.timeout(60_000);
  let g: RtmpGateway | undefined;
  let watch: FirstWriteWatch | undefined;
  afterEach(async () => {
    watch?.restore();
    await g?.stop();
    g = undefined;
  });

  it("starts and gets 30 units without one read of its socket's Writable state, and answers its backlog", async () => {
    // Node 20.20's Writable state takes a class by which of its lazily added fields a socket has used: a unit's path
    // that reads it learns classes that no socket has by the first memory-reducing collection, which then throws that
    // code away (plugin-sdk WritableAccount). The connection keeps its own account of what it wrote through node.
    g = await startRtmpGateway({}, { outputs: false });
    const gw = g;
    const o = await gw.gw.openStream({ simNo: '13900000081', chanId: 1, fmt: 0, scheme: 'rtmp', keepIntv: 600 });
    const stream = gw.gw.bus.get(o.streamName);
    assert.ok(stream);
    const pub = stream.attachPublisher();
    pub.setTrack(fixtureClip().video);
    let i = 0;
    for (; i < 3; i++) pub.push(frame(i, 4096));
    // from the player's first unit, its start, on
    const w = (watch = countFromFirstWrite(RtmpPlayer.prototype, (p) => (p as unknown as { direct: { socket: unknown } }).direct.socket));
    const player = new RtmpBenchPlayer(undefined);
    const ac = new AbortController();
    await player.connect(new URL(o.playUrl), ac.signal);
    await waitFor('the player to get the GOP', () => player.playing && player.videoFrames === i, 10_000);
    for (const end = i + 30; i < end; i++) {
      pub.push(frame(i, 4096));
      const want = i + 1;
      await waitFor(`unit ${i}`, () => player.videoFrames === want, 10_000);
    }
    assert.equal(gw.rtmp.playerStats()[0]?.backlogBytes, 0);
    const reads = w.reads;
    assert.ok(reads, 'the player started');
    w.restore();
    assert.equal(reads.count, 0, `node's Writable state was read ${reads.count} times from the player's start on`);
    assert.equal(player.error, undefined);
    player.socket?.destroy();
  });
});
