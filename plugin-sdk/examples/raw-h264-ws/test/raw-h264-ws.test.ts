import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { definePlugin, filterStage, type PluginDefinition } from '../../..';
import { probeVideo, startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../testkit';
import rawH264Ws from '../index';

/** a stage for `via`: key frames only */
const videoThinner = definePlugin({
  name: 'video-thinner',
  setup(ctx) {
    ctx.bus.registerStage(filterStage({ name: 'video-thinner', create: () => (u) => u.keyframe }));
  },
}) as PluginDefinition<object>;

interface Played {
  /** the binary messages, in order */
  messages: Buffer[];
  code: number;
  reason: string;
}

/** Plays a URL until `enough` says so (then closes it) or the server closes it. */
function play(url: string, enough: (bytes: number) => boolean = () => false): Promise<Played> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const messages: Buffer[] = [];
    let bytes = 0;
    ws.on('message', (m: Buffer) => {
      messages.push(m);
      bytes += m.length;
      if (enough(bytes)) ws.close(1000, 'enough');
    });
    ws.on('close', (code, reason) => resolve({ messages, code, reason: reason.toString() }));
    ws.on('error', reject);
  });
}

describe('example plugin: raw-h264-ws (a WebSocket output on the API port, through the test kit)', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  const clip = testClip({ seconds: 2 });
  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'raw-h264-ws', def: rawH264Ws },
        { name: 'video-thinner', def: videoThinner },
      ],
      captureLogs: true,
    });
  });
  after(() => gw.stop());

  it("sends the stream's H.264 from a key frame, one frame a message, that ffprobe decodes; the player is counted", async () => {
    const open = await gw.openStream({ simNo: '13900000011', chanId: 1 });
    const url = open.urls!['raw-h264-ws'];
    assert.equal(url, `ws://127.0.0.1:${gw.ports['gateway.httpPort']}/raw-h264/13900000011_1_1?reqId=${encodeURIComponent(open.reqId)}&token=test-token`);
    const pub = gw.publish(open.streamName, clip, { loop: true });
    await gw.waitReady(open.reqId);
    const clipBytes = clip.units.reduce((n, u) => n + u.payload.length, 0);
    const got = await play(url, (n) => n >= clipBytes * 0.75);
    const status = (await gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
    pub.stop();
    assert.equal(status.consumed, true);
    const body = Buffer.concat(got.messages);
    assert.ok(status.bytesOut >= body.length * 0.9, `bytes out counted: ${status.bytesOut} of ${body.length}`);
    // the track's parameter sets first, then one message a frame from a key frame
    assert.ok(got.messages[0].includes(Buffer.from([0, 0, 0, 1, 0x67])), 'an SPS in the first message');
    assert.ok(got.messages[0].includes(Buffer.from([0, 0, 0, 1, 0x68])), 'a PPS in the first message');
    const p = await probeVideo(body, { format: 'h264' });
    assert.equal(`${p.codec} ${p.width}x${p.height}`, 'h264 320x240');
    assert.equal(p.frames.length, got.messages.length - 1, 'each message after the parameter sets is a frame');
    assert.equal(p.frames[0].keyFrame, true);
    assert.equal(p.errors, '', 'no decoding errors: it started at a key frame with its parameter sets');
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('refuses an unknown stage with 4400 and a log line, a wrong token with 4401; a via stage is honoured', async () => {
    const open = await gw.openStream({ simNo: '13900000012', chanId: 1 });
    const url = open.urls!['raw-h264-ws'];
    const unknown = await play(`${url}&via=nope`);
    assert.equal(unknown.code, 4400);
    assert.equal(unknown.reason, "via: no stage 'nope' on this gateway (stages: video-thinner)");
    assert.ok(gw.logs.some((l) => l.msg === "play refused: via: no stage 'nope' on this gateway (stages: video-thinner)" && l.protocol === 'raw-h264-ws'));
    const refused = await play(`${url}&via=nope`.replace(/token=[^&]*/, 'token=wrong'));
    assert.deepEqual([refused.code, refused.reason, refused.messages.length], [4401, 'unauthorized', 0], 'the token is checked first');

    // through the video-thinner stage: key frames only (one a second in this clip)
    const pub = gw.publish(open.streamName, clip, { loop: true });
    await gw.waitReady(open.reqId);
    let count = 0;
    // the parameter sets, then three key frames
    const thin = await play(`${url}&via=video-thinner`, () => ++count === 4);
    pub.stop();
    const p = await probeVideo(Buffer.concat(thin.messages), { format: 'h264' });
    assert.deepEqual(
      p.frames.map((f) => f.pictType),
      ['I', 'I', 'I'],
    );
    assert.equal(p.errors, '');
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('closes the socket when its request closes', async () => {
    const open = await gw.openStream({ simNo: '13900000013', chanId: 1 });
    const pub = gw.publish(open.streamName, clip, { loop: true });
    let first!: () => void;
    const gotOne = new Promise<void>((r) => {
      first = r;
    });
    const playing = play(open.urls!['raw-h264-ws'], () => {
      first();
      return false;
    });
    await gotOne;
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    const got = await playing;
    pub.stop();
    assert.equal(got.code, 1000, 'closed by the server, normally');
    assert.equal(got.reason, 'request closed');
    assert.ok(got.messages.length > 0);
  });
});
