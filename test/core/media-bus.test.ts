import assert from 'node:assert/strict';
import { CoreMediaBus } from '../../core/bus/media-bus';
import type { AccessUnit } from '../../plugin-sdk/media';

const KB = 1024;
function unit(dts: number, key: boolean, size = 10 * KB, kind: 'video' | 'audio' = 'video'): AccessUnit {
  return { kind, codec: kind === 'video' ? 'h264' : 'g711a', dts, pts: dts, keyframe: key, payload: Buffer.alloc(size) };
}

describe('media bus', () => {
  const limits = { maxGopBytes: 512 * KB, maxQueueBytes: 200 * KB, maxStreamBytes: 1024 * KB };

  it('a new subscriber starts at the latest keyframe (GOP cache)', () => {
    const bus = new CoreMediaBus(limits);
    const s = bus.create('a');
    const pub = s.attachPublisher();
    for (let i = 0; i < 30; i++) pub.push(unit(i * 40, i % 10 === 0, 1 * KB));
    const got: AccessUnit[] = [];
    s.subscribe({ write: (u) => got.push(u) });
    assert.equal(got.length, 10, 'units 20..29');
    assert.equal(got[0].keyframe, true);
    assert.equal(got[0].dts, 800);
  });

  it('a slow subscriber skips to the next keyframe; the publisher never waits; a fast one gets everything', () => {
    const bus = new CoreMediaBus(limits);
    const s = bus.create('b');
    const pub = s.attachPublisher();
    const fast: number[] = [];
    let slowWritable = false;
    const slow: number[] = [];
    s.subscribe({ write: (u) => fast.push(u.dts) });
    const slowSub = s.subscribe({ write: (u) => slow.push(u.dts), writable: () => slowWritable });
    for (let i = 0; i < 90; i++) pub.push(unit(i * 40, i % 25 === 0));
    assert.equal(fast.length, 90);
    assert.ok(slowSub.stats.skips >= 1, 'the slow one skipped');
    assert.ok(slowSub.stats.queuedBytes <= limits.maxQueueBytes, `queue bounded: ${slowSub.stats.queuedBytes}`);
    slowWritable = true;
    slowSub.resume();
    assert.equal(slow.length, 15, 'the last GOP (units 75..89) was kept');
    // what the slow one got after its last skip starts at a keyframe and has no gaps
    const first = slow[0];
    assert.equal(first % (25 * 40), 0, `resumed at a keyframe (dts ${first})`);
    for (let i = 1; i < slow.length; i++) assert.equal(slow[i] - slow[i - 1], 40);
  });

  it('the stream ceiling sheds the largest queue', () => {
    const bus = new CoreMediaBus({ maxGopBytes: 64 * KB, maxQueueBytes: 600 * KB, maxStreamBytes: 700 * KB });
    const s = bus.create('c');
    const pub = s.attachPublisher();
    const subs = [0, 1, 2].map(() => s.subscribe({ write: () => undefined, writable: () => false }));
    for (let i = 0; i < 60; i++) pub.push(unit(i * 40, i % 30 === 0));
    const st = s.stats();
    assert.ok(st.queuedBytes + st.gopBytes <= 700 * KB + 10 * KB, `stream memory bounded: ${st.queuedBytes}`);
    assert.ok(subs.some((x) => x.stats.skips > 0));
  });

  it('a GOP larger than the cache limit is not cached: late joiners wait for the next keyframe', () => {
    const bus = new CoreMediaBus({ ...limits, maxGopBytes: 64 * KB });
    const s = bus.create('d');
    const pub = s.attachPublisher();
    for (let i = 0; i < 20; i++) pub.push(unit(i * 40, i === 0));
    const got: AccessUnit[] = [];
    s.subscribe({ write: (u) => got.push(u) });
    assert.equal(s.stats().gopBytes, 0);
    pub.push(unit(800, false));
    assert.equal(got.length, 0, 'no P frame without its keyframe');
    pub.push(unit(840, true));
    assert.equal(got.length, 1);
  });

  it('a reconnecting publisher continues the timeline; the old one is ignored', () => {
    const bus = new CoreMediaBus(limits);
    const s = bus.create('e');
    const got: number[] = [];
    s.subscribe({ write: (u) => got.push(u.dts) });
    const p1 = s.attachPublisher();
    p1.push(unit(0, true));
    p1.push(unit(40, false));
    const p2 = s.attachPublisher();
    p2.push(unit(5, true)); // a new connection rebases near zero
    p1.push(unit(80, false));
    assert.deepEqual(got, [0, 40, 60]);
  });

  it('ready at the first keyframe, or after audio alone when no video is expected', () => {
    const bus = new CoreMediaBus(limits);
    const v = bus.create('v');
    let vReady = 0;
    v.onReady(() => vReady++);
    const pv = v.attachPublisher();
    pv.push(unit(0, false, 10, 'audio'));
    pv.push(unit(20, false));
    assert.equal(vReady, 0);
    pv.push(unit(40, true));
    assert.equal(vReady, 1);
    const a = bus.create('a');
    a.expectVideo = false;
    let aReady = 0;
    a.onReady(() => aReady++);
    a.attachPublisher().push(unit(0, false, 160, 'audio'));
    assert.equal(aReady, 1);
  });

  it('closing the stream ends subscribers and tells the publisher', () => {
    const bus = new CoreMediaBus(limits);
    const s = bus.create('f');
    let ended = '';
    s.subscribe({ write: () => undefined, end: (r) => { ended = r; } });
    const pub = s.attachPublisher();
    let told = false;
    pub.onClose(() => { told = true; });
    bus.remove('f', 'stream closed');
    assert.equal(ended, 'stream closed');
    assert.equal(told, true);
    assert.equal(pub.closed, true);
  });
});
