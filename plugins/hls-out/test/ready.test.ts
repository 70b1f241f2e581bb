/**
 * `ready` for an HLS request means playable in HLS: its first segment exists (OutputProvider.readyWhen 'own'). An FLV
 * request on the same stream is ready at the first keyframe; the HLS one in the open result, in status and by its
 * ready notice only once a segment is there; a later HLS open of the same form is ready at once.
 */
import assert from 'node:assert/strict';
import { definePlugin, shiftUnit, type Notice } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import hlsOut from '../index';
import { get, parsePlaylist } from './helpers';
import { fixtureClip } from '../../../test/support/fixture-clip';

describe('hls-out: ready means the first segment exists', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  const notices: Notice[] = [];
  before(async () => {
    const stub = stubMediaPlugin({ fmts: [0] });
    const probe = definePlugin({
      name: 'notice-probe',
      setup(ctx) {
        ctx.notices.on((n) => notices.push(n));
      },
    });
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'hls-out', def: hlsOut },
        { name: 'notice-probe', def: probe },
      ],
    });
  });
  after(() => gw.stop());

  const readyOf = (reqId: string) => notices.filter((n) => n.payload.reqId === reqId && n.payload.act === 'ready');
  const status = async (reqId: string) => (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0];

  it('an FLV request is ready at the keyframe; an HLS one when its first segment is cut, then later HLS opens are ready at once', async () => {
    const hls = await gw.openStream({ simNo: '13900000061', chanId: 1, fmt: 1, dataTyp: 1 });
    const flv = await gw.openStream({ simNo: '13900000061', chanId: 1, fmt: 0, dataTyp: 1 });
    const clip = fixtureClip({ seconds: 2 });
    const pub = gw.bus.get(hls.streamName)!.attachPublisher();
    pub.setTrack(clip.video);
    // the first 1.5 s: a keyframe, but no complete 2 s segment yet
    for (const u of clip.units.filter((x) => x.dts < 1500)) pub.push(u);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(readyOf(flv.reqId).length, 1, 'FLV: ready at the first keyframe');
    assert.equal((await status(flv.reqId)).ready, true);
    assert.equal(readyOf(hls.reqId).length, 0, 'HLS: no ready notice before a segment exists');
    assert.equal((await status(hls.reqId)).ready, false);

    // the rest of the clip and the next pass's keyframe at 2 s: segment 0 is complete
    for (const u of clip.units.filter((x) => x.dts >= 1500)) pub.push(u);
    pub.push(shiftUnit(clip.units[0], clip.durationMs));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(readyOf(hls.reqId).length, 1, 'HLS: one ready notice once the segment exists');
    assert.equal(readyOf(hls.reqId)[0].payload.playUrl, hls.playUrl);
    assert.equal((await status(hls.reqId)).ready, true);
    const p = parsePlaylist((await get(hls.playUrl)).text);
    assert.equal(p.segments.length, 1);

    const later = await gw.openStream({ simNo: '13900000061', chanId: 1, fmt: 1, dataTyp: 1, token: 'later' });
    assert.equal(later.ready, true, 'the open result says ready: the shared form has its segment');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(readyOf(later.reqId).length, 0, 'no ready notice for an open that returned ready = true');
    await gw.api('POST', '/strm/close', { reqIds: [hls.reqId, flv.reqId, later.reqId] });
  });
});
