import assert from 'node:assert/strict';
import { videoUnit, type AccessUnit, type Publisher } from '../../../plugin-sdk';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { WRITABLE_BELOW } from '../src/transport';
import { framesIn, httpPlay, newPlayer, parsed, rawPlay, startFlvGateway, until, videoFrames, type FlvGateway, type HttpPlay, type RawPlay } from './helpers';

/** An H.264 frame of `size` bytes of slice data (the decoder never sees it: this is about bytes, not pictures). */
function frame(i: number, size: number, key: boolean): AccessUnit {
  const payload = Buffer.alloc(5 + size, i & 0xff);
  payload.writeUInt32BE(1, 0);
  payload[4] = key ? 0x65 : 0x41;
  return videoUnit({ codec: 'h264', dts: 2000 + i * 40, keyframe: key, payload });
}

describe('flv-out: players that fall behind', function () {
  this.timeout(60_000);
  let g: FlvGateway | undefined;
  const sockets: RawPlay[] = [];
  afterEach(async () => {
    for (const s of sockets) s.sock.destroy();
    sockets.length = 0;
    await g?.stop();
    g = undefined;
  });

  const setUp = async (cap: number, gateway: Record<string, unknown> = {}): Promise<{ gw: FlvGateway; path: string; reqId: string; pub: Publisher }> => {
    g = await startFlvGateway({ maxPlayerBacklogBytes: cap }, gateway);
    const o = await g.open('13900000099');
    const pub = g.publisher(o.stream);
    pub.setTrack(fixtureClip().video); // its SPS/PPS: the frames here carry none
    return { gw: g, path: o.path, reqId: o.reqId, pub };
  };
  /** a player that sends its request and never reads again */
  const stalled = (gw: FlvGateway, path: string): RawPlay => {
    const p = rawPlay(gw.port, `GET ${path}&who=slow HTTP/1.1\r\nHost: x\r\n\r\n`);
    p.sock.pause();
    sockets.push(p);
    return p;
  };

  it('caps a player that stops reading, skips it to keyframes, then drops it, while the others get every frame', async () => {
    const cap = 256 * 1024;
    const frameBytes = 64 * 1024;
    // GOPs of 10 x 64 KiB are over the bus's GOP cache here: a late joiner waits for the next keyframe
    const { gw, path, reqId, pub } = await setUp(cap, { maxGopBytes: 256 * 1024 });
    let fast!: HttpPlay;
    const fastId = await newPlayer(gw.flv, () => {
      fast = httpPlay(gw.port, `${path}&who=fast`);
    });
    const slowId = await newPlayer(gw.flv, () => stalled(gw, path));

    let slowPeak = 0;
    let slowSkips = 0;
    let slowDropped = false;
    const total = 480;
    for (let i = 0; i < total; i++) {
      await until(() => (gw.stats(fastId)?.backlogBytes ?? 0) < cap / 2, 'the reading player to drain');
      pub.push(frame(i, frameBytes, i % 10 === 0));
      const s = gw.stats(slowId);
      if (s) {
        slowPeak = Math.max(slowPeak, s.peakBacklogBytes, s.backlogBytes);
        slowSkips = s.skips;
      } else {
        slowDropped = true;
      }
    }
    assert.ok(slowPeak > cap / 2, `the slow player did build a backlog (${slowPeak})`);
    assert.ok(slowSkips > 0, 'it was moved to a later keyframe before being dropped');
    // its queue on the bus is capped, and its socket holds what it took while writable, a frame or so past the mark
    const bound = cap + WRITABLE_BELOW + 2 * (frameBytes + 64);
    assert.ok(slowPeak <= bound, `slow player backlog peaked at ${slowPeak} (cap ${cap}, bound ${bound})`);
    assert.ok(slowDropped, 'a player that never reads is dropped once it missed 4x the cap');
    assert.equal(gw.stats(fastId)?.skips, 0);

    let late!: HttpPlay;
    await newPlayer(gw.flv, () => {
      late = httpPlay(gw.port, `${path}&who=late`);
    });
    for (let i = total; i < total + 15; i++) pub.push(frame(i, 100, i % 10 === 0));
    await until(() => framesIn(fast.data()) === total + 15 && framesIn(late.data()) === 15, 'the last frames');
    await gw.gw.api('POST', '/strm/close', { reqIds: [reqId] });
    assert.equal(videoFrames(parsed(await fast.body).tags).length, total + 15, 'the reading player got every frame');
    const lateFrames = videoFrames(parsed(await late.body).tags);
    assert.deepEqual([lateFrames[0].keyframe, lateFrames[0].timestamp], [true, 2000 + 480 * 40], 'not the GOP from frame 470, which was not cached');
  });

  it('does not skip or drop a joining player for the GOP it catches up on', async () => {
    const cap = 64 * 1024;
    const { gw, path, pub } = await setUp(cap);
    // frames bigger than the cap: a reader that can take one gets it whole
    const frameBytes = 80 * 1024;
    for (let i = 0; i < 60; i++) pub.push(frame(i, frameBytes, i === 0)); // a 4.8 MB GOP, cached whole
    const gop = 60 * frameBytes;

    // one that reads takes all of it, then goes on live
    let reader!: HttpPlay;
    const readerId = await newPlayer(gw.flv, () => {
      reader = httpPlay(gw.port, `${path}&who=reader`);
    });
    await until(() => framesIn(reader.data()) === 60, 'the reader to catch up');
    for (let i = 60; i < 70; i++) {
      // live, it is held to the cap again: frames go as it takes them
      await until(() => (gw.stats(readerId)?.backlogBytes ?? 0) < cap, 'the reader to drain');
      pub.push(frame(i, frameBytes, false));
    }
    await until(() => framesIn(reader.data()) === 70, 'the live frames');
    const r = gw.stats(readerId)!;
    assert.equal(r.skips, 0);
    assert.ok(r.peakBacklogBytes > cap, 'it held more than the cap while catching up');

    // one that does not read is held at its join, not dropped for it
    const slowId = await newPlayer(gw.flv, () => stalled(gw, path));
    await new Promise((res) => setTimeout(res, 100));
    const s = gw.stats(slowId);
    assert.ok(s, 'still attached after its join');
    assert.ok(s.bytesOut < gop, 'it took only part of the GOP');
    assert.ok(s.backlogBytes > cap, 'the rest waits for it on the bus');
  });
});
