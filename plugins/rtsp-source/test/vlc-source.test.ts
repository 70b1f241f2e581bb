/**
 * rtsp-source against VLC's RTSP server (Debian's VLC: stream_out_rtp's own RTSP server and packetisers, not live555,
 * which Debian's VLC is built without): `cvlc clip.mkv --sout '#rtp{sdp=rtsp://127.0.0.1:PORT/cam}'` serves a
 * 20 s clip ffmpeg made, longer than a test (with `--loop`, VLC's RTP timestamps step back about a second at each
 * restart of the file, which any client sees: ffmpeg's own RTSP client gets the same non-monotonic times). VLC's server offers RTP over UDP only (a SETUP asking for TCP interleaving gets 461), so
 * the gateway's default transport (auto) falls back to UDP, and a forced tcp fails. Its SDP has its own quirks: both tracks on payload type 96, fmtp
 * parameters in mixed case (`SizeLength`, `IndexLength`) with a trailing `;`, `mpeg4-generic/16000` without a
 * channel count, and an AAC config with an SBR sync extension.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { giveToVlc, requireVlc, startVlc, stopAllVlc, vlcDir, type Vlc } from '../../../test/support/vlc';
import { collectVideo, decodeUrl, probeFile, probeUrl } from './support/publisher';
import { requireTool } from '../../../test/support/tools';
import { metricValue, openRtsp, startGateway, statusOf, assertTracks, until } from './helpers';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** one RTSP request on a fresh connection; the status and body of the answer (undefined: nothing listening yet) */
function rtspRequest(port: number, method: string, url: string, headers: string[] = []): Promise<{ status: number; head: string; body: string } | undefined> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write([`${method} ${url} RTSP/1.0`, 'CSeq: 1', ...headers].join('\r\n') + '\r\n\r\n'));
    let buf = '';
    const done = (v: { status: number; head: string; body: string } | undefined): void => {
      clearTimeout(t);
      s.destroy();
      resolve(v);
    };
    const t = setTimeout(() => done(undefined), 3000);
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.slice(0, end);
      const len = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      done({ status: Number(/^RTSP\/1\.0 (\d{3})/.exec(head)?.[1] ?? 0), head, body: buf.slice(end + 4, end + 4 + len) });
    });
    s.on('error', () => done(undefined));
  });
}

interface VlcServer {
  vlc: Vlc;
  url: string;
  sdp: string;
  port: number;
}

type ClipKind = 'h264-aac' | 'h265-pcma';
const clips = new Map<ClipKind, string>();

