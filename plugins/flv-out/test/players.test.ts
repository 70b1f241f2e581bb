import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WebSocket } from 'ws';
import { audioUnit, videoUnit, type AccessUnit, type TrackInfo } from '../../../plugin-sdk';
import { joinAnnexB, splitAnnexB } from '../../../plugin-sdk/formats';
import { testClip, type TestClip } from '../../../plugin-sdk/testkit';
import { decodeScriptTag, parseFlv, videoAnnexB } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import {
  HOST,
  ffprobeFlv,
  framesIn,
  httpPlay,
  parsed,
  pushAll,
  rawPlay,
  responseAt,
  startFlvGateway,
  until,
  videoFrames,
  withToken,
  wsPlay,
  type FlvGateway,
  type RawResponse,
} from './helpers';

/** 2 s of H.265 at 25 fps (GOP 25) and AAC at 16 kHz, as the bus carries them: raw AAC, its config in the track. */
function hevcAac(): { tracks: TrackInfo[]; units: AccessUnit[] } {
  const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
  const v = spawnSync(
    ffmpeg,
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=320x240:rate=25',
      '-t',
      '2',
      '-c:v',
      'libx265',
      '-x265-params',
      'bframes=0:keyint=25:aud=1:log-level=error',
      '-f',
      'hevc',
      '-',
    ],
    { maxBuffer: 16 << 20 },
  );
  const a = spawnSync(
    ffmpeg,
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=440:sample_rate=16000',
      '-t',
      '2',
      '-c:a',
      'aac',
      '-ac',
      '1',
      '-f',
      'adts',
      '-',
    ],
    { maxBuffer: 16 << 20 },
  );
  if (v.status !== 0 || a.status !== 0) throw new Error(`ffmpeg failed: ${v.stderr}${a.stderr}`);
  const units: AccessUnit[] = [];
  const aus: Buffer[][] = [];
  for (const nal of splitAnnexB(v.stdout)) {
    if (((nal[0] >> 1) & 0x3f) === 35 || aus.length === 0) aus.push([]);
    aus[aus.length - 1].push(nal);
  }
  aus.forEach((nals, i) =>
    units.push(
      videoUnit({
        codec: 'h265',
        dts: i * 40,
        payload: joinAnnexB(nals),
        keyframe: nals.some((n) => {
          const t = (n[0] >> 1) & 0x3f;
          return t >= 16 && t <= 23;
        }),
      }),
    ),
  );
  const adts = a.stdout;
  // AudioSpecificConfig from the first ADTS header: object type, frequency index, channels
  const asc = Buffer.alloc(2);
  asc.writeUInt16BE(((((adts[2] >> 6) & 3) + 1) << 11) | (((adts[2] >> 2) & 0x0f) << 7) | ((((adts[2] & 1) << 2) | (adts[3] >> 6)) << 3), 0);
  for (let at = 0, i = 0; at < adts.length; i++) {
    const len = ((adts[at + 3] & 3) << 11) | (adts[at + 4] << 3) | (adts[at + 5] >> 5);
    const head = adts[at + 1] & 1 ? 7 : 9;
    units.push(audioUnit({ codec: 'aac', dts: i * 64, payload: adts.subarray(at + head, at + len), timescale: 16000, duration: 1024 }));
    at += len;
  }
  units.sort((x, y) => x.dts - y.dts || (x.kind === 'video' ? -1 : 1));
  return {
    tracks: [
      { kind: 'video', codec: 'h265' },
      { kind: 'audio', codec: 'aac', sampleRate: 16000, channels: 1, config: asc },
    ],
    units,
  };
}

