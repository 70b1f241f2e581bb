import * as os from 'node:os';
import { ByteTotal, definePlugin } from '../../plugin-sdk';
import { RtspOutConfig } from './src/config';
import { APP } from './src/play-url';
import { createRtpFormat } from '../../plugin-sdk/rtp';
import { RtspServer } from './src/server';
import { udpPeerRelay } from './src/udp-peer-relay';

export { RtspOutConfig };

/**
 * RTSP players for fmt 4: an RTSP 1.0 server on rtsp-out's own port. Each playing session is a bus reader of the RTP
 * format: a stream's units are packetised once (one encoder per stream) for all its readers, over TCP interleaved
 * and UDP alike; the bus's GOP cache starts a joiner at a keyframe and its bounded per-reader queue holds back,
 * skips or drops a slow TCP reader.
 */
export default definePlugin({
  name: 'rtsp-out',
  config: RtspOutConfig,
  env: { port: 'GW_RTSP_PORT' },
  async setup(ctx) {
    const c = ctx.config;
    const m = ctx.metrics;
    const packets = m.counter('rtp_packets_total', 'RTP packets made (once per stream, whatever the number of readers)', ['kind']);
    const refused = m.counter('plays_refused_total', 'RTSP requests refused: 401 (unknown request or wrong token) or 400 (a via that names no stage)');
    const bad = m.counter('bad_requests_total', 'malformed RTSP requests (answered 400/413/505/501, or the connection closed)');
    const timeouts = m.counter('session_timeouts_total', 'RTSP sessions torn down after sessionTimeoutSec without a word from their client');
    const udpDropped = m.counter('udp_dropped_total', 'RTP/RTCP datagrams dropped because the UDP send queue was full');
    const peersRelayed = m.counter(
      'udp_peers_relayed_total',
      "with workers: addresses of UDP readers heard here whose session may be another worker's, passed to the others",
      ['outcome'],
    );
    const relayedSent = peersRelayed.labels('sent');
    const relayedDropped = peersRelayed.labels('dropped');
    // added to on every unit sent: see ByteTotal
    const bytesOut = new ByteTotal();
    let streams = 0;
    const format = createRtpFormat({
      mtu: c.mtu,
      // label children resolved once: this runs per unit
      packets: { video: packets.labels('video'), audio: packets.labels('audio') },
      encoders: (d) => {
        streams += d;
      },
    });

    let server: RtspServer | undefined;
    const relay = udpPeerRelay({
      workers: ctx.workers,
      clock: ctx.clock,
      heard: (peers) => server?.heardElsewhere(peers),
      relayed: (n) => relayedSent.inc(n),
      dropped: () => relayedDropped.inc(),
    });
    const rtpSocket = await ctx.net.listenUdp({ port: c.rtpPort, host: c.host, key: 'rtpPort' }, (msg, rinfo) => server?.onUdp(msg, rinfo));
    const rtcpSocket = await ctx.net.listenUdp({ port: c.rtcpPort, host: c.host, key: 'rtcpPort' }, (msg, rinfo) => server?.onUdp(msg, rinfo));
    const tcp = await ctx.net.listenTcp({ port: c.port, host: c.host, key: 'port', route: 'stream-path' }, (socket) => {
      if (server) server.onConnection(socket);
      else socket.destroy();
    });
    const addr = tcp.address();
    const port = typeof addr === 'object' && addr ? addr.port : c.port;
    const publicPort = c.publicPort ?? port;

    server = new RtspServer({
      log: ctx.log,
      requestLog: ctx.requestLog,
      sessions: ctx.sessions,
      bus: ctx.bus,
      clock: ctx.clock,
      config: c,
      format,
      publicAddress: `${ctx.site.publicHost}:${publicPort}`,
      rtpSocket,
      rtcpSocket,
      cname: `rtsp-out@${ctx.site.instId || os.hostname()}`,
      hooks: {
        refused: () => refused.inc(),
        badRequest: () => bad.inc(),
        timedOut: () => timeouts.inc(),
        udpDropped: () => udpDropped.inc(),
        sent: (n) => bytesOut.add(n),
        unknownPeer: (peer) => relay.add(peer),
      },
    });
    const srv = server;
    m.gauge('sessions', 'RTSP sessions by transport and state', ['transport', 'state'], (g) => {
      for (const t of ['tcp', 'udp'] as const) {
        g.labels(t, 'playing').set(srv.sessionsBy(t, true));
        g.labels(t, 'ready').set(srv.sessionsBy(t, false));
      }
    });
    m.gauge('connections', 'RTSP control connections open', [], (g) => g.set(srv.connectionCount));
    m.gauge('bytes_out', 'bytes sent to RTSP readers (RTP, RTCP, interleaved framing)', [], (g) => g.set(bytesOut.n));
    m.gauge('streams', 'streams with RTSP readers (an RTP encoder running)', [], (g) => g.set(streams));

    ctx.sessions.registerOutput({
      name: 'rtsp-out',
      fmt: 4,
      schemes: ['rtsp'],
      playUrl: ({ streamName, reqId, token, host }) =>
        `rtsp://${host}:${publicPort}/${APP}/${streamName}?reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}`,
    });
    // a request's players go with it; the stream's closing ends every reader through the bus
    ctx.sessions.onRequestClosed((r) => srv.closeRequest(r.reqId));

    ctx.log.info({ port, rtpPort: rtpSocket.address().port, rtcpPort: rtcpSocket.address().port }, 'RTSP players served');
    return {
      stop: () => {
        relay.stop();
        srv.stop();
      },
    };
  },
});
