/**
 * RTSP both ways on a gateway with two workers (the real process). ffmpeg plays channels owned
 * by each worker over TCP interleaving and over UDP; a UDP reader that keeps its session alive with receiver reports
 * alone (RFC 2326: no keep-alive requests, as live555 clients do when GET_PARAMETER is not used) keeps playing whichever
 * worker owns it, which needs its reports to reach that worker; and an rtspSrc open pulls one worker's RTSP output
 * into a channel the other worker owns.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { CallbackReceiver, simsOfWorkers, startClusterGateway, type ClusterGateway } from '../support/cluster-gateway';
import { RawRtsp, recordRtsp, udpSocket } from '../../plugins/rtsp-out/test/helpers';
import { probeFile } from '../support/ffprobe';
import { HttpFlvPlayer, TcpTerminal, capture, encodeLazily, ffprobe, loopedPackets, waitFor } from '../e2e/helpers';

const CAPTURE = 'jt1078/glaciall-cif-h264-2013.bin';
/** the session timeout announced to RTSP readers (short, so a lost report shows within seconds) */
const TIMEOUT_SEC = 2;

describe('RTSP on a gateway with two workers (real process)', function () {
  this.timeout(120_000);
  let gw: ClusterGateway;
  const cb = new CallbackReceiver();
  const terminals: TcpTerminal[] = [];
  /** a channel owned by worker 0 and one by worker 1 */
  const sims = simsOfWorkers(13600136000, 1, 2);
  const opened = new Map<string, { reqId: string; url: string; port: number }>();

  before(async () => {
    await cb.start();
    gw = await startClusterGateway('cluster-rtsp', { workers: 2 }, [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
      { name: 'flv-out', config: { port: 0 } },
      { name: 'rtsp-out', config: { port: 0, rtpPort: 0, rtcpPort: 0, sessionTimeoutSec: TIMEOUT_SEC } },
      { name: 'rtsp-source', config: {} },
      { name: 'callback-notifier', config: { allowLoopback: true } },
    ]);
    assert.ok(gw.ports['rtsp-out.port'] > 0, gw.log());
    for (const sim of sims) {
      const r = await gw.api('POST', '/strm/open', {
        user: { token: 'tk' },
        typ: 'live',
        simNo: sim,
        chanId: 1,
        fmt: 4,
        scheme: 'rtsp',
        dataTyp: 1,
        reqId: `rtsp-${sim}`,
        cb: `http://127.0.0.1:${cb.port}`,
      });
      assert.equal(r.json.errCode, 0, r.text);
      opened.set(sim, { reqId: r.json.data[0].reqId, url: r.json.data[0].playUrl, port: r.json.data[0].port });
      const t = await TcpTerminal.connect(r.json.data[0].port);
      terminals.push(t);
      void t.send(encodeLazily(loopedPackets(capture(CAPTURE), 40), { sim, channel: 1 }), 16, 20).catch(() => undefined);
    }
    for (const o of opened.values()) {
      await waitFor('the stream ready', async () => (await gw.api('GET', `/strm/status?reqId=${o.reqId}`)).json.data[0]?.ready, 30_000, 100);
    }
  });

  after(() => {
    for (const t of terminals) t.socket.destroy();
    gw?.stop();
    cb.stop();
  });

  for (const transport of ['tcp', 'udp'] as const) {
    it(`ffmpeg plays each worker's channel over ${transport.toUpperCase()}`, async () => {
      for (const [i, sim] of sims.entries()) {
        const rec = await recordRtsp(opened.get(sim)!.url, transport, 2);
        assert.equal(rec.code, 0, `worker ${i}'s channel: ffmpeg: ${rec.stderr}`);
        const p = await probeFile(rec.file);
        fs.rmSync(rec.file, { force: true });
        const v = p.streams.find((s) => s.codec_type === 'video');
        assert.equal(v?.codec_name, 'h264');
        assert.equal(`${v?.width}x${v?.height}`, '352x288');
        assert.ok(Number(v?.nb_read_frames) >= 30, `worker ${i}'s channel: ${v?.nb_read_frames} frames`);
        assert.equal(p.decodeErrors, '');
      }
    });
  }

  it('a UDP reader that only sends receiver reports keeps playing on either worker', async () => {
    const readers = [];
    for (const sim of sims) {
      const { url } = opened.get(sim)!;
      const rtp = await udpSocket();
      const rtcp = await udpSocket();
      let packets = 0;
      rtp.on('message', () => {
        packets++;
      });
      const c = await RawRtsp.connect(gw.ports['rtsp-out.port']);
      const [base, query] = url.split('?');
      assert.equal((await c.request('DESCRIBE', url)).status, 200);
      const s = await c.request('SETUP', `${base}/trackID=0?${query}`, {
        Transport: `RTP/AVP;unicast;client_port=${rtp.address().port}-${rtcp.address().port}`,
      });
      assert.equal(s.status, 200);
      const serverRtcp = Number(/server_port=\d+-(\d+)/.exec(s.headers.get('transport')!)![1]);
      const session = s.headers.get('session')!.split(';')[0];
      assert.equal((await c.request('PLAY', url, { Session: session })).status, 200);
      await waitFor('RTP over UDP', () => packets > 20, 10_000);
      // no more requests: the control connection goes, and a report every 1.5 s is all that says the reader is there
      c.close();
      const rr = Buffer.from([0x80, 201, 0, 1, 0, 0, 0, 1]);
      rtcp.send(rr, serverRtcp, '127.0.0.1');
      const timer = setInterval(() => rtcp.send(rr, serverRtcp, '127.0.0.1'), 1500);
      readers.push({ sim, rtp, rtcp, timer, count: () => packets });
    }
    try {
      // 4x the timeout: a reader whose reports went to the worker that does not hold its session would be timed out
      await new Promise((r) => setTimeout(r, 4 * TIMEOUT_SEC * 1000));
      for (const [i, r] of readers.entries()) {
        const before = r.count();
        await waitFor(`worker ${i}'s reader still gets RTP`, () => r.count() > before + 20, 5000);
        const st = (await gw.api('GET', `/strm/status?reqId=${opened.get(r.sim)!.reqId}`)).json.data[0];
        assert.equal(st.players, 1, `worker ${i}'s reader is still a player after 4x the timeout`);
      }
      assert.ok(
        !gw.log().includes('RTSP session timed out'),
        gw
          .lines('RTSP session timed out')
          .map((l) => JSON.stringify(l))
          .join('\n'),
      );
      // the reports that reached the other worker were passed on (the scrape sums both workers)
      const m = (await gw.api('GET', '/metrics')).text;
      assert.match(m, /^gw_rtsp_out_udp_peers_relayed_total\{outcome="sent"\} [1-9]/m);
      assert.doesNotMatch(m, /^gw_rtsp_out_udp_peers_relayed_total\{outcome="dropped"\} [1-9]/m);
      // and once its reports stop, each reader is timed out by its own worker
      for (const r of readers) clearInterval(r.timer);
      for (const [i, r] of readers.entries()) {
        await waitFor(
          `worker ${i}'s reader timed out`,
          async () => (await gw.api('GET', `/strm/status?reqId=${opened.get(r.sim)!.reqId}`)).json.data[0].players === 0,
          10_000,
          100,
        );
      }
    } finally {
      for (const r of readers) {
        clearInterval(r.timer);
        r.rtp.close();
        r.rtcp.close();
      }
    }
  });

  it('an rtspSrc open on one worker pulls the RTSP output of the other', async () => {
    // a virtual channel owned by worker 1 pulls the channel worker 0 serves
    const sim = simsOfWorkers(13500135000, 3, 2)[1];
    const source = opened.get(sims[0])!.url;
    const r = await gw.api('POST', '/strm/open', {
      user: { token: 'tk' },
      typ: 'live',
      simNo: sim,
      chanId: 3,
      scheme: 'http',
      reqId: 'rtsp-pull',
      rtspSrc: { url: source },
      cb: `http://127.0.0.1:${cb.port}`,
    });
    assert.equal(r.json.errCode, 0, r.text);
    const player = await HttpFlvPlayer.connect(r.json.data[0].playUrl);
    await waitFor('pulled video', () => player.videoFrames() >= 40, 30_000, 50);
    player.close();
    const p = ffprobe(player.data(), 'flv');
    assert.equal(p.codec, 'h264');
    assert.equal(p.width, 352);
    const lines = await waitFor("the open's log line", () =>
      gw.lines<{ reqId: string; worker: number }>('"request opened"').find((l) => l.reqId === 'rtsp-pull'),
    );
    assert.equal(lines.worker, 1);
    // the pull is a reader of worker 0's stream
    const st = (await gw.api('GET', `/strm/status?reqId=${opened.get(sims[0])!.reqId}`)).json.data[0];
    assert.ok(st.players >= 1, JSON.stringify(st));
    assert.equal((await gw.api('POST', '/strm/close', { reqIds: ['rtsp-pull'] })).json.data[0].closed, true);
  });
});
