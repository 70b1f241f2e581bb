/**
 * A second independent client: GStreamer's rtspsrc (Debian's python3-gi and GStreamer plugins, which the test tools
 * install for rtsp-source's tests), each stream through its depayloader and parser. No decoder is needed: the parsers
 * read the parameter sets (size) from what arrives, and count the frames.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { repoRoot } from '../../../test/support/paths';
import { h264Clip, h265Clip, startRtspGateway, type RtspGateway } from './helpers';
import { runProcess } from '../../../test/support/run-process';

const PROBE = path.join(repoRoot, 'plugins', 'rtsp-out', 'test', 'gst-rtsp-probe.py');

interface GstResult {
  streams: Array<{ caps: string | null; buffers: number }>;
  errors: string[];
}

async function gstPlay(url: string, proto: 'tcp' | 'udp', seconds: number): Promise<GstResult> {
  const r = await runProcess('/usr/bin/python3', [PROBE, url, proto, String(seconds)], 60_000);
  assert.equal(r.code, 0, `GStreamer probe (needs python3-gi and gstreamer1.0-plugins-good/-bad): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as GstResult;
}

describe('rtsp-out: GStreamer rtspsrc plays the play URL', function () {
  this.timeout(90_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway();
  });
  after(() => g.stop());

  const cases = [
    { codec: 'h264', proto: 'tcp', caps: /^video\/x-h264, .*width=\(int\)320, height=\(int\)240/ },
    { codec: 'h265', proto: 'udp', caps: /^video\/x-h265, .*width=\(int\)320, height=\(int\)240/ },
  ] as const;
  let sim = 13900003001;
  for (const c of cases) {
    it(`${c.codec.toUpperCase()} + PCMA over ${c.proto.toUpperCase()}: parsed as 320x240 ${c.codec.toUpperCase()} and 8 kHz A-law`, async () => {
      const open = await g.open(String(sim++));
      const pub = g.gw.publish(open.stream, c.codec === 'h264' ? h264Clip() : h265Clip(), { loop: true });
      await g.gw.waitReady(open.reqId);
      const r = await gstPlay(open.url, c.proto, 3);
      pub.stop();
      assert.deepEqual(r.errors, []);
      const video = r.streams.find((s) => s.caps?.startsWith('video/'));
      const audio = r.streams.find((s) => s.caps?.startsWith('audio/'));
      assert.match(video?.caps ?? '', c.caps);
      assert.ok((video?.buffers ?? 0) >= 25, `video frames: ${video?.buffers}`);
      assert.match(audio?.caps ?? '', /^audio\/x-alaw, .*rate=\(int\)8000/);
      assert.ok((audio?.buffers ?? 0) > 10, `audio buffers: ${audio?.buffers}`);
      await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  }
});

describe('rtsp-out: GStreamer rtspsrc takes the AAC (mpeg4-generic) track', function () {
  this.timeout(60_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway({ audioCodecs: ['aac'] }, [{ name: 'audio-aac' }]);
  });
  after(() => g.stop());

  it('G.711A through the AAC stage: rtpmp4gdepay and aacparse read 8 kHz mono AAC from our fmtp', async () => {
    const open = await g.open('13900003101');
    const pub = g.gw.publish(open.stream, h264Clip(), { loop: true });
    await g.gw.waitReady(open.reqId);
    const r = await gstPlay(open.url, 'tcp', 3);
    pub.stop();
    assert.deepEqual(r.errors, []);
    const audio = r.streams.find((s) => s.caps?.startsWith('audio/'));
    assert.match(audio?.caps ?? '', /^audio\/mpeg, .*mpegversion=\(int\)4/);
    assert.match(audio?.caps ?? '', /rate=\(int\)8000/);
    assert.match(audio?.caps ?? '', /channels=\(int\)1/);
    assert.ok((audio?.buffers ?? 0) >= 10, `AAC frames: ${audio?.buffers}`);
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
