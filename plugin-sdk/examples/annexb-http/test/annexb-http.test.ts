import assert from 'node:assert/strict';
import * as http from 'node:http';
import { probeVideo, startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../testkit';
import annexbHttp from '../index';

/** GET a URL and keep reading until `enough` says so (or the response ends); returns the status and the bytes. */
function read(url: string, enough: (bytes: number) => boolean): Promise<{ status: number; body: Buffer; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      const chunks: Buffer[] = [];
      let n = 0;
      const done = (ended: boolean) => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), ended });
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        n += c.length;
        if (enough(n)) {
          req.destroy();
          done(false);
        }
      });
      res.on('end', () => done(true));
    });
    req.on('error', reject);
  });
}

describe('example plugin: annexb-http (an output on its own port, through the test kit)', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  const clip = testClip({ seconds: 2 });
  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'annexb-http', def: annexbHttp },
      ],
    });
  });
  after(() => gw.stop());

  it("serves a request's video as raw H.264 that ffprobe decodes, from a keyframe, counted as a player", async () => {
    const open = await gw.openStream({ simNo: '13900000001', chanId: 1 });
    const url = open.urls!['annexb-http'];
    assert.match(url, new RegExp(`^http://127\\.0\\.0\\.1:${gw.ports['annexb-http.port']}/annexb/13900000001_1_1\\.h264\\?reqId=`));
    const pub = gw.publish(open.streamName, clip, { loop: true });
    await gw.waitReady(open.reqId);
    const clipBytes = clip.units.reduce((n, u) => n + u.payload.length, 0);
    // a second and a half of it, give or take: enough for more than one GOP
    const got = await read(url, (n) => n >= clipBytes * 0.75);
    assert.equal(got.status, 200);
    const status = (await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
    assert.equal(status.consumed, true);
    assert.ok(status.bytesOut >= got.body.length * 0.9, `bytes out counted: ${status.bytesOut}`);
    pub.stop();
    const p = await probeVideo(got.body, { format: 'h264' });
    assert.equal(`${p.width}x${p.height}`, '320x240');
    assert.ok(p.frames.length >= 30, `decoded ${p.frames.length} frames`);
    assert.equal(p.errors, '', 'no decoding errors: it started at a keyframe with its parameter sets');
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('refuses a wrong token with 401, and ends a player when its request closes', async () => {
    const open = await gw.openStream({ simNo: '13900000002', chanId: 1 });
    const url = open.urls!['annexb-http'];
    const refused = await read(url.replace(/token=[^&]*/, 'token=wrong'), () => false);
    assert.equal(refused.status, 401);
    const pub = gw.publish(open.streamName, clip, { loop: true });
    const playing = read(url, () => false);
    await gw.waitReady(open.reqId);
    await new Promise((r) => setTimeout(r, 200));
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    const got = await playing;
    assert.equal(got.status, 200);
    assert.equal(got.ended, true, 'the response ended with the request');
    assert.ok(got.body.length > 0);
    pub.stop();
  });
});
