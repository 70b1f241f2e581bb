/**
 * The request sequence over a bare socket: OPTIONS, DESCRIBE (the SDP), SETUP of both tracks over TCP interleaving,
 * PLAY (RTP-Info), the packets themselves (reassembled to the clip's NAL units), sender reports (NTP from the stream's
 * wall clock), PAUSE, TEARDOWN, and the answers RFC 2326 gives to requests that cannot be served.
 */
import assert from 'node:assert/strict';
import { splitAnnexB } from '../../../plugin-sdk/formats';
import { epochMsOfNtp, rtcpPacketTypes } from '../src/rtcp';
import { RawRtsp, depacketizeH264, rtpHeader, startRtspGateway, type RtspGateway } from './helpers';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { waitFor } from '../../../test/support/until';

describe('rtsp-out: the RTSP request sequence over a raw socket', function () {
  this.timeout(30_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway({ mtu: 600 }, [], true);
  });
  after(() => g.stop());

  it('OPTIONS, DESCRIBE, SETUP x2 (interleaved), PLAY: SDP, RTP-Info, packets that rebuild every frame, SRs on the wall clock', async () => {
    const clip = fixtureClip({ seconds: 2, audio: true });
    const open = await g.open('13900001001');
    const pub = g.gw.publish(open.stream, clip, { realtime: false });
    // the stream's timeline starts at 2020-01-01T00:00:00Z: the sender reports must say so
    const wall = Date.UTC(2020, 0, 1);
    pub.publisher.setWallClock(wall, 0);
    await pub.done;
    await g.gw.waitReady(open.reqId);

    const c = await RawRtsp.connect(g.port);
    const opts = await c.request('OPTIONS', open.url);
    assert.equal(opts.status, 200);
    assert.match(opts.headers.get('public')!, /DESCRIBE.*SETUP.*PLAY.*PAUSE.*TEARDOWN.*GET_PARAMETER/);
    assert.equal(opts.headers.get('cseq'), '1');

    const d = await c.request('DESCRIBE', open.url, { Accept: 'application/sdp' });
    assert.equal(d.status, 200);
    assert.equal(d.headers.get('content-type'), 'application/sdp');
    const sdp = d.body;
    const sps = clip.video.sps!;
    const pps = clip.video.pps!;
    assert.match(sdp, /^v=0\r\n/);
    assert.match(sdp, /\r\nm=video 0 RTP\/AVP 96\r\na=rtpmap:96 H264\/90000\r\n/);
    assert.ok(sdp.includes(`sprop-parameter-sets=${sps.toString('base64')},${pps.toString('base64')}`), sdp);
    assert.ok(sdp.includes(`profile-level-id=${sps.subarray(1, 4).toString('hex').toUpperCase()}`), sdp);
    assert.ok(sdp.includes('packetization-mode=1'));
    assert.match(sdp, /\r\nm=audio 0 RTP\/AVP 8\r\na=rtpmap:8 PCMA\/8000\r\n/);
    const controls = [...sdp.matchAll(/a=control:(rtsp:\/\/\S+)/g)].map((m) => m[1]);
    const base = open.url.split('?')[0];
    const query = open.url.split('?')[1];
    assert.deepEqual(controls, [`${base}/trackID=0?${query}`, `${base}/trackID=1?${query}`], 'absolute track URLs');

    const s1 = await c.request('SETUP', controls[0], { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    assert.equal(s1.status, 200);
    assert.equal(s1.headers.get('transport'), 'RTP/AVP/TCP;unicast;interleaved=0-1');
    const [session, timeout] = s1.headers.get('session')!.split(';');
    assert.match(session, /^[0-9a-f]{16}$/);
    assert.equal(timeout, 'timeout=60');
    // the second track on channels the client picks (not the default 2-3): the server frames them per reader
    const s2 = await c.request('SETUP', controls[1], { Transport: 'RTP/AVP/TCP;unicast;interleaved=6-7', Session: session });
    assert.equal(s2.status, 200);
    assert.equal(s2.headers.get('session')!.split(';')[0], session);

    const play = await c.request('PLAY', base + '?' + query, { Session: session, Range: 'npt=0.000-' });
    assert.equal(play.status, 200);
    const info = play.headers
      .get('rtp-info')!
      .split(',')
      .map((e) => Object.fromEntries(e.split(';').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])));
    assert.deepEqual(
      info.map((e) => e.url),
      controls,
    );

    // the reader starts at the GOP cache: the clip's last keyframe (1000 ms) and what follows, its last GOP's frames
    // (30 at 30 fps) and 25 audio units
    const clipVideo = clip.units.filter((u) => u.kind === 'video');
    const lastKey = clipVideo.map((u) => u.keyframe).lastIndexOf(true);
    const gop = clipVideo.length - lastKey;
    const video = await waitFor(`${gop} video frames`, () => {
      const f = c.frames.get(0) ?? [];
      return f.filter((p) => rtpHeader(p).marker).length >= gop && f;
    });
    const audio = await waitFor('25 audio packets', () => (c.frames.get(6)?.length ?? 0) >= 25 && c.frames.get(6)!);
    assert.equal(rtpHeader(video[0]).seq, Number(info[0].seq), "RTP-Info seq is the first video packet's");
    assert.equal(rtpHeader(video[0]).ts, Number(info[0].rtptime), "RTP-Info rtptime is the first video packet's");
    assert.equal(rtpHeader(audio[0]).seq, Number(info[1].seq));
    assert.equal(rtpHeader(audio[0]).ts, Number(info[1].rtptime));
    for (let i = 1; i < video.length; i++) assert.equal(rtpHeader(video[i]).seq, (rtpHeader(video[0]).seq + i) & 0xffff, 'consecutive sequence numbers');
    assert.ok(
      video.every((p) => p.length <= 600),
      'no packet over the MTU',
    );
    assert.ok(
      video.some((p) => (p[12] & 0x1f) === 28),
      'large NAL units went as FU-A',
    );
    assert.equal(video[0][12] & 0x1f, 24, 'SPS and PPS in front of the keyframe as one STAP-A');
    assert.equal(rtpHeader(audio[0]).pt, 8);
    assert.equal(rtpHeader(audio[1]).ts - rtpHeader(audio[0]).ts, 320, 'audio timed in samples');

    // every frame rebuilt from the packets equals the clip's (AUDs aside), 1/fps apart (at 30 fps, 3000 ticks)
    const frames = depacketizeH264(video);
    const sent = clipVideo.slice(lastKey);
    const stamps = [...frames.keys()];
    assert.equal(stamps.length, gop);
    stamps.forEach((ts, i) => {
      assert.equal((ts - stamps[0]) >>> 0, Math.round((i * 90_000) / clip.fps));
      const want = splitAnnexB(sent[i].payload).filter((n) => (n[0] & 0x1f) !== 9);
      assert.deepEqual(
        frames.get(ts)!.map((n) => n.toString('hex')),
        want.map((n) => n.toString('hex')),
        `frame ${i}`,
      );
    });
    assert.equal(audio[0].subarray(12).toString('hex'), clip.units.filter((u) => u.kind === 'audio')[25].payload.toString('hex'), 'G.711 as received');

    // a sender report on each track's RTCP channel maps the first packet's RTP time to the wall clock: 2020 + 1000 ms
    for (const [ch, first] of [
      [1, video[0]],
      [7, audio[0]],
    ] as const) {
      const sr = (c.frames.get(ch) ?? [])[0];
      assert.ok(sr, `an RTCP packet on channel ${ch}`);
      assert.deepEqual(rtcpPacketTypes(sr), [200, 202], 'SR then SDES');
      assert.equal(sr.readUInt32BE(4), rtpHeader(first).ssrc, "the SR names the track's SSRC");
      assert.equal(sr.readUInt32BE(16), rtpHeader(first).ts, 'RTP time of the first packet');
      const ms = epochMsOfNtp(sr.readUInt32BE(8), sr.readUInt32BE(12));
      assert.ok(Math.abs(ms - (wall + 1000)) < 1, `NTP ${new Date(ms).toISOString()} is the stream's wall clock at 1000 ms`);
    }

    const status = (await g.gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0];
    assert.equal(status.players, 1);

    const keep = await c.request('GET_PARAMETER', base + '?' + query, { Session: session });
    assert.equal(keep.status, 200);
    const pause = await c.request('PAUSE', base + '?' + query, { Session: session });
    assert.equal(pause.status, 200);
    const td = await c.request('TEARDOWN', base + '?' + query, { Session: session });
    assert.equal(td.status, 200);
    const after = await c.request('PLAY', base + '?' + query, { Session: session });
    assert.equal(after.status, 454, 'the session is gone');
    await waitFor('the player detached', async () => (await g.gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0].players === 0);
    c.close();
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('refuses what it cannot serve: 401 for a bad token, an unknown request or stream; 404 other paths, 454, 459, 461, 455, 405, 501', async () => {
    const open = await g.looping('13900001002', fixtureClip({ seconds: 2, audio: true }));
    const c = await RawRtsp.connect(g.port);
    const base = open.url.split('?')[0];
    const query = open.url.split('?')[1];
    assert.equal((await c.request('DESCRIBE', open.url.replace(/token=[^&]*/, 'token=nope'))).status, 401);
    assert.equal((await c.request('DESCRIBE', open.url.replace(/reqId=[^&]*/, 'reqId=unknownReq01'))).status, 401);
    assert.equal((await c.request('DESCRIBE', `${base}`)).status, 401, 'no query at all');
    assert.equal((await c.request('DESCRIBE', open.url.replace('13900001002_1_1', '13900009999_1_1'))).status, 401, 'a stream nobody opened');
    assert.equal((await c.request('DESCRIBE', open.url.replace('/live/', '/vod/'))).status, 404);
    assert.equal((await c.request('PLAY', open.url, { Session: '0123456789abcdef' })).status, 454);
    assert.equal((await c.request('PLAY', open.url)).status, 454, 'PLAY without a session');
    assert.equal((await c.request('SETUP', open.url, { Transport: 'RTP/AVP/TCP;unicast' })).status, 459, 'SETUP of the aggregate with two tracks');
    const track0 = `${base}/trackID=0?${query}`;
    assert.equal((await c.request('SETUP', `${base}/trackID=5?${query}`, { Transport: 'RTP/AVP/TCP;unicast' })).status, 404);
    assert.equal((await c.request('SETUP', track0, { Transport: 'RTP/AVP;multicast' })).status, 461);
    assert.equal((await c.request('SETUP', track0, { Transport: 'RTP/SAVP;unicast;client_port=5000-5001' })).status, 461);
    // a client that appends the track to the base URL after its query (relative control) is understood too
    const s = await c.request('SETUP', `${open.url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast' });
    assert.equal(s.status, 200);
    assert.equal(s.headers.get('transport'), 'RTP/AVP/TCP;unicast;interleaved=0-1', 'default channels');
    const session = s.headers.get('session')!.split(';')[0];
    assert.equal((await c.request('PLAY', open.url, { Session: session })).status, 200);
    assert.equal(
      (await c.request('SETUP', `${base}/trackID=1?${query}`, { Transport: 'RTP/AVP/TCP;unicast;interleaved=2-3', Session: session })).status,
      455,
      'no SETUP while playing',
    );
    assert.equal((await c.request('ANNOUNCE', open.url)).status, 405);
    assert.equal((await c.request('RECORD', open.url)).status, 405);
    assert.equal((await c.request('BREW', open.url)).status, 501);
    // a closed request's players go: BYE on each RTCP channel, then the connection ends
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    await c.ended;
    const rtcp = c.frames.get(1) ?? [];
    assert.ok(
      rtcp.some((p) => rtcpPacketTypes(p).includes(203)),
      'an RTCP BYE before the end',
    );
    open.pub.stop();
  });

  /** DESCRIBE, SETUP of the video track on interleaved 0-1, PLAY; returns the session id. */
  async function playVideo(c: RawRtsp, url: string): Promise<string> {
    assert.equal((await c.request('DESCRIBE', url)).status, 200);
    const s = await c.request('SETUP', `${url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    const session = s.headers.get('session')!.split(';')[0];
    assert.equal((await c.request('PLAY', url, { Session: session })).status, 200);
    return session;
  }

  it('packets are made once per unit: two readers of a stream get the same bytes, from one encoder', async () => {
    const open = await g.looping('13900001004', fixtureClip({ seconds: 2, audio: true }));
    const a = await RawRtsp.connect(g.port);
    const b = await RawRtsp.connect(g.port);
    await playVideo(a, open.url);
    await playVideo(b, open.url);
    await waitFor('packets for both', () => (a.frames.get(0)?.length ?? 0) > 100 && (b.frames.get(0)?.length ?? 0) > 100);
    const metrics = await (await fetch(`${g.gw.baseUrl}/metrics`)).text();
    assert.match(metrics, /\ngw_rtsp_out_streams 1\n/, 'one RTP encoder for the stream');
    assert.match(metrics, /\ngw_rtsp_out_sessions\{transport="tcp",state="playing"\} 2\n/);
    const bySeq = new Map((a.frames.get(0) ?? []).map((p) => [rtpHeader(p).seq, p]));
    const both = (b.frames.get(0) ?? []).filter((p) => bySeq.has(rtpHeader(p).seq));
    assert.ok(both.length > 50, `packets both got: ${both.length}`);
    for (const p of both) assert.ok(p.equals(bySeq.get(rtpHeader(p).seq)!), 'same packet, byte for byte');
    await open.end(a, b);
  });

  it("a reader joining mid-GOP gets the GOP's packets numbered as the readers in step got them, then the live ones without a gap", async () => {
    const open = await g.looping('13900001006', fixtureClip({ seconds: 2, audio: true }));
    const a = await RawRtsp.connect(g.port);
    await playVideo(a, open.url);
    // the type of the NAL unit a packet starts (an FU-A's first fragment, a STAP-A's first unit); 0 for an FU-A's others
    const startOf = (p: Buffer): number => {
      const t = p[12] & 0x1f;
      return t === 28 ? (p[13] & 0x80 ? p[13] & 0x1f : 0) : t === 24 ? p[15] & 0x1f : t;
    };
    const idrStarts = (c: RawRtsp): number => (c.frames.get(0) ?? []).filter((p) => startOf(p) === 5).length;
    const seen = idrStarts(a);
    await waitFor('a key frame for the reader in step', () => idrStarts(a) > seen);
    // ten frames into the GOP (a key frame a second at 25 fps)
    await new Promise((r) => setTimeout(r, 400));
    const b = await RawRtsp.connect(g.port);
    const aBefore = a.frames.get(0)!.length;
    const lastBefore = rtpHeader(a.frames.get(0)![aBefore - 1]).seq;
    assert.equal((await b.request('DESCRIBE', open.url)).status, 200);
    const s = await b.request('SETUP', `${open.url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    const play = await b.request('PLAY', open.url, { Session: s.headers.get('session')!.split(';')[0] });
    assert.equal(play.status, 200);
    await waitFor('packets for the joiner', () => (b.frames.get(0)?.length ?? 0) > 200);
    const bv = b.frames.get(0)!;
    const first = rtpHeader(bv[0]).seq;
    assert.equal(Number(/seq=(\d+)/.exec(play.headers.get('rtp-info') ?? '')?.[1]), first, "RTP-Info names the joiner's first packet");
    // it started in the past: at the GOP's key frame, numbered as the reader in step got it
    const back = (lastBefore - first + 0x10000) & 0xffff;
    assert.ok(back > 0 && back < 0x8000, `the joiner's first packet (${first}) is not before the last one sent before it joined (${lastBefore})`);
    assert.ok([5, 7].includes(startOf(bv[0])), `the joiner starts at a key frame (its SPS or IDR), not NAL type ${startOf(bv[0])}`);
    for (let i = 1; i < bv.length; i++) assert.equal(rtpHeader(bv[i]).seq, (first + i) & 0xffff, `a gap in the joiner's sequence after ${first + i - 1}`);
    await waitFor('the reader in step to have what the joiner has', () => {
      const have = new Set(a.frames.get(0)!.map((p) => rtpHeader(p).seq));
      return bv.every((p) => have.has(rtpHeader(p).seq));
    });
    const bySeq = new Map(a.frames.get(0)!.map((p) => [rtpHeader(p).seq, p]));
    for (const p of bv) assert.ok(p.equals(bySeq.get(rtpHeader(p).seq)!), `packet ${rtpHeader(p).seq} differs between the two readers`);
    await open.end(a, b);
  });

  it('a codec change under a playing session ends it (BYE), so the client describes the stream again', async () => {
    const open = await g.looping('13900001005', fixtureClip({ seconds: 2, audio: true }));
    const c = await RawRtsp.connect(g.port);
    await playVideo(c, open.url);
    await waitFor('video', () => (c.frames.get(0)?.length ?? 0) > 10);
    open.pub.stop();
    const h265 = g.gw.bus.get(open.stream)!.attachPublisher();
    h265.setTrack({ kind: 'video', codec: 'h265', width: 320, height: 240 });
    await c.ended;
    assert.ok(
      (c.frames.get(1) ?? []).some((p) => rtcpPacketTypes(p).includes(203)),
      'BYE on the video track',
    );
    await open.end();
  });

  it('dataTyp 3 (listen): only the audio track is described; SETUP of the aggregate takes it; audio on the channels asked', async () => {
    const open = await g.looping('13900001006', fixtureClip({ seconds: 2, audio: true }), { dataTyp: 3 });
    const c = await RawRtsp.connect(g.port);
    const d = await c.request('DESCRIBE', open.url);
    assert.equal(d.status, 200);
    assert.doesNotMatch(d.body, /m=video/);
    assert.match(d.body, /m=audio 0 RTP\/AVP 8\r\n/);
    // one track: SETUP may name the presentation itself (RFC 2326 C.1.1)
    const s = await c.request('SETUP', open.url, { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    assert.equal(s.status, 200);
    const session = s.headers.get('session')!.split(';')[0];
    assert.equal((await c.request('PLAY', open.url, { Session: session })).status, 200);
    const audio = await waitFor('audio on channel 0', () => (c.frames.get(0)?.length ?? 0) >= 5 && c.frames.get(0)!);
    assert.ok(
      audio.every((p) => rtpHeader(p).pt === 8 && p.length === 12 + 320),
      'PCMA, 320 samples a packet',
    );
    await open.end(c);
  });

  it("an early player: DESCRIBE waits for the stream's first keyframe, then plays from it", async () => {
    const open = await g.open('13900001003');
    const c = await RawRtsp.connect(g.port);
    const describing = c.request('DESCRIBE', open.url);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(c.responses.length, 0, 'no answer before the stream has media');
    const pub = g.gw.publish(open.stream, fixtureClip({ seconds: 2, audio: true }), { loop: true });
    const d = await describing;
    assert.equal(d.status, 200);
    assert.match(d.body, /m=video/);
    pub.stop();
    c.close();
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
