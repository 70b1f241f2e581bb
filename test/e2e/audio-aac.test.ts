/**
 * Terminal audio to browsers, end to end: the gojt808 capture (H.264 + G.711A) pushed over TCP, through
 * jt1078-ingest, the bus, the audio-aac stage and flv-out, to HTTP-FLV players; ffmpeg decodes what they got.
 * The capture's audio is replaced by silence with one 1 kHz burst at a known place, so the test can see where the
 * burst lands in the decoded AAC and compare it with the video timeline.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import type { AccessUnit } from '../../plugin-sdk/media';
import { linearToAlaw } from '../../plugin-sdk/testkit';
import type { Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { Jt1078StreamAssembler } from '../../plugins/jt1078-ingest/src/stream-assembler';
import { parseFlv, type ReadTag } from '../support/flv-reader';
import { requireTool } from '../support/tools';
import { HttpFlvPlayer, TcpTerminal, capture, closeReq, codedAudio, codedVideo, encodeCapture, ffprobe, openLive, useE2eGateway, waitFor } from './helpers';

const CAP = { file: 'jt1078/gojt808-d1-h264-g711a-2013.bin', sim: '156987000796', channel: 1 };
const SILENCE = 0xd5; // A-law zero

/** The capture with its audio replaced: silence, and a 1 kHz tone in the audio packets from `burstAt` on for 300 ms. */
function withBurst(packets: Jt1078Packet[]): { packets: Jt1078Packet[]; burstDts: number } {
  const firstKey = packets.find((p) => p.dataType === 0)!.timestamp;
  const burstFrom = firstKey + 2000;
  let phase = 0;
  const out = packets.map((p) => {
    if (p.dataType !== 3) return p;
    const body = Buffer.alloc(p.body.length, SILENCE);
    if (p.timestamp >= burstFrom && p.timestamp < burstFrom + 300) {
      for (let i = 0; i < body.length; i++, phase++) body[i] = linearToAlaw(Math.round(12000 * Math.sin((2 * Math.PI * 1000 * phase) / 8000)));
    }
    return { ...p, body };
  });
  // where the ingest puts the first tone frame on the stream's timeline: its own assembler says
  let burstDts = NaN;
  const asm = new Jt1078StreamAssembler(
    {
      onTrack: () => undefined,
      onAccessUnit: (au: AccessUnit) => {
        if (au.kind === 'audio' && Number.isNaN(burstDts) && au.payload.some((b) => b !== SILENCE)) burstDts = au.dts;
      },
    },
    { now: () => 0 },
  );
  for (const p of out) asm.push(p);
  assert.ok(!Number.isNaN(burstDts), 'the burst is in the capture');
  return { packets: out, burstDts };
}

function probeStreams(flv: Buffer): Array<Record<string, string | number>> {
  const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-f', 'flv', '-i', 'pipe:0', '-show_streams', '-of', 'json'], {
    input: flv,
    maxBuffer: 1 << 27,
  });
  assert.equal(r.status, 0, r.stderr.toString());
  return (JSON.parse(r.stdout.toString()) as { streams: Array<Record<string, string | number>> }).streams;
}

/** the FLV's audio decoded by ffmpeg, mono float at 8 kHz */
function decodeAudio(flv: Buffer): Float32Array {
  const r = spawnSync(
    requireTool('ffmpeg', 'ffmpeg'),
    ['-v', 'error', '-f', 'flv', '-i', 'pipe:0', '-vn', '-f', 'f32le', '-ac', '1', '-ar', '8000', 'pipe:1'],
    { input: flv, maxBuffer: 1 << 27 },
  );
  assert.equal(r.status, 0, r.stderr.toString());
  const b = Buffer.from(r.stdout);
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
}

/** where the tone starts: the first of 40 samples (5 ms) whose 1 ms peak (a whole 1 kHz period) is above the level */
function onset(x: Float32Array, level: number): number {
  for (let i = 0, run = 0; i + 8 <= x.length; i++) {
    let peak = 0;
    for (let k = 0; k < 8; k++) peak = Math.max(peak, Math.abs(x[i + k]!));
    run = peak > level ? run + 1 : 0;
    if (run === 40) return i - 39;
  }
  return -1;
}

