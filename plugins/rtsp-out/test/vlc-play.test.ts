/**
 * VLC (Debian's) receiving rtsp-out's RTP. Debian builds VLC without live555 (`--disable-live555`), which is VLC's
 * only RTSP client for anything but SAT>IP and RealServer: `cvlc rtsp://…/live/…` ends in "VLC is unable to open
 * the MRL" whatever the server (`--rtsp-tcp`, live555's option, is not even known), so VLC cannot play the play URL
 * itself here, over TCP or UDP, and its own RTP input (`rtp://@host:port`) depacketises only static payload types
 * (G.711, MPEG audio/video, MP2T), not H.264/H.265.
 * What VLC can check with its own code is the audio track: the test plays the RTSP sequence over the play URL
 * (DESCRIBE, SETUP of the audio track over UDP with VLC's port as `client_port`, PLAY) and VLC's RTP input receives,
 * orders and decodes what rtsp-out sends, transcoding it to 16-bit PCM in a WAV file. The terminal is a real
 * capture (gojt808: H.264 720x576 + G.711A) replayed by the ingest's simulator into jt1078-ingest.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { fixturePath } from '../../../test/support/paths';
import { requireVlc, startVlc, stopAllVlc, vlcDir, type Vlc } from '../../../test/support/vlc';
import rtspOut from '../index';
import { RawRtsp } from './helpers';
import { requireTool } from '../../../test/support/tools';
import { alawToS16 } from '../../../test/support/audio';
import { runProcess } from '../../../test/support/run-process';
import { waitFor } from '../../../test/support/until';

/** whether something holds the UDP port (VLC has bound it once we cannot) */
function udpPortTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.once('error', () => resolve(true));
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(false)));
  });
}

/** an even port whose pair (RTP, RTCP) is free now */
async function freeUdpPair(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = 20_000 + 2 * Math.floor(Math.random() * 20_000);
    if (!(await udpPortTaken(p)) && !(await udpPortTaken(p + 1))) return p;
  }
  throw new Error('no free UDP port pair');
}

