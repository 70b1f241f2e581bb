/**
 * H.265 over RTMP as Enhanced RTMP, played by a client that says it reads it. Debian 12's ffmpeg (5.1) reads no
 * `hvc1`, so the client here is ours: the handshake, then connect with `fourCcList: ["hvc1"]` (E-RTMP v1), createStream
 * and play, and the server's chunk stream read back with node-media-server's parser (guarded-rtmp.ts). The video
 * messages are E-RTMP (`hvc1`, SequenceStart then coded frames) and read back into the very frames the stream carries;
 * a client whose connect names no `hvc1` is refused with a reason, before any media.
 */
import assert from 'node:assert/strict';
import nmsAmf = require('node-media-server/src/protocol/amf.js');
import { openStream } from '../../../plugin-sdk/testkit';
import type { AccessUnit } from '../../../plugin-sdk';
import { h265Clip } from '../../rtsp-out/test/helpers';
import { GuardedRtmp } from '../src/guarded-rtmp';
import { FlvUnits } from '../src/flv-units';
import { HOST, RawRtmp, startRtmpGateway, type RtmpGateway } from './helpers';
import { waitFor } from '../../../test/support/until';

interface Got {
  type: number;
  ts: number;
  body: Buffer;
}

/** the server's side of the chunk stream, read with NMS's parser: every message kept whole */
class ServerReader extends GuardedRtmp {
  readonly messages: Got[] = [];
  constructor() {
    super(8 << 20, 64);
    this.handshakeState = 3; // the handshake is RawRtmp's; chunks from here
    this.onOutputCallback = () => undefined;
  }
  override dataHandler(): void {
    const h = this.parserPacket.header;
    this.messages.push({ type: h.type, ts: this.parserPacket.clock, body: Buffer.from(this.parserPacket.payload.subarray(0, h.length)) });
  }
  override invokeHandler(): void {
    const h = this.parserPacket.header;
    this.messages.push({ type: h.type, ts: 0, body: Buffer.from(this.parserPacket.payload.subarray(0, h.length)) });
  }
}

async function play(port: number, url: string, enhanced: boolean): Promise<{ reader: ServerReader; client: RawRtmp }> {
  const u = new URL(url);
  const c = await RawRtmp.connect(port);
  const reader = new ServerReader();
  c.socket.on('data', (b: Buffer) => reader.parserData(b));
  const size = Buffer.alloc(4);
  size.writeUInt32BE(4096);
  c.write(RawRtmp.message(2, 1, size));
  const cmdObj: Record<string, unknown> = { app: 'live', tcUrl: `rtmp://${HOST}:${port}/live` };
  if (enhanced) cmdObj.fourCcList = Object.assign(['hvc1'], { sarray: true });
  c.write(RawRtmp.message(3, 20, nmsAmf.encodeAmf0Cmd({ cmd: 'connect', transId: 1, cmdObj })));
  c.write(RawRtmp.message(3, 20, nmsAmf.encodeAmf0Cmd({ cmd: 'createStream', transId: 2, cmdObj: null })));
  const name = `${u.pathname.split('/').pop()}${u.search}`;
  c.write(RawRtmp.message(8, 20, nmsAmf.encodeAmf0Cmd({ cmd: 'play', transId: 3, cmdObj: null, streamName: name }), 1));
  return { reader, client: c };
}

describe('rtmp: H.265 as Enhanced RTMP to a client that reads it', function () {
  this.timeout(60_000);
  let g: RtmpGateway;

  before(async () => {
    g = await startRtmpGateway({}, { outputs: false });
  });
  after(async () => g?.stop());

  it("sends hvc1 SequenceStart and coded frames that read back into the stream's frames", async () => {
    const clip = h265Clip();
    const o = await openStream(g.gw, { simNo: 'hevc1', chanId: 1, scheme: 'rtmp', dataTyp: 1 });
    const pub = g.gw.publish(o.streamName, clip, { loop: true });
    await g.gw.waitReady(o.reqId);
    const { reader, client } = await play(g.port, o.playUrl, true);
    try {
      await waitFor('30 video messages', () => reader.messages.filter((m) => m.type === 9).length >= 30, 20_000);
    } finally {
      client.destroy();
      pub.stop();
    }
    const video = reader.messages.filter((m) => m.type === 9);
    // E-RTMP: [1|frameType|packetType] 'hvc1'; first the SequenceStart (packet type 0)
    for (const m of video) {
      assert.equal(m.body[0] & 0x80, 0x80, 'an Enhanced RTMP video message');
      assert.equal(m.body.subarray(1, 5).toString('latin1'), 'hvc1');
    }
    assert.equal(video[0].body[0] & 0x0f, 0, 'SequenceStart first');
    const units: AccessUnit[] = [];
    const back = new FlvUnits({ track: () => undefined, unit: (u) => units.push(u), unsupported: (w) => assert.fail(w) }, 4 << 20);
    for (const m of video) back.message(9, m.ts, m.body);
    assert.ok(units.length >= 25, `${units.length} frames`);
    assert.equal(units[0].keyframe, true);
    // each frame ends with the bytes of one of the clip's frames (its slice data)
    const tails = new Set(clip.units.filter((u) => u.kind === 'video').map((u) => u.payload.subarray(-48).toString('hex')));
    for (const u of units) assert.ok(tails.has(u.payload.subarray(-48).toString('hex')), 'a frame of the clip');
  });

  it('refuses a client whose connect names no hvc1, saying why, before any media', async () => {
    const clip = h265Clip();
    const o = await openStream(g.gw, { simNo: 'hevc2', chanId: 1, scheme: 'rtmp', dataTyp: 1 });
    const pub = g.gw.publish(o.streamName, clip, { loop: true });
    await g.gw.waitReady(o.reqId);
    const { reader, client } = await play(g.port, o.playUrl, false);
    try {
      assert.equal(await client.waitClosed(10_000), true, 'the gateway closed the connection');
    } finally {
      client.destroy();
      pub.stop();
    }
    const text = reader.messages
      .filter((m) => m.type === 20)
      .map((m) => m.body.toString('latin1'))
      .join('|');
    assert.match(text, /NetStream\.Play\.Failed/);
    assert.match(text, /Enhanced RTMP/);
    assert.equal(reader.messages.filter((m) => m.type === 9).length, 0, 'no video sent');
  });
});
