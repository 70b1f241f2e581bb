import assert from 'node:assert/strict';
import { probeVideo, startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../testkit';
import type { AccessUnit } from '../../..';
import videoThinner, { thinnerParams } from '../index';

describe('example plugin: video-thinner (a filter stage, played through flv-out by via)', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  // 25 fps, a key frame a second, and G.711 audio beside it
  const clip = testClip({ seconds: 2, audio: true });
  before(async () => {
    const stub = stubMediaPlugin({ fmts: [] });
    gw = await startTestGateway({
      // audio-aac: flv-out reads audio as AAC, so a play with via reads the chain [video-thinner, aac]
      plugins: [{ name: stub.name, def: stub.def }, { name: 'audio-aac' }, { name: 'flv-out' }, { name: 'video-thinner', def: videoThinner }],
      captureLogs: true,
    });
  });
  after(() => gw.stop());

  it('checks its params: every is an integer from 1 to 100, default 1', () => {
    assert.deepEqual(thinnerParams({}), { every: 1 });
    assert.deepEqual(thinnerParams({ every: 5 }), { every: 5 });
    assert.throws(() => thinnerParams({ every: 0 }), /every must be an integer from 1 to 100/);
  });

  it('keeps the key frames, the same unit objects, and every audio unit; one key frame in N with params', async () => {
    const open = await gw.openStream({ simNo: '13900000021', chanId: 1 });
    const stream = gw.bus.get(open.streamName)!;
    const all: AccessUnit[] = [];
    const fifth: AccessUnit[] = [];
    const s1 = stream.subscribe({ write: (u) => all.push(u) }, { via: 'video-thinner' });
    const s2 = stream.subscribe({ write: (u) => fifth.push(u) }, { via: { stage: 'video-thinner', params: { every: 2 } }, media: 'v' });
    // (what the stage's reader gets in its first turn is copied: see filter-stage.ts)
    await new Promise((r) => setTimeout(r, 5));
    const pub = gw.publish(open.streamName, clip, { realtime: false, loop: 2 });
    await pub.done;
    await new Promise((r) => setImmediate(r));
    const keys = clip.units.filter((u) => u.kind === 'video' && u.keyframe);
    assert.equal(keys.length, 2);
    const video = all.filter((u) => u.kind === 'video');
    assert.equal(video.length, 4, 'two passes of two key frames');
    assert.ok(video.every((u) => u.keyframe));
    assert.equal(video[0], keys[0], 'by reference: the unit the publisher pushed');
    assert.equal(all.filter((u) => u.kind === 'audio').length, clip.units.filter((u) => u.kind === 'audio').length * 2, 'audio passes');
    assert.equal(fifth.length, 2, 'every: 2 keeps one key frame in two');
    s1.close();
    s2.close();
    assert.equal(gw.bus.list().filter((s) => s.derivedFrom).length, 0, 'its instances stopped with their last readers');
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('ffprobe plays a request through flv-out with via=video-thinner and sees key frames only, with the AAC audio', async () => {
    const open = await gw.openStream({ simNo: '13900000022', chanId: 1, scheme: 'http' });
    // five key frames a second: ffprobe looks at 20 frames before it answers, and a live stream gives them at its pace
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, gopFrames: 5, audio: true }), { loop: true });
    await gw.waitReady(open.reqId);
    const thin = await probeVideo(`${open.playUrl}&via=video-thinner`, { packets: 30 });
    const plain = await probeVideo(open.playUrl, { packets: 30 });
    pub.stop();
    assert.equal(`${thin.codec} ${thin.width}x${thin.height}`, 'h264 320x240');
    assert.deepEqual(thin.streams, ['h264', 'aac'], 'the audio passed the thinner, then the AAC stage');
    const video = thin.frames.map((f) => f.pictType);
    assert.ok(video.length >= 2, `${video.length} frames`);
    assert.deepEqual(
      video,
      video.map(() => 'I'),
      'key frames only',
    );
    assert.ok(Math.abs(thin.frames[1].ptsSec! - thin.frames[0].ptsSec! - 0.2) < 0.01, 'five frames apart');
    assert.equal(thin.errors, '');
    assert.ok(
      plain.frames.some((f) => f.pictType === 'P'),
      'without via the same URL plays every frame',
    );
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('flv-out refuses a via that names no stage: 400 with the reason, and a log line', async () => {
    const open = await gw.openStream({ simNo: '13900000023', chanId: 1, scheme: 'http' });
    const r = await fetch(`${open.playUrl}&via=nope`);
    assert.equal(r.status, 400);
    assert.equal(await r.text(), "via: no stage 'nope' on this gateway (stages: aac, video-thinner)\n");
    assert.ok(gw.logs.some((l) => l.msg === "play refused: via: no stage 'nope' on this gateway (stages: aac, video-thinner)" && l.plugin === 'flv-out'));
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