/** the 16-bit samples of a canonical PCM WAV file */
function wavSamples(file: string): { rate: number; channels: number; bits: number; samples: Int16Array } {
  const b = fs.readFileSync(file);
  assert.equal(b.toString('latin1', 0, 4), 'RIFF');
  let off = 12;
  let fmt: { rate: number; channels: number; bits: number } | undefined;
  while (off + 8 <= b.length) {
    const id = b.toString('latin1', off, off + 4);
    let len = b.readUInt32LE(off + 4);
    if (id === 'fmt ') fmt = { channels: b.readUInt16LE(off + 10), rate: b.readUInt32LE(off + 12), bits: b.readUInt16LE(off + 22) };
    if (id === 'data') {
      assert.ok(fmt, 'fmt chunk before data');
      // a header VLC could not finish says 0 or more than there is: take what is in the file
      if (len === 0 || off + 8 + len > b.length) len = b.length - off - 8;
      const data = b.subarray(off + 8, off + 8 + (len & ~1));
      const samples = new Int16Array(data.length / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = data.readInt16LE(2 * i);
      return { ...fmt, samples };
    }
    off += 8 + len + (len & 1);
  }
  throw new Error(`no data chunk in ${file}`);
}

/** the longest run of `got` found, sample for sample, in `sent` (aligned at got's first non-silent window) */
function longestMatch(sent: Int16Array, got: Int16Array): { start: number; length: number } {
  let best = { start: -1, length: 0 };
  const probe = 160;
  for (let g = 0; g + probe <= got.length; g += probe) {
    const win = got.subarray(g, g + probe);
    if (win.every((s) => Math.abs(s) < 64)) continue;
    for (let s = 0; s + probe <= sent.length; s++) {
      let k = 0;
      while (g + k < got.length && s + k < sent.length && got[g + k] === sent[s + k]) k++;
      if (k > best.length) best = { start: g, length: k };
    }
    if (best.length >= probe) return best;
  }
  return best;
}

describe("rtsp-out: VLC's RTP input plays the audio of a play URL", function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const dirs: string[] = [];
  const aborts: AbortController[] = [];
  const clients: RawRtsp[] = [];
  before(async () => {
    gw = await startTestGateway({
      plugins: [
        { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
        { name: 'rtsp-out', def: rtspOut },
      ],
    });
  });
  after(async () => {
    for (const a of aborts) a.abort();
    for (const c of clients) c.close();
    await stopAllVlc();
    await gw?.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("a terminal's G.711A over RTP/UDP: VLC detects PCMA and decodes, in order, exactly the samples the terminal sent", async () => {
    requireVlc();
    const open = await gw.openStream({ simNo: '156987000796', chanId: 1, fmt: 4 });
    const abort = new AbortController();
    aborts.push(abort);
    const terminal = runSimulator({
      file: fixturePath('jt1078/gojt808-d1-h264-g711a-2013.bin'),
      port: gw.ports['jt1078-ingest.livePort2013'],
      speed: 1,
      loop: true,
      signal: abort.signal,
    }).catch(() => undefined);
    await gw.waitReady(open.reqId, 15_000);

    // what the terminal sends, as the bus has it: every A-law byte from here on
    const sent: Buffer[] = [];
    const bus = gw.bus.get(open.streamName);
    assert.ok(bus, "the request's bus stream");
    const sub = bus.subscribe(
      {
        write(u) {
          if (u.kind === 'audio') sent.push(Buffer.from(u.payload));
        },
      },
      { media: 'a', fromKeyframe: false },
    );

    // VLC listens first, then the RTSP sequence points rtsp-out at it
    const dir = vlcDir('rtsp-out-rx');
    dirs.push(dir);
    const port = await freeUdpPair();
    const wav = path.join(dir, 'heard.wav');
    const vlc: Vlc = startVlc(dir, [
      '-vv',
      `rtp://@127.0.0.1:${port}`,
      '--sout',
      `#transcode{acodec=s16l,channels=1,samplerate=8000}:std{access=file,mux=wav,dst=${wav}}`,
    ]);
    await waitFor('VLC to bind its RTP port', async () => vlc.proc.exitCode === null && (await udpPortTaken(port)), 15_000).catch((e: Error) => {
      throw new Error(`${e.message}: ${vlc.log().slice(-2000)}`);
    });

    const c = await RawRtsp.connect(gw.ports['rtsp-out.port']);
    clients.push(c);
    const d = await c.request('DESCRIBE', open.playUrl, { Accept: 'application/sdp' });
    assert.equal(d.status, 200, d.reason);
    const audio = /^m=audio [^]*?^a=control:(\S+)/m.exec(d.body);
    assert.ok(audio, `an audio track in the SDP: ${d.body}`);
    assert.match(d.body, /^m=audio \d+ RTP\/AVP 8\r?$/m, "PCMA as the static payload type 8, which VLC's RTP input knows");
    const setup = await c.request('SETUP', audio[1], { Transport: `RTP/AVP;unicast;client_port=${port}-${port + 1}` });
    assert.equal(setup.status, 200, setup.reason);
    const session = String(setup.headers.get('session')).split(';')[0];
    const play = await c.request('PLAY', open.playUrl, { Session: session, Range: 'npt=0.000-' });
    assert.equal(play.status, 200, play.reason);

    // a live RTP input has no end (and no media time for --run-time): once VLC has written 4 s, SIGTERM, on which it
    // closes the file (the WAV header then carries the data size)
    await waitFor(
      'VLC to write 4 s of audio',
      () => vlc.proc.exitCode === null && fs.existsSync(wav) && fs.statSync(wav).size >= 44 + 4 * 8000 * 2,
      20_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${vlc.log().slice(-2000)}`);
    });
    await vlc.stop();
    const code = await vlc.exited;
    sub.close();
    abort.abort();
    await terminal;
    await c.request('TEARDOWN', open.playUrl, { Session: session }).catch(() => undefined);
    const log = vlc.log();
    assert.equal(code, 0, `VLC exited ${code}: ${log.slice(-2000)}`);
    assert.match(log, /rtp demux debug: detected G\.711 A-law/, "VLC's RTP input recognised the payload");
    assert.match(log, /rtp demux debug: added RTP source/, 'and took rtsp-out as an RTP source');
    assert.doesNotMatch(
      log,
      /rtp demux (error|warning)|araw decoder (error|warning)|transcode stream out (error|warning)/,
      "no complaint from VLC's RTP input, decoder or transcoder",
    );

    const heard = wavSamples(wav);
    assert.deepEqual([heard.rate, heard.channels, heard.bits], [8000, 1, 16]);
    assert.ok(heard.samples.length >= 2 * 8000, `VLC decoded ${heard.samples.length} samples (over 2 s expected)`);
    // ffprobe agrees on what VLC wrote
    const p = await runProcess(
      requireTool('ffprobe', 'ffmpeg'),
      ['-v', 'error', '-show_entries', 'stream=codec_name,sample_rate,channels', '-of', 'json', wav],
      20_000,
    );
    assert.deepEqual(JSON.parse(p.stdout).streams[0], { codec_name: 'pcm_s16le', sample_rate: '8000', channels: 1 });

    const alaw = Buffer.concat(sent);
    const expected = new Int16Array(alaw.length);
    for (let i = 0; i < alaw.length; i++) expected[i] = alawToS16(alaw[i]);
    assert.ok(
      expected.some((s) => Math.abs(s) > 256),
      "the capture's audio is not silence (else the comparison would prove little)",
    );
    const m = longestMatch(expected, heard.samples);
    // VLC's first and last packets may fall around the edges of its run time; the rest is one unbroken run
    assert.ok(
      m.length >= heard.samples.length - 8000,
      `VLC's ${heard.samples.length} samples match what the terminal sent over a run of ${m.length} from sample ${m.start}`,
    );
    assert.ok(m.length >= 2 * 8000, `an unbroken run of ${m.length} samples`);
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
