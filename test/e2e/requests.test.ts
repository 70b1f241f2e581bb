/**
 * Requests and players, end to end: push addresses in the open result, play authorisation (HTTP 401, WS 4401),
 * players closed with their request, consumption marking, and terminals pushing channels nobody opened.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import {
  HttpFlvPlayer,
  TcpTerminal,
  WsFlvPlayer,
  capture,
  closeReq,
  codedVideo,
  encodeCapture,
  metric,
  openLive,
  useE2eGateway,
  statusOf,
  waitFor,
  wsUrlOf,
} from './helpers';

const GLACIALL = 'jt1078/glaciall-cif-h264-2013.bin';

describe('e2e: open results, play tokens, consumption, unknown channels', function () {
  this.timeout(30_000);
  const e = useE2eGateway({ disconnectGraceMs: 200, unknownGraceMs: 300 });

  /** The play URL with one query parameter replaced. */
  function withParam(url: string, key: string, value: string): string {
    const u = new URL(url);
    u.searchParams.set(key, value);
    return u.toString();
  }

  it('open results advertise the push ports actually bound (live and replay, 2013 and 2019, TCP)', async () => {
    const live = await openLive(e.gw, '013800138000', 7);
    assert.deepEqual(
      { host: live.host, port: live.port, tcp: live.tcp, port2019: live.port2019, tcp2019: live.tcp2019 },
      { host: '127.0.0.1', port: e.live2013, tcp: true, port2019: e.live2019, tcp2019: true },
    );
    assert.ok(live.port > 0 && live.port2019 > 0 && live.port !== live.port2019);
    const replay = await openLive(e.gw, '013800138000', 7, { typ: 'replay' });
    assert.equal(replay.port, e.gw.ports['jt1078-ingest.replayPort2013']);
    assert.equal(replay.port2019, e.gw.ports['jt1078-ingest.replayPort2019']);
    assert.notEqual(replay.port, live.port);
    // the advertised port really takes a terminal, on TCP and on UDP
    assert.equal(e.gw.ports['jt1078-ingest.livePort2013:udp'], live.port);
    await closeReq(e.gw, live.reqId);
    await closeReq(e.gw, replay.reqId);
  });

  it('play refused with a wrong token or an unknown reqId (HTTP 401, WS-FLV close 4401); served with the right ones', async () => {
    const a = await openLive(e.gw, '013800138000', 1);
    const other = await openLive(e.gw, '013800138000', 2, { user: { token: 'other-token' } });
    const refusedBefore = await metric(e.gw, 'gw_flv_out_plays_refused_total');

    const wrongToken = await HttpFlvPlayer.connect(withParam(a.playUrl, 'token', 'tok-e2e-wrong'));
    assert.equal(wrongToken.status, 401);
    const unknownReq = await HttpFlvPlayer.connect(withParam(a.playUrl, 'reqId', 'no-such-request-000'));
    assert.equal(unknownReq.status, 401);
    // a real request and its own token, but for another channel's stream
    const crossed = await HttpFlvPlayer.connect(withParam(withParam(a.playUrl, 'reqId', other.reqId), 'token', 'other-token'));
    assert.equal(crossed.status, 401);
    const noToken = new URL(a.playUrl);
    noToken.searchParams.delete('token');
    assert.equal((await HttpFlvPlayer.connect(noToken.toString())).status, 401);

    const ws = await WsFlvPlayer.connect(wsUrlOf(withParam(a.playUrl, 'token', 'nope')));
    assert.equal(await ws.closed, 4401);
    assert.equal(ws.data().length, 0, 'nothing sent to a refused WS player');
    assert.equal((await metric(e.gw, 'gw_flv_out_plays_refused_total')) - refusedBefore, 5);

    const st = await statusOf(e.gw, a.reqId);
    assert.equal(st?.consumed, false, 'refused players do not consume the request');
    assert.equal(st?.players, 0);

    const ok = await HttpFlvPlayer.connect(a.playUrl);
    assert.equal(ok.status, 200);
    const okWs = await WsFlvPlayer.connect(wsUrlOf(a.playUrl));
    await waitFor('two players', async () => (await statusOf(e.gw, a.reqId))?.players === 2);
    ok.close();
    okWs.close();
    await closeReq(e.gw, a.reqId);
    await closeReq(e.gw, other.reqId);
  });

  it('the first player marks the request consumed (status: consumed true, players 1); players are counted down', async () => {
    const a = await openLive(e.gw, '013800138000', 3);
    const before = await statusOf(e.gw, a.reqId);
    assert.equal(before?.consumed, false);
    assert.equal(before?.players, 0);
    const p1 = await HttpFlvPlayer.connect(a.playUrl);
    const st = await waitFor('consumed', async () => {
      const s = await statusOf(e.gw, a.reqId);
      return s?.consumed ? s : undefined;
    });
    assert.equal(st.players, 1);
    p1.close();
    const after = await waitFor('player gone', async () => {
      const s = await statusOf(e.gw, a.reqId);
      return s?.players === 0 ? s : undefined;
    });
    assert.equal(after.consumed, true, 'consumed stays true once a player came');
    await closeReq(e.gw, a.reqId);
  });

  it('closing a request closes its players (HTTP and WS) and only those; its URL is then refused', async () => {
    const cap = capture(GLACIALL);
    const a = await openLive(e.gw, '013800138000', 1);
    const b = await openLive(e.gw, '013800138000', 1, { user: { token: 'tok-b' } });
    assert.equal(a.ctrl, true);
    assert.equal(b.ctrl, false);
    const pa = await HttpFlvPlayer.connect(a.playUrl);
    const wa = await WsFlvPlayer.connect(wsUrlOf(a.playUrl));
    const pb = await HttpFlvPlayer.connect(b.playUrl);
    // media flows to all three
    const term = await TcpTerminal.connect(e.live2013);
    const bufs = encodeCapture(cap.packets);
    await term.send(bufs.slice(0, 1500));
    await waitFor('media at all players', () => pa.videoFrames() > 100 && pb.videoFrames() > 100 && wa.data().length > 50_000);

    await closeReq(e.gw, a.reqId);
    await pa.ended;
    assert.equal(await wa.closed, 1000, 'the WS-FLV player is closed normally');
    assert.equal(pb.isEnded, false, 'the other request on the same channel keeps its player');
    const seen = pb.videoFrames();
    await term.send(bufs.slice(1500, 3000));
    await waitFor('b keeps getting frames', () => pb.videoFrames() > seen + 100);
    assert.equal((await HttpFlvPlayer.connect(a.playUrl)).status, 401, 'a closed request cannot be played');

    await closeReq(e.gw, b.reqId);
    await pb.ended;
    // the last request went: the stream and the terminal's connection close
    await once(term.socket, 'close');
    assert.equal(codedVideo(pb.parse().tags)[0].keyframe, true);
  });

  it('data for a channel nobody opened is dropped and the connection closed after unknownGraceMs', async () => {
    const cap = capture(GLACIALL);
    const unmatchedBefore = await metric(e.gw, 'gw_jt1078_ingest_unmatched_packets_total', { listener: 'live2013' });
    const streamsBefore = (await e.gw.api('GET', '/healthz', undefined, null)).json.streams;
    const term = await TcpTerminal.connect(e.live2013);
    const closed = once(term.socket, 'close');
    const t0 = Date.now();
    await term.send(encodeCapture(cap.packets.slice(0, 200), { sim: '19999999999', channel: 9 }));
    // counted as they come, not when the link goes (a flood of them shows while it lasts): seen before the grace ends
    let countedWhileUp = false;
    await waitFor('unmatched packets counted', async () => {
      const up = !term.socket.destroyed;
      const n = (await metric(e.gw, 'gw_jt1078_ingest_unmatched_packets_total', { listener: 'live2013' })) - unmatchedBefore;
      if (n > 0 && up) countedWhileUp = true;
      return n === 200;
    });
    assert.ok(countedWhileUp, 'the count moved while the link was still up');
    await closed;
    const after = Date.now() - t0;
    assert.ok(after >= 250, `closed by the gateway after its grace, not at once (${after} ms)`);
    assert.equal(
      (await metric(e.gw, 'gw_jt1078_ingest_unmatched_packets_total', { listener: 'live2013' })) - unmatchedBefore,
      200,
      'every packet counted as unmatched and dropped',
    );
    const health = await e.gw.api('GET', '/healthz', undefined, null);
    assert.equal(health.json.streams, streamsBefore, 'no stream was created for it');
  });
});
