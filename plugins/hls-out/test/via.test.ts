/**
 * A play URL's `via`: the playlist (and every URL it names) read through a stage's form of the stream, started at
 * the first fetch and kept for the request; a `via` that names no stage answers 400.
 */
import assert from 'node:assert/strict';
import { definePlugin, filterStage, type PluginDefinition } from '../../../plugin-sdk';
import { probeVideo, startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import hlsOut from '../index';
import { get, parsePlaylist, resolveUri, waitPlaylist } from './helpers';

const keys = definePlugin({
  name: 'keys',
  setup(ctx) {
    ctx.bus.registerStage(filterStage({ name: 'keys', create: () => (u) => u.keyframe }));
  },
}) as PluginDefinition<object>;

/** the init segment and every segment of the playlist, joined */
async function window(url: string): Promise<{ file: Buffer; uris: string[] }> {
  const p = parsePlaylist((await get(url)).text);
  const uris = [p.segments[0].map!, ...p.segments.map((s) => s.uri)];
  const parts = await Promise.all(uris.map(async (u) => (await get(resolveUri(url, u))).body));
  return { file: Buffer.concat(parts), uris };
}

describe('hls-out: via on a play URL', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin({ fmts: [0] });
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'keys', def: keys },
        { name: 'hls-out', def: hlsOut },
      ],
      captureLogs: true,
    });
  });
  after(() => gw.stop());

  it("a playlist with via=keys is the stage's form: its segments hold key frames only, its URLs carry the via", async () => {
    const open = await gw.openStream({ simNo: '13900000051', chanId: 1, fmt: 1 });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, gopFrames: 5 }), { loop: true });
    const url = `${open.playUrl}&via=keys`;
    await waitPlaylist(url, (p) => p.segments.length >= 2);
    const thin = await window(url);
    const own = await window(open.playUrl);
    pub.stop();
    assert.ok(
      thin.uris.every((u) => u.endsWith('&via=keys')),
      'the URLs it names read the same form',
    );
    assert.ok(own.uris.every((u) => !u.includes('via=')));
    const t = await probeVideo(thin.file, { format: 'mp4' });
    assert.ok(t.frames.length >= 4, `${t.frames.length} frames`);
    assert.ok(
      t.frames.every((f) => f.pictType === 'I'),
      'key frames only',
    );
    assert.equal(t.errors, '');
    const o = await probeVideo(own.file, { format: 'mp4' });
    assert.ok(
      o.frames.some((f) => f.pictType === 'P'),
      "the request's own form has every frame",
    );
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    assert.equal(gw.bus.list().length, 0, 'both forms stopped with the request');
  });

  it('a via that names no stage answers 400 with the reason, and a log line', async () => {
    const open = await gw.openStream({ simNo: '13900000052', chanId: 1, fmt: 1 });
    const r = await get(`${open.playUrl}&via=nope`);
    assert.equal(r.status, 400);
    assert.equal(r.text, "via: no stage 'nope' on this gateway (stages: keys)\n");
    assert.ok(gw.logs.some((l) => l.msg === "HLS fetch refused: via: no stage 'nope' on this gateway (stages: keys)"));
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
