import assert from 'node:assert/strict';
import { ManualClock } from '../../plugin-sdk/clock';
import { videoUnit } from '../../plugin-sdk/media';
import { definePlugin } from '../../plugin-sdk/plugin';
import type { Notice } from '../../plugin-sdk/notices';
import type { PluginContext } from '../../plugin-sdk/plugin';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../plugin-sdk/testkit';

const A = 'appa:pwa';
const B = 'appb:pwb';

describe('sessions: ctrl, exclusive, keep, close, status, scoping, timeouts', () => {
  let gw: TestGateway;
  let clock: ManualClock;
  const notices: Notice[] = [];
  let releaseClose: (() => void) | undefined;
  let probeCtx: PluginContext<object>;

  before(async () => {
    clock = new ManualClock();
    const stub = stubMediaPlugin();
    // a plugin that records notices and can hold a stream in 'closing' to show -207
    const probe = definePlugin({
      name: 'probe',
      setup(ctx) {
        probeCtx = ctx;
        ctx.notices.on((n) => notices.push(n));
        ctx.sessions.onStreamClosed(
          (s) =>
            (s.name.startsWith('999_')
              ? new Promise<void>((resolve) => {
                  releaseClose = resolve;
                })
              : undefined) as never,
        );
      },
    });
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'probe', def: probe },
      ],
      gateway: {
        applications: [
          { appId: 'A', user: 'appa', password: 'pwa' },
          { appId: 'B', user: 'appb', password: 'pwb' },
        ],
      },
      clock,
    });
  });
  after(() => gw.stop());
  beforeEach(() => {
    notices.length = 0;
  });

  const body = (over: Record<string, unknown> = {}) => ({ user: { token: 'tok' }, typ: 'live', simNo: '013800138000', chanId: 1, ...over });
  async function open(auth: string, over: Record<string, unknown> = {}) {
    const r = await gw.api('POST', '/strm/open', body(over), auth);
    return r.json;
  }
  async function closeAll(auth: string, ids: string[]) {
    await gw.api('POST', '/strm/close', { reqIds: ids }, auth);
  }

  it('first request on a channel gets ctrl, later ones (any application) do not; SIMs normalise', async () => {
    const a = await open(A);
    const b = await open(B, { simNo: '13800138000' });
    assert.equal(a.errCode, 0);
    assert.equal(b.errCode, 0);
    assert.equal(a.data[0].ctrl, true);
    assert.equal(b.data[0].ctrl, false);
    assert.equal(a.data[0].playUrl.split('?')[0], b.data[0].playUrl.split('?')[0], 'same stream');
    await closeAll(A, [a.data[0].reqId]);
    await closeAll(B, [b.data[0].reqId]);
  });

  it('exclusive: refused while others hold the channel; blocks others while it lives (-25)', async () => {
    const a = await open(A, { chanId: 2 });
    const ex = await open(B, { chanId: 2, exclusive: true });
    assert.equal(ex.errCode, -25);
    await closeAll(A, [a.data[0].reqId]);
    const ex2 = await open(B, { chanId: 2, exclusive: true });
    assert.equal(ex2.errCode, 0);
    const other = await open(A, { chanId: 2 });
    assert.equal(other.errCode, -25);
    await closeAll(B, [ex2.data[0].reqId]);
    const after = await open(A, { chanId: 2 });
    assert.equal(after.errCode, 0);
    await closeAll(A, [after.data[0].reqId]);
  });

  it('keep extends the deadline; a missed keep closes with closeCause 5', async () => {
    const r = await open(A, { chanId: 3, keepIntv: 15, cb: 'http://127.0.0.1:9/cb' });
    const id = r.data[0].reqId;
    // hold = 15 + max(5, 15/4) = 20 s; all of it inside the 60 s open timeout
    for (let i = 0; i < 2; i++) {
      clock.advance(15_000);
      const k = await gw.api('POST', '/strm/keep', { reqIds: [id] }, A);
      assert.deepEqual(k.json.data, [{ reqId: id, keep: true }]);
    }
    clock.advance(19_000);
    assert.equal(
      (await gw.api('GET', '/strm/status', undefined, A)).json.data.some((x: { reqId: string }) => x.reqId === id),
      true,
      'still open inside the hold time',
    );
    clock.advance(2_000);
    const k = await gw.api('POST', '/strm/keep', { reqIds: [id] }, A);
    assert.deepEqual(k.json.data, [{ reqId: id, keep: false }]);
    const closed = notices.find((n) => n.payload.reqId === id);
    assert.ok(closed);
    assert.equal(closed.payload.closeCause, 5);
    assert.equal(closed.payload.closeReason, 'keepTimeout');
    assert.equal(closed.cb, 'http://127.0.0.1:9/cb');
    assert.equal(closed.payload.instId.length > 0, true);
    assert.equal(closed.payload.mediaTyp, 'av');
  });

  it('close answers per reqId in order, with closeCause 1; unknown ids answer false', async () => {
    const r1 = await open(A, { chanId: 4 });
    const r2 = await open(A, { chanId: 5 });
    const c = await gw.api('POST', '/strm/close', { reqIds: [r1.data[0].reqId, 'no-such-request', r2.data[0].reqId] }, A);
    assert.deepEqual(c.json.data, [
      { reqId: r1.data[0].reqId, closed: true },
      { reqId: 'no-such-request', closed: false },
      { reqId: r2.data[0].reqId, closed: true },
    ]);
    assert.equal(c.json.count, 3);
    assert.deepEqual(
      notices.map((n) => n.payload.closeCause),
      [1, 1],
    );
    // closed twice: false
    const again = await gw.api('POST', '/strm/close', { reqIds: [r1.data[0].reqId] }, A);
    assert.deepEqual(again.json.data, [{ reqId: r1.data[0].reqId, closed: false }]);
  });

  it("scoping: B can neither keep, close nor see A's requests; answers exactly like unknown ones", async () => {
    const a = await open(A, { chanId: 6 });
    const id = a.data[0].reqId;
    const keepB = await gw.api('POST', '/strm/keep', { reqIds: [id] }, B);
    const keepUnknown = await gw.api('POST', '/strm/keep', { reqIds: [id + 'x'] }, B);
    assert.deepEqual(keepB.json.data, [{ reqId: id, keep: false }]);
    assert.deepEqual({ ...keepUnknown.json, data: undefined }, { ...keepB.json, data: undefined });
    const closeB = await gw.api('POST', '/strm/close', { reqIds: [id] }, B);
    assert.deepEqual(closeB.json.data, [{ reqId: id, closed: false }]);
    const statusB = await gw.api('GET', '/strm/status', undefined, B);
    assert.equal(
      statusB.json.data.some((x: { reqId: string }) => x.reqId === id),
      false,
    );
    const statusA = await gw.api('GET', '/strm/status?reqId=' + id, undefined, A);
    assert.equal(statusA.json.count, 1);
    assert.equal(statusA.json.data[0].ctrl, true);
    assert.equal(statusA.json.data[0].ready, false);
    await closeAll(A, [id]);
  });

  it('detectMediaTyp: audio announced just after the first keyframe makes the ready notice say av; others are told at once', async () => {
    const detect = await open(A, { chanId: 19, keepIntv: 600, detectMediaTyp: true });
    const plain = await open(B, { chanId: 19, keepIntv: 600 });
    const pub = probeCtx.sessions.findStream('13800138000', 19, 'live')!.media.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264', width: 352, height: 288 });
    pub.push(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: Buffer.alloc(10) }));
    assert.deepEqual(
      notices.map((n) => n.payload.reqId),
      [plain.data[0].reqId],
      'the request without detection is told at once',
    );
    clock.advance(300);
    pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    assert.equal(notices.length, 2);
    assert.deepEqual([notices[1].payload.reqId, notices[1].payload.mediaTyp, notices[1].payload.ac], [detect.data[0].reqId, 'av', 'g711a']);
    clock.advance(2000);
    assert.equal(notices.length, 2, 'told once');
    await closeAll(A, [detect.data[0].reqId]);
    await closeAll(B, [plain.data[0].reqId]);
  });

  it('the stream turns ready at its first keyframe: waiting requests get a ready notice, later opens ready: true', async () => {
    const r = await open(A, { chanId: 9, keepIntv: 600, detectMediaTyp: true });
    const s = probeCtx.sessions.findStream('13800138000', 9, 'live')!;
    const pub = s.media.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264', width: 352, height: 288 });
    pub.push(videoUnit({ codec: 'h264', dts: 0, keyframe: false, payload: Buffer.alloc(10) }));
    assert.equal(notices.length, 0, 'a P frame does not make it ready');
    pub.push(videoUnit({ codec: 'h264', dts: 40, keyframe: true, payload: Buffer.alloc(10) }));
    assert.equal(notices.length, 0, 'detectMediaTyp: the notice waits a moment for an audio track');
    clock.advance(999);
    assert.equal(notices.length, 0);
    clock.advance(1);
    assert.equal(notices.length, 1, 'no audio within a second: video only');
    assert.equal(notices[0].payload.act, 'ready');
    assert.equal(notices[0].payload.reqId, r.data[0].reqId);
    assert.equal(notices[0].payload.vc, 'h264');
    assert.equal(notices[0].payload.mediaTyp, 'v', 'detected: video only');
    assert.equal(notices[0].payload.playUrl, r.data[0].playUrl);
    const later = await open(B, { chanId: 9 });
    assert.equal(later.data[0].ready, true);
    assert.equal(notices.length, 1, 'no ready notice for a request that opened ready');
    await closeAll(A, [r.data[0].reqId]);
    await closeAll(B, [later.data[0].reqId]);
    assert.deepEqual(
      notices.slice(1).map((n) => [n.payload.act, n.payload.closeCause]),
      [
        ['closed', 1],
        ['closed', 1],
      ],
    );
    assert.equal(pub.closed, true, 'the publisher hears that the stream closed');
  });

  it('a request nobody plays within 2 minutes closes with closeCause 12', async () => {
    const r = await open(A, { chanId: 7, keepIntv: 600 });
    const pub = probeCtx.sessions.findStream('13800138000', 7, 'live')!.media.attachPublisher();
    pub.push(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: Buffer.alloc(10) }));
    notices.length = 0;
    clock.advance(119_000);
    assert.equal(notices.length, 0);
    clock.advance(2_000);
    const n = notices.find((x) => x.payload.reqId === r.data[0].reqId);
    assert.equal(n?.payload.closeCause, 12);
  });

  it('a stream whose terminal never pushes closes its requests with closeCause 6 after the open timeout', async () => {
    const t0 = clock.now();
    const r = await open(A, { chanId: 8, keepIntv: 600 });
    // the consumption timeout (120 s) is longer than the open timeout (60 s): 6 comes first
    clock.advance(61_000);
    const n = notices.find((x) => x.payload.reqId === r.data[0].reqId);
    assert.ok(n, `closed by ${clock.now() - t0} ms`);
    assert.equal(n.payload.closeCause, 6);
    assert.equal(n.payload.act, 'failed', 'never became ready: failed');
  });

  it("-207 while the channel's stream is closing", async () => {
    const r = await open(A, { simNo: '999', chanId: 1 });
    await closeAll(A, [r.data[0].reqId]);
    const during = await open(A, { simNo: '999', chanId: 1 });
    assert.equal(during.errCode, -207);
    releaseClose?.();
    await new Promise((res) => setImmediate(res));
    const afterClose = await open(A, { simNo: '999', chanId: 1 });
    assert.equal(afterClose.errCode, 0);
    await closeAll(A, [afterClose.data[0].reqId]);
    releaseClose?.();
  });

  it('keep and close validate reqIds', async () => {
    for (const bad of [undefined, [], 'x', [1], new Array(1001).fill('a')]) {
      const r = await gw.api('POST', '/strm/keep', { reqIds: bad }, A);
      assert.equal(r.json.errCode, -7);
    }
  });
});
