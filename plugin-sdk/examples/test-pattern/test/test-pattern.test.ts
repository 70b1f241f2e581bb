import assert from 'node:assert/strict';
import { ManualClock, type Cancel } from '../../..';
import { probeVideo, startTestGateway, stubMediaPlugin, type TestGateway } from '../../../testkit';
import testPattern from '../index';

describe('example plugin: test-pattern (a source publishing H.264 it makes itself)', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin({ fmts: [] });
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'flv-out' },
        { name: 'test-pattern', def: testPattern, config: { sims: ['019900000001'], gopFrames: 10 } },
      ],
    });
  });
  after(() => gw.stop());

  it('a request for a configured SIM is ready at once, and ffprobe plays it through flv-out: 320x240, a key frame every 10', async () => {
    const open = await gw.openStream({ simNo: '19900000001', chanId: 3, scheme: 'http' });
    const status = await gw.waitReady(open.reqId);
    assert.deepEqual(status.codecs, [{ kind: 'video', codec: 'h264', width: 320, height: 240 }]);
    const p = await probeVideo(open.playUrl, { packets: 30 });
    assert.equal(`${p.codec} ${p.width}x${p.height}`, 'h264 320x240');
    assert.equal(p.errors, '', 'every frame decodes');
    assert.ok(p.frames.length >= 25, `${p.frames.length} frames`);
    const keys = p.frames.flatMap((f, i) => (f.keyFrame ? [i] : []));
    assert.equal(keys[0], 0, 'from a key frame');
    for (let i = 1; i < keys.length; i++) assert.equal(keys[i] - keys[i - 1], 10, 'a key frame every 10 frames');
    assert.ok(p.frames.every((f) => f.pictType === (f.keyFrame ? 'I' : 'P')));
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  describe('on a manual clock', () => {
    /** counts the intervals of the pattern's frame rate (25 fps: 40 ms) that run */
    class FrameClock extends ManualClock {
      running = 0;
      override setInterval(fn: () => void, ms: number): Cancel {
        const cancel = super.setInterval(fn, ms);
        if (ms !== 40) return cancel;
        this.running++;
        let on = true;
        return () => {
          if (on) this.running--;
          on = false;
          cancel();
        };
      }
    }
    const clock = new FrameClock();
    let mgw: TestGateway;
    before(async () => {
      const stub = stubMediaPlugin();
      mgw = await startTestGateway({
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'test-pattern', def: testPattern },
        ],
        clock,
      });
    });
    after(() => mgw.stop());

    it('publishes a frame each 40 ms from a key frame for its SIMs only, and stops when the stream closes', async () => {
      const other = await mgw.openStream({ simNo: '13900000031', chanId: 1 });
      const mine = await mgw.openStream({ simNo: '19900000000', chanId: 1 });
      assert.equal(clock.running, 1, 'one source, for the configured SIM (the default)');
      clock.advance(400);
      const stream = mgw.bus.get(mine.streamName)!;
      assert.deepEqual([stream.stats().videoFrames, stream.ready, stream.tracks[0].codec], [10, true, 'h264']);
      assert.equal(mgw.bus.get(other.streamName)!.stats().unitsIn, 0, 'another SIM gets nothing');
      await mgw.api('POST', '/strm/close', { reqIds: [mine.reqId, other.reqId] });
      assert.equal(stream.closed, true);
      assert.equal(clock.running, 0, 'its timer stopped with the stream');
    });
  });
});