/** a 20 s clip in Matroska (320x240 test pattern at 25 fps, a keyframe a second; a 1 kHz tone), made once */
function clipFile(kind: ClipKind): string {
  const have = clips.get(kind);
  if (have) return have;
  const dir = vlcDir('clips');
  dirs.push(dir);
  const file = path.join(dir, `${kind}.mkv`);
  const [video, audio] =
    kind === 'h264-aac'
      ? [
          ['-c:v', 'libx264', '-preset', 'ultrafast', '-g', '25', '-bf', '0', '-pix_fmt', 'yuv420p'],
          ['-c:a', 'aac', '-ar', '16000', '-ac', '1'],
        ]
      : [
          ['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', 'keyint=25:bframes=0:log-level=error'],
          ['-c:a', 'pcm_alaw', '-ar', '8000', '-ac', '1'],
        ];
  const r = spawnSync(
    requireTool('ffmpeg', 'ffmpeg'),
    [
      '-v',
      'error',
      '-y',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=320x240:rate=25',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=1000:sample_rate=16000',
      '-t',
      '20',
      ...video,
      ...audio,
      file,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (r.status !== 0) throw new Error(`ffmpeg could not make the ${kind} clip: ${r.stderr}`);
  clips.set(kind, file);
  return file;
}

/** VLC serving the clip over RTSP; resolves once its DESCRIBE lists both tracks */
async function startVlcServer(kind: ClipKind): Promise<VlcServer> {
  requireVlc();
  const dir = vlcDir('rtsp-server');
  dirs.push(dir);
  const clip = giveToVlc(dir, clipFile(kind), 'clip.mkv');
  const port = await freePort();
  const url = `rtsp://127.0.0.1:${port}/cam`;
  const vlc = startVlc(dir, ['-vv', clip, '--sout', `#rtp{sdp=${url}}`]);
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (vlc.proc.exitCode !== null) throw new Error(`VLC exited ${vlc.proc.exitCode}: ${vlc.log().slice(-3000)}`);
    const r = await rtspRequest(port, 'DESCRIBE', url, ['Accept: application/sdp']);
    if (r?.status === 200 && /^m=video/m.test(r.body) && /^m=audio/m.test(r.body)) return { vlc, url, sdp: r.body, port };
    if (Date.now() > deadline)
      throw new Error(`VLC's RTSP server did not describe ${url} with both tracks (last: ${r?.head ?? 'no answer'}): ${vlc.log().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

const dirs: string[] = [];

/** rtsp-source's gauges over the open pulls: packets lost, not RTP, payloads that broke their RFC, units dropped */
async function pullFaults(gw: TestGateway): Promise<Record<string, number>> {
  const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const name of ['rtp_lost_packets', 'rtp_bad_packets', 'payload_malformed', 'frames_dropped']) {
    const m = new RegExp(`^gw_rtsp_source_${name} (\\S+)$`, 'm').exec(text);
    assert.ok(m, `metric gw_rtsp_source_${name}`);
    out[name] = Number(m[1]);
  }
  return out;
}
/** `n` audio units of a bus stream as they come */
function collectAudio(gw: TestGateway, stream: string, n: number): Promise<Array<{ codec: string; bytes: number }>> {
  const s = gw.bus.get(stream);
  assert.ok(s, `bus stream ${stream}`);
  return new Promise((resolve, reject) => {
    const got: Array<{ codec: string; bytes: number }> = [];
    const t = setTimeout(() => {
      sub.close();
      reject(new Error(`only ${got.length} of ${n} audio units of ${stream} came`));
    }, 15_000);
    const sub = s.subscribe(
      {
        write(u) {
          if (u.kind !== 'audio' || got.length >= n) return;
          got.push({ codec: u.codec, bytes: u.payload.length });
          if (got.length === n) {
            clearTimeout(t);
            queueMicrotask(() => sub.close());
            resolve(got);
          }
        },
      },
      { media: 'a' },
    );
  });
}
const NO_FAULTS = { rtp_lost_packets: 0, rtp_bad_packets: 0, payload_malformed: 0 };
/**
 * VLC streams from its start whoever listens, so a pull joins mid-GOP and the depacketiser drops the frames before
 * the first keyframe (at most one GOP: 25 here). Those are counted at ready; from then on no frame may drop.
 */
async function joinDrops(gw: TestGateway): Promise<number> {
  const { frames_dropped: joined, ...rest } = await pullFaults(gw);
  assert.deepEqual(rest, NO_FAULTS, "VLC's SDP and packets understood: nothing lost, malformed or not RTP");
  assert.ok(joined <= 25, `${joined} frames dropped before the first keyframe: more than one GOP`);
  return joined;
}
async function assertNoLaterFaults(gw: TestGateway, joined: number): Promise<void> {
  assert.deepEqual(await pullFaults(gw), { ...NO_FAULTS, frames_dropped: joined }, 'nothing lost, malformed or dropped after the first keyframe');
}

describe("rtsp-source: VLC's RTSP server as the camera", function () {
  this.timeout(60_000);
  let gw: TestGateway;
  before(async () => {
    // the default transport: no config key
    gw = await startGateway({ allowHosts: ['127.0.0.1'], openTimeoutSec: 15 });
  });
  after(async () => {
    await gw?.stop();
    await stopAllVlc();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('H.264 + AAC from VLC with the default transport: TCP refused, UDP plays as FLV (ffprobe: h264 320x240 + aac; ffmpeg decodes 2 s of both cleanly)', async () => {
    const srv = await startVlcServer('h264-aac');
    // the server under test is VLC's own: its SDP, and no TCP interleaving
    assert.match(srv.sdp, /^a=tool:vlc /m);
    assert.match(srv.sdp, /^a=rtpmap:\d+ H264\/90000/m);
    assert.match(srv.sdp, /^a=rtpmap:\d+ mpeg4-generic\/16000/m);
    const r = await openRtsp(gw, '950000000001', { url: srv.url });
    assert.equal(r.errCode, 0, `${r.message}\nVLC: ${srv.vlc.log().slice(-2000)}`);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 20_000);
    const joined = await joinDrops(gw);
    const st = await statusOf(gw, reqId);
    assertTracks(st, { kind: 'video', codec: 'h264', width: 320, height: 240 }, { kind: 'audio', codec: 'aac', sampleRate: 16000 });
    const playUrl = String(r.data![0].playUrl);
    const p = await probeUrl(playUrl);
    const v = p.streams.find((s) => s.codec_type === 'video');
    assert.equal(v?.codec_name, 'h264');
    assert.equal(`${v?.width}x${v?.height}`, '320x240');
    assert.equal(p.streams.find((s) => s.codec_type === 'audio')?.codec_name, 'aac');
    const d = await decodeUrl(playUrl, 2);
    assert.equal(d.errors, '', 'every video and audio frame VLC sent decodes');
    assert.ok(d.frames.video >= 25, `decoded ${d.frames.video} video frames`);
    await assertNoLaterFaults(gw, joined);
    // auto asked TCP, VLC refused it (461), the pull went on over UDP
    assert.equal(await metricValue(gw, 'transport_fallbacks_total', { from: 'tcp', to: 'udp', reason: 'refused' }), 1);
    assert.equal(await metricValue(gw, 'pulls_transport', { transport: 'udp' }), 1);
    assert.match(gw.logText(), /TCP failed \(461 [^)]*to SETUP\), falling back to UDP/);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
    await until('the pull to stop', async () => (await metricValue(gw, 'pulls')) === 0);
    // the next pull of this VLC goes straight to UDP: no second fallback
    const again = await openRtsp(gw, '950000000004', { url: srv.url });
    assert.equal(again.errCode, 0, again.message);
    await gw.waitReady(String(again.data![0].reqId), 20_000);
    assert.equal(await metricValue(gw, 'transports_used_total', { transport: 'udp', how: 'remembered' }), 1);
    assert.equal(await metricValue(gw, 'transport_fallbacks_total'), 1);
    await gw.api('POST', '/strm/close', { reqIds: [again.data![0].reqId] });
    await srv.vlc.stop();
  });

  it('H.265 + PCMA from VLC: the units decode cleanly (ffprobe: hevc 320x240), the audio is 8 kHz A-law', async () => {
    const srv = await startVlcServer('h265-pcma');
    assert.match(srv.sdp, /^a=rtpmap:\d+ H265\/90000/m);
    assert.match(srv.sdp, /^m=audio \d+ RTP\/AVP 8\b/m, 'VLC sends A-law as the static payload type 8');
    const r = await openRtsp(gw, '950000000002', { url: srv.url });
    assert.equal(r.errCode, 0, `${r.message}\nVLC: ${srv.vlc.log().slice(-2000)}`);
    const reqId = String(r.data![0].reqId);
    await gw.waitReady(reqId, 20_000);
    const joined = await joinDrops(gw);
    const st = await statusOf(gw, reqId);
    assertTracks(st, { kind: 'video', codec: 'h265', width: 320, height: 240 }, { kind: 'audio', codec: 'g711a', sampleRate: 8000 });
    // Debian's ffmpeg 5.1 cannot read H.265 in FLV: the bus's units themselves go to ffprobe
    const p = await probeFile(await collectVideo(gw, String(st.stream), 50), 'hevc');
    assert.deepEqual([p.codec, p.width, p.height, p.errors], ['hevc', 320, 240, '']);
    assert.ok(p.frames >= 50, `ffprobe decoded ${p.frames} frames`);
    // A-law comes as it was sent: one byte a sample, 8000 a second (25 units of VLC's packets make well over 0.1 s)
    const audio = await collectAudio(gw, String(st.stream), 25);
    assert.ok(
      audio.every((u) => u.codec === 'g711a' && u.bytes > 0),
      JSON.stringify(audio.slice(0, 3)),
    );
    assert.ok(audio.reduce((n, u) => n + u.bytes, 0) >= 800, `A-law bytes: ${audio.reduce((n, u) => n + u.bytes, 0)}`);
    await assertNoLaterFaults(gw, joined);
    await gw.api('POST', '/strm/close', { reqIds: [reqId] });
    await srv.vlc.stop();
  });

  it("a forced tcp (the open's rtspSrc.transport, or the site's transport) answers -3 naming VLC's 461 and what to change, without a fallback", async () => {
    const srv = await startVlcServer('h264-aac');
    const tcp = await startGateway({ allowHosts: ['127.0.0.1'], transport: 'tcp' });
    try {
      const fallbacks = await metricValue(gw, 'transport_fallbacks_total');
      const r = await openRtsp(gw, '950000000003', { url: srv.url, transport: 'tcp' });
      assert.equal(r.errCode, -3, r.message);
      assert.match(r.message, /could not be played: TCP refused \(461 [^)]*to SETUP\); the open forces tcp \(rtspSrc\.transport\): ask auto instead\.$/);
      const s = await openRtsp(tcp, '950000000003', { url: srv.url });
      assert.equal(s.errCode, -3, s.message);
      assert.match(s.message, /TCP refused \(461 [^)]*to SETUP\); this site forces tcp \(rtsp-source's transport\)/);
      assert.equal(await metricValue(gw, 'transport_fallbacks_total'), fallbacks, 'no fallback when forced');
      assert.equal(await metricValue(tcp, 'transport_fallbacks_total'), 0);
    } finally {
      await tcp.stop();
      await srv.vlc.stop();
    }
  });
});