describe('flv-out: HTTP-FLV and WS-FLV players on the bus', function () {
  this.timeout(60_000);
  let clip: TestClip;
  let dir: string;
  let g: FlvGateway | undefined;
  let sims = 0;
  const nextSim = (): string => `1390000${String(++sims).padStart(4, '0')}`;

  const start = async (flvOut: Record<string, unknown> = {}): Promise<FlvGateway> => {
    g = await startFlvGateway(flvOut);
    return g;
  };
  /** a publisher on the request's stream, with the clip's tracks set */
  const publisherFor = (gw: FlvGateway, stream: string, tracks: ReadonlyArray<TrackInfo> = clip.tracks) => {
    const pub = gw.publisher(stream);
    for (const t of tracks) pub.setTrack(t);
    return pub;
  };
  const close = (gw: FlvGateway, reqId: string) => gw.gw.api('POST', '/strm/close', { reqIds: [reqId] });

  before(() => {
    clip = testClip(); // 2 s, 25 fps, 320x240, keyframes at 0 and 1 s
    assert.equal(clip.units.length, 50);
    dir = scratchDir('flv-out-players');
  });
  afterEach(async () => {
    await g?.stop();
    g = undefined;
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('serves HTTP-FLV and WS-FLV that ffprobe decodes, with nothing on the console and nothing under ./data', async () => {
    const dataDir = path.join(process.cwd(), 'data');
    const dataBefore = fs.existsSync(dataDir) ? fs.readdirSync(dataDir).sort() : null;
    const consoleCalls: string[] = [];
    const saved = { log: console.log, info: console.info, warn: console.warn, error: console.error, debug: console.debug };
    for (const k of Object.keys(saved) as Array<keyof typeof saved>)
      console[k] = (...a: unknown[]) => {
        consoleCalls.push(`${k}: ${a.join(' ')}`);
      };
    try {
      const gw = await start();
      const o = await gw.open(nextSim());
      const hp = httpPlay(gw.port, o.path);
      const wp = wsPlay(gw.port, o.path);
      await until(() => gw.flv.playerStats().length === 2, 'two players');
      assert.equal(await hp.status, 200);
      assert.deepEqual(
        gw.flv
          .playerStats()
          .map((p) => p.protocol)
          .sort(),
        ['http-flv', 'ws-flv'],
      );
      pushAll(publisherFor(gw, o.stream), clip.units);
      await until(() => framesIn(hp.data()) === 50 && framesIn(wp.data()) === 50, 'every frame at both players');
      await close(gw, o.reqId);
      const [httpBody, wsRes] = await Promise.all([hp.body, wp.closed]);
      assert.equal(wsRes.code, 1000);
      for (const [name, bytes] of [
        ['http.flv', httpBody],
        ['ws.flv', wsRes.body],
      ] as const) {
        const flv = parseFlv(bytes);
        assert.deepEqual([flv.header.hasVideo, flv.header.hasAudio], [true, false], `${name}: header flags as the tracks are`);
        const frames = videoFrames(flv.tags);
        assert.equal(frames.length, 50, name);
        assert.equal(frames[0].keyframe, true, name);
        assert.deepEqual(ffprobeFlv(bytes, dir, name), { codec: 'h264', width: 320, height: 240, frames: 50 });
      }
      await until(() => gw.flv.playerStats().length === 0, 'players to leave');
    } finally {
      Object.assign(console, saved);
    }
    assert.deepEqual(consoleCalls, []);
    const dataAfter = fs.existsSync(dataDir) ? fs.readdirSync(dataDir).sort() : null;
    assert.deepEqual(dataAfter, dataBefore, 'nothing created under ./data of the working directory');
  });

  it('starts a late joiner at the latest keyframe, after onMetaData and the sequence header', async () => {
    const gw = await start();
    const o = await gw.open(nextSim());
    const pub = publisherFor(gw, o.stream);
    pushAll(pub, clip.units.slice(0, 35));
    const hp = httpPlay(gw.port, o.path);
    await until(() => gw.flv.playerStats().length === 1, 'the player');
    pushAll(pub, clip.units.slice(35));
    await until(() => framesIn(hp.data()) === 25, 'the GOP and the rest');
    await close(gw, o.reqId);
    const body = await hp.body;
    const flv = parseFlv(body);
    assert.equal(flv.tags[0].type, 18, 'onMetaData first');
    const meta = decodeScriptTag(flv.tags[0].body);
    assert.equal(meta.name, 'onMetaData');
    assert.deepEqual([meta.props.width, meta.props.height, meta.props.videocodecid], [320, 240, 7]);
    assert.equal(flv.tags.filter((t) => t.type === 18).length, 1);
    assert.equal(flv.tags[1].sequenceHeader, true, 'then the sequence header');
    const frames = videoFrames(flv.tags);
    assert.deepEqual([frames[0].keyframe, frames[0].timestamp, frames.length], [true, 1000, 25], 'from the keyframe at frame 25');
    assert.deepEqual(ffprobeFlv(body, dir, 'late.flv'), { codec: 'h264', width: 320, height: 240, frames: 25 });
  });

  for (const earlier of [true, false]) {
    it(`gives a late joiner the Enhanced HEVC and AAC sequence headers (${earlier ? 'another player was there' : 'the first player'})`, async () => {
      const { tracks, units } = hevcAac();
      const gw = await start();
      const o = await gw.open(nextSim());
      // with a player there, the stream's FLV encoder has run from the start; without, it starts at the joiner's GOP
      const early = earlier ? httpPlay(gw.port, o.path) : undefined;
      if (early) await until(() => gw.flv.playerStats().length === 1, 'the first player');
      const pub = publisherFor(gw, o.stream, tracks);
      const split = units.findIndex((u) => u.kind === 'video' && u.dts >= 1200);
      pushAll(pub, units.slice(0, split));
      const wp = wsPlay(gw.port, o.path);
      await until(() => gw.flv.playerStats().length === (earlier ? 2 : 1), 'the joiner');
      pushAll(pub, units.slice(split));
      await until(() => framesIn(wp.data()) === 25 && (!early || framesIn(early.data()) === 50), 'the GOP and the rest');
      await close(gw, o.reqId);
      const flv = parseFlv((await wp.closed).body);
      assert.deepEqual([flv.header.hasVideo, flv.header.hasAudio], [true, true]);
      const kinds = flv.tags.map((t) => `${t.codec}${t.sequenceHeader ? ':seq' : ''}`);
      // either way the joiner's GOP is framed by an encoder that starts at its keyframe (the stream's own when it is the
      // first player, a catch-up one otherwise), which meets AAC only after it: the sequence header comes with the first frame
      assert.deepEqual(kinds.slice(0, 2), ['script', 'h265:seq']);
      assert.equal(
        kinds.find((k) => k.startsWith('aac')),
        'aac:seq',
      );
      assert.equal(kinds.filter((k) => k === 'aac:seq').length, 1);
      const frames = videoFrames(flv.tags);
      assert.deepEqual([frames[0].keyframe, frames[0].timestamp, frames.length], [true, 1000, 25]);
      const aac = flv.tags.filter((t) => t.codec === 'aac' && !t.sequenceHeader);
      assert.ok(aac.length > 0 && aac[0].timestamp >= 1000, 'audio starts with the GOP');
      const { annexB } = videoAnnexB(flv.tags, 'h265');
      const r = spawnSync(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', '-f', 'hevc', '-count_frames', '-show_streams', '-of', 'json', '-'], {
        input: annexB,
      });
      const s = JSON.parse(r.stdout.toString()).streams[0];
      assert.deepEqual([s.codec_name, s.width, s.height, Number(s.nb_read_frames)], ['hevc', 320, 240, 25]);
    });
  }

  it('holds a player that comes before any media and starts it at the first keyframe, header included', async () => {
    const gw = await start();
    const o = await gw.open(nextSim());
    const wp = wsPlay(gw.port, o.path);
    await until(() => gw.flv.playerStats().length === 1, 'the player');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(wp.data().length, 0, 'nothing before media, not even the FLV header');
    assert.equal(gw.flv.playerStats()[0].waitingForKeyframe, true);
    // the publisher starts mid-GOP: frames 10..24 are not decodable without frame 0
    pushAll(publisherFor(gw, o.stream), clip.units.slice(10));
    await until(() => framesIn(wp.data()) === 25, 'the frames from the keyframe');
    await close(gw, o.reqId);
    const { body } = await wp.closed;
    const frames = videoFrames(parseFlv(body).tags);
    assert.deepEqual([frames[0].keyframe, frames[0].timestamp, frames.length], [true, 1000, 25]);
    assert.deepEqual(ffprobeFlv(body, dir, 'early.flv'), { codec: 'h264', width: 320, height: 240, frames: 25 });
  });

  it('refuses unauthorised plays with 401 / close 4401 before any media; 404 for other paths, 405 for other methods', async () => {
    const gw = await start();
    const o = await gw.open(nextSim());
    pushAll(publisherFor(gw, o.stream), clip.units);
    const hp = httpPlay(gw.port, withToken(o.path, 'bad'));
    assert.equal(await hp.status, 401);
    assert.ok(!(await hp.body).includes(Buffer.from('FLV')));
    const unknown = httpPlay(gw.port, o.path.replace(/reqId=[^&]*/, 'reqId=nope'));
    assert.equal(await unknown.status, 401);
    const ws = await wsPlay(gw.port, withToken(o.path, 'bad')).closed;
    assert.deepEqual([ws.code, ws.body.length], [4401, 0]);
    // WebSocket upgrades elsewhere are not WS-FLV
    for (const p of ['/talk/x?token=good', `/live/${o.stream}.mp4?token=good`]) {
      const other = new WebSocket(`ws://${HOST}:${gw.port}${p}`);
      const status = await new Promise<number>((resolve) => {
        other.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        other.on('error', () => resolve(-1));
      });
      assert.equal(status, 404, p);
    }
    for (const [method, p, want] of [
      ['POST', o.path, 405],
      ['PUT', o.path, 405],
      ['DELETE', o.path, 405],
      ['GET', '/admin/', 404],
      ['GET', `/live/${o.stream}.mp4${o.path.slice(o.path.indexOf('?'))}`, 404],
      ['GET', '/live/%zz.flv', 404],
    ] as const) {
      const r = httpPlay(gw.port, p, method);
      assert.equal(await r.status, want, `${method} ${p}`);
      await r.body;
    }
    const pre = await fetch(`http://${HOST}:${gw.port}${o.path}`, { method: 'OPTIONS' });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.match(pre.headers.get('access-control-allow-methods') ?? '', /GET/);
    const head = await fetch(`http://${HOST}:${gw.port}${o.path}`, { method: 'HEAD' });
    assert.deepEqual([head.status, head.headers.get('content-type'), head.headers.get('access-control-allow-origin')], [200, 'video/x-flv', '*']);
    assert.equal(gw.flv.playerStats().length, 0);
    const m = await gw.gw.api('GET', '/metrics', undefined, null);
    assert.match(String(m.json), /^gw_flv_out_plays_refused_total 3$/m);
  });

  it('sends the same bytes to HTTP/1.1 (chunked), HTTP/1.0 (bare), pipelined and WebSocket players', async () => {
    const gw = await start();
    const o = await gw.open(nextSim());
    const viaClient = httpPlay(gw.port, o.path);
    const http10 = rawPlay(gw.port, `GET ${o.path} HTTP/1.0\r\n\r\n`);
    // the GET arrives while the OPTIONS response holds the connection: its response gets the socket later
    const piped = rawPlay(gw.port, `OPTIONS ${o.path} HTTP/1.1\r\nHost: x\r\n\r\nGET ${o.path} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const ws = wsPlay(gw.port, o.path);
    let messages = 0;
    ws.ws.on('message', () => {
      messages++;
    });
    await until(() => gw.flv.playerStats().length === 4, 'four players');
    const pub = publisherFor(gw, o.stream);
    pushAll(pub, clip.units);
    // a unit over 64 KiB: its chunk size line has five hex digits
    pub.push(videoUnit({ codec: 'h264', dts: 2000, payload: Buffer.concat([Buffer.from([0, 0, 0, 1, 0x41]), Buffer.alloc(70000, 0x33)]) }));
    await until(() => framesIn(viaClient.data()) === 51, 'the client player to get every frame');
    await until(() => {
      const s = gw.flv.playerStats();
      return s.every((p) => p.backlogBytes === 0 && p.bytesOut === s[0].bytesOut);
    }, 'every player to have taken the same bytes');
    await close(gw, o.reqId);

    const expected = await viaClient.body;
    const flv = parseFlv(expected);
    assert.equal(videoFrames(flv.tags).length, 51);
    assert.equal(flv.tags[flv.tags.length - 1].body.length, 5 + 4 + 70001);
    await http10.closed;
    const bare = responseAt(http10.data(), 0, true);
    assert.equal(bare?.status, 200);
    assert.doesNotMatch(bare.head, /transfer-encoding/i);
    assert.ok(bare.body.equals(expected), 'HTTP/1.0: the FLV stream without chunk framing');
    let second: RawResponse | undefined;
    await until(() => {
      const first = responseAt(piped.data(), 0, false);
      second = first && responseAt(piped.data(), first.next, false);
      return second !== undefined;
    }, 'the pipelined response to end');
    piped.sock.destroy();
    assert.equal(responseAt(piped.data(), 0, false)?.status, 204);
    assert.equal(second?.status, 200);
    assert.ok(second.body.equals(expected), 'pipelined: the same FLV stream');
    const { code, body } = await ws.closed;
    assert.equal(code, 1000);
    assert.ok(body.equals(expected), 'WebSocket: the same FLV stream (header lengths of 7, 16 and 64 bits among them)');
    // the player started at the first unit, whose message holds the FLV header and config too; then one per unit
    assert.equal(messages, 51, 'one message per unit');
  });

  it('continues the timeline for players that stay through a publisher restart', async () => {
    const gw = await start();
    const o = await gw.open(nextSim());
    const hp = httpPlay(gw.port, o.path);
    await until(() => gw.flv.playerStats().length === 1, 'the player');
    pushAll(publisherFor(gw, o.stream), clip.units.slice(0, 25));
    await until(() => framesIn(hp.data()) === 25, 'the first publish');
    // the source reconnects: a new publisher, its timestamps from 0 again
    pushAll(publisherFor(gw, o.stream), clip.units);
    await until(() => framesIn(hp.data()) === 75, 'the second publish');
    await close(gw, o.reqId);
    const flv = parseFlv(await hp.body);
    const frames = videoFrames(flv.tags);
    assert.equal(frames.length, 75);
    for (let i = 1; i < frames.length; i++) assert.ok(frames[i].timestamp > frames[i - 1].timestamp, `timestamp went back at frame ${i}`);
    assert.equal(flv.tags.filter((t) => t.type === 18).length, 1, 'the same configuration: no new onMetaData');
  });

  it("lets a second publisher replace the first; a joiner starts at the new one's keyframe", async () => {
    const gw = await start();
    const o = await gw.open(nextSim());
    const first = publisherFor(gw, o.stream);
    pushAll(first, clip.units.slice(0, 10));
    const second = publisherFor(gw, o.stream);
    first.push(clip.units[10]); // a replaced publisher's late units go nowhere
    assert.equal(first.active, false);
    pushAll(second, clip.units.slice(0, 35));
    const hp = httpPlay(gw.port, o.path);
    await until(() => gw.flv.playerStats().length === 1, 'the player');
    pushAll(second, clip.units.slice(35));
    await until(() => framesIn(hp.data()) === 25, 'the GOP and the rest');
    await close(gw, o.reqId);
    const frames = videoFrames(parsed(await hp.body).tags);
    assert.equal(frames.length, 25);
    assert.equal(frames[0].keyframe, true);
    // the second publish continues the first one's timeline (frame 9 at 360 ms, then 20 ms on)
    assert.equal(frames[0].timestamp, 360 + 20 + 1000);
  });
});