async function play(e: ReturnType<typeof useE2eGateway>, packets: Jt1078Packet[], over: Record<string, unknown>): Promise<Buffer> {
  const open = await openLive(e.gw, CAP.sim, CAP.channel, over);
  const player = await HttpFlvPlayer.connect(open.playUrl);
  const term = await TcpTerminal.connect(e.live2013);
  await term.send(encodeCapture(packets), 32, 2);
  // the last audio leaves the encoder only as later audio comes in: wait until the player's data stops growing
  let last = -1;
  await waitFor(
    'the player to have it all',
    () => {
      const n = player.bytes;
      const settled = n === last && n > 0;
      last = n;
      return settled;
    },
    20_000,
    500,
  );
  await term.end();
  await closeReq(e.gw, open.reqId);
  return player.data();
}

describe('e2e: terminal audio as AAC in FLV (jt1078-ingest + audio-aac + flv-out)', function () {
  this.timeout(90_000);
  const e = useE2eGateway({}, {}, [{ name: 'audio-aac' }]);
  const cap = withBurst(capture(CAP.file).packets);

  it('G.711A becomes AAC-LC 8 kHz that ffmpeg decodes, each frame in its place, the burst within 100 ms of where the video timeline has it', async () => {
    const flv = await play(e, cap.packets, {});
    const parsed = parseFlv(flv);
    const streams = probeStreams(flv);
    const a = streams.find((s) => s.codec_type === 'audio')!;
    assert.deepEqual([a.codec_name, Number(a.sample_rate), a.channels], ['aac', 8000, 1]);
    assert.ok(streams.some((s) => s.codec_type === 'video' && s.codec_name === 'h264'));
    const p = ffprobe(flv, 'flv');
    assert.equal(p.errors, '', 'ffmpeg decodes video and audio without a complaint');
    assert.ok(p.frames > 50, `${p.frames} video frames`);

    const aac: ReadTag[] = codedAudio(parsed.tags);
    assert.ok(aac.length > 20, `${aac.length} AAC frames`);
    // 1024 samples at 8 kHz: 128 ms a frame, back to back (whole-ms FLV timestamps round); the first is the
    // encoder's lead-in, timed 128 ms before the stream's first audio, which FLV clamps to 0 at the stream's start
    for (let i = 2; i < aac.length; i++) {
      const step = aac[i].timestamp - aac[i - 1].timestamp;
      assert.ok(step >= 127 && step <= 129, `AAC frame ${i} follows on (${step} ms)`);
    }
    // where the burst starts in the decoded audio, counted back from the end of the last frame (the first frame's
    // timestamp may be clamped at 0: the encoder's lead-in starts before the stream does)
    const pcm = decodeAudio(flv);
    const at = onset(pcm, 0.05);
    assert.ok(at > 0, 'the burst is in the decoded audio');
    const endMs = aac[aac.length - 1].timestamp + 128;
    const burstMs = endMs - ((pcm.length - at) * 1000) / 8000;
    assert.ok(Math.abs(burstMs - cap.burstDts) < 100, `the burst plays at ${burstMs.toFixed(0)} ms, the terminal sent it at ${cap.burstDts} ms`);
    // and the video covers the same time: players interleave by these timestamps
    const video = codedVideo(parsed.tags);
    assert.ok(video[0].timestamp <= cap.burstDts && video[video.length - 1].timestamp >= cap.burstDts, "the burst is inside the video's time");
  });

  it('dataTyp 1 gets video only (no audio flag in the FLV header); dataTyp 3 (listen) gets AAC only', async () => {
    const v = await play(e, cap.packets, { dataTyp: 1 });
    assert.equal(v[4] & 0x05, 0x01, 'FLV header: video, no audio');
    assert.equal(codedAudio(parseFlv(v).tags).length, 0);
    assert.ok(codedVideo(parseFlv(v).tags).length > 50);

    const a = await play(e, cap.packets, { dataTyp: 3 });
    assert.equal(a[4] & 0x05, 0x04, 'FLV header: audio, no video');
    const tags = parseFlv(a).tags;
    assert.equal(codedVideo(tags).length, 0);
    assert.ok(codedAudio(tags).length > 20);
    const streams = probeStreams(a);
    assert.deepEqual(
      streams.map((s) => `${s.codec_type}:${s.codec_name}`),
      ['audio:aac'],
    );
  });
});

describe('e2e: G.711 kept as received for players that take it (audioCodecs lists it)', function () {
  this.timeout(90_000);
  const e = useE2eGateway({}, { audioCodecs: ['aac', 'g711a', 'g711u'] }, [{ name: 'audio-aac' }]);
  const cap = withBurst(capture(CAP.file).packets);

  it('the AAC stage passes G.711A through: ffmpeg finds pcm_alaw', async () => {
    const flv = await play(e, cap.packets, {});
    const streams = probeStreams(flv);
    assert.ok(streams.some((s) => s.codec_type === 'audio' && s.codec_name === 'pcm_alaw'));
  });
});
