import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as http from 'node:http';
import { audioUnit, type AccessUnit } from '../../..';
import { findFfmpeg, startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../testkit';
import g711Regroup, { regrouper } from '../index';

const alaw = (dtsMs: number, bytes: number) => audioUnit({ codec: 'g711a', dts: dtsMs, timescale: 8000, duration: bytes, payload: Buffer.alloc(bytes, 0xd5) });

function read(url: string, bytes: number): Promise<{ status: number; type: string; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      const chunks: Buffer[] = [];
      let n = 0;
      const done = () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body: Buffer.concat(chunks) });
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        n += c.length;
        if (n >= bytes) {
          req.destroy();
          done();
        }
      });
      res.on('end', done);
    });
    req.on('error', reject);
  });
}

describe('example plugin: g711-regroup (a stage, and an output that reads it)', function () {
  this.timeout(30_000);

  it('re-cuts uneven G.711 frames into exact ones; a gap restarts the timeline', () => {
    const t = regrouper(160, () => undefined);
    const out: AccessUnit[] = [];
    let at = 0;
    for (const n of [100, 250, 70, 300]) {
      out.push(...(t.unit(alaw(at / 8, n)) as AccessUnit[]));
      at += n;
    }
    assert.deepEqual(
      out.map((u) => u.payload.length),
      [160, 160, 160, 160],
    );
    assert.deepEqual(
      out.map((u) => u.dtsTicks),
      [0, 160, 320, 480],
      'timed by samples',
    );
    assert.deepEqual(
      out.map((u) => u.dts),
      [0, 20, 40, 60],
    );
    // 80 samples carried; the next frame comes a second late: loss, so the carry goes and time starts there
    const later = t.unit(alaw(1000, 160)) as AccessUnit[];
    assert.deepEqual(
      later.map((u) => u.dtsTicks),
      [8000],
    );
    assert.equal(t.track({ kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1 }), undefined, 'other codecs are left out');
  });

  describe('in a gateway', () => {
    let gw: TestGateway;
    const clip = testClip({ seconds: 2, audio: true });
    before(async () => {
      const stub = stubMediaPlugin();
      gw = await startTestGateway({
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'g711-regroup', def: g711Regroup },
        ],
      });
    });
    after(() => gw.stop());

    it('one stage instance per (stream, ms) for all its readers: 20 ms frames, exact and contiguous, video untouched', async () => {
      const open = await gw.openStream({ simNo: '13900000003', chanId: 1 });
      const stream = gw.bus.get(open.streamName)!;
      const a: AccessUnit[] = [];
      const v: AccessUnit[] = [];
      const s1 = stream.subscribe({ write: (u) => a.push(u) }, { via: { stage: 'g711-frames', params: { ms: 20 } }, media: 'a' });
      const s2 = stream.subscribe({ write: (u) => v.push(u) }, { via: 'g711-frames' });
      assert.equal(gw.bus.list().filter((s) => s.derivedFrom?.stream === open.streamName).length, 1, 'ms 20 is the default: one instance');
      const pub = gw.publish(open.streamName, clip, { realtime: false });
      await pub.done;
      await new Promise((r) => setImmediate(r));
      assert.ok(a.length >= 90, `${a.length} frames of 20 ms`);
      assert.ok(a.every((u) => u.payload.length === 160 && u.duration === 160 && u.timescale === 8000));
      for (let i = 1; i < a.length; i++) assert.equal(a[i].dtsTicks - a[i - 1].dtsTicks, 160, `frame ${i} follows on`);
      const vIn = clip.units.filter((u) => u.kind === 'video');
      assert.equal(v.filter((u) => u.kind === 'video')[0], vIn[0], 'video passes by reference');
      s1.close();
      s2.close();
      assert.equal(gw.bus.list().filter((s) => s.derivedFrom).length, 0, 'stopped with its last reader');
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it("serves the stage's audio as raw A-law that ffmpeg decodes to the 1 kHz tone; bad params answer 400", async () => {
      const open = await gw.openStream({ simNo: '13900000004', chanId: 1 });
      const pub = gw.publish(open.streamName, clip, { loop: true });
      await gw.waitReady(open.reqId);
      const base = `${gw.baseUrl}/g711/${open.streamName}?reqId=${open.reqId}&token=test-token`;
      assert.equal((await read(`${base}&ms=7`, 1)).status, 400);
      assert.equal((await read(base.replace('test-token', 'x'), 1)).status, 401);
      const got = await read(`${base}&ms=40`, 8000);
      pub.stop();
      assert.equal(got.status, 200);
      assert.equal(got.type, 'audio/PCMA');
      // decode with ffmpeg and find the tone's period: 8 samples at 8 kHz
      const r = spawnSync(findFfmpeg(), ['-v', 'error', '-f', 'alaw', '-ar', '8000', '-ac', '1', '-i', 'pipe:0', '-f', 's16le', 'pipe:1'], { input: got.body });
      assert.equal(r.status, 0, r.stderr?.toString());
      const pcm = r.stdout;
      let crossings = 0;
      for (let i = 2; i < pcm.length; i += 2) if (pcm.readInt16LE(i - 2) < 0 && pcm.readInt16LE(i) >= 0) crossings++;
      const seconds = pcm.length / 2 / 8000;
      assert.ok(Math.abs(crossings / seconds - 1000) < 30, `${(crossings / seconds).toFixed(0)} Hz`);
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  });
});
