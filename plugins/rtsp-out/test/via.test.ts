/**
 * A play URL's `via`: DESCRIBE describes the stage's form of the stream and names track URLs that carry the same
 * via, so the SETUPs and PLAY read that form; a `via` that names no stage answers 400.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { definePlugin, filterStage, type PluginDefinition } from '../../../plugin-sdk';
import { probeVideo, startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import rtspOut from '../index';
import { RawRtsp, recordRtsp } from './helpers';

const keys = definePlugin({
  name: 'keys',
  setup(ctx) {
    ctx.bus.registerStage(filterStage({ name: 'keys', create: () => (u) => u.keyframe }));
  },
}) as PluginDefinition<object>;

describe('rtsp-out: via on a play URL', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'keys', def: keys },
        { name: 'rtsp-out', def: rtspOut },
      ],
      captureLogs: true,
    });
  });
  after(() => gw.stop());

  it("ffmpeg plays url&via=keys over TCP: key frames only, every one decoded; the SDP's track URLs carry the via", async () => {
    const open = await gw.openStream({ simNo: '13900000061', chanId: 1, fmt: 4 });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, gopFrames: 5, audio: true }), { loop: true });
    await gw.waitReady(open.reqId);
    const url = `${open.playUrl}&via=keys`;
    const raw = await RawRtsp.connect(gw.ports['rtsp-out.port']);
    const d = await raw.request('DESCRIBE', url, { Accept: 'application/sdp' });
    raw.close();
    assert.equal(d.status, 200);
    const controls = d.body.split('\r\n').filter((l) => l.startsWith('a=control:rtsp'));
    assert.ok(controls.length >= 1 && controls.every((l) => l.endsWith('&via=keys')), controls.join(' '));

    const rec = await recordRtsp(url, 'tcp', 3);
    pub.stop();
    assert.equal(rec.code, 0, `ffmpeg: ${rec.stderr}`);
    const p = await probeVideo(rec.file);
    fs.rmSync(rec.file, { force: true });
    assert.ok(p.frames.length >= 8, `${p.frames.length} frames`);
    assert.ok(
      p.frames.every((f) => f.pictType === 'I'),
      'key frames only',
    );
    assert.equal(p.errors, '');
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('a via that names no stage answers 400, and a log line', async () => {
    const open = await gw.openStream({ simNo: '13900000062', chanId: 1, fmt: 4 });
    const raw = await RawRtsp.connect(gw.ports['rtsp-out.port']);
    const d = await raw.request('DESCRIBE', `${open.playUrl}&via=nope`);
    raw.close();
    assert.equal(d.status, 400);
    assert.ok(gw.logs.some((l) => l.msg === "RTSP play refused: via: no stage 'nope' on this gateway (stages: keys)"));
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
