import { definePlugin, INTERCOM_TALKS, servePlays } from '../../plugin-sdk';
import { createRtpFormat } from '../../plugin-sdk/rtp';
import { WebrtcConfig } from './src/config';
import { pcmaStage } from './src/pcma-stage';
import { freeUdpPort, listenMuxedUdp } from './src/udp-mux';
import { WEBRTC_PREFIX, WhepServer } from './src/whep';

export { WebrtcConfig };

/**
 * WebRTC play (WHEP) and talk for browsers: H.264 (or H.265) as received and G.711 passed through, over one muxed UDP
 * port per process, on libdatachannel. Open with fmt 0 and scheme `webrtc`: the play URL is the WHEP endpoint on the
 * API port. See the README.
 */
export default definePlugin({
  name: 'webrtc',
  config: WebrtcConfig,
  env: { udpPort: 'GW_WEBRTC_UDP_PORT' },
  uses: [INTERCOM_TALKS],
  async setup(ctx) {
    const c = ctx.config;
    const m = ctx.metrics;
    for (const [i, s] of c.iceServers.entries()) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the site's JSON can put anything in this array: this is its check
      if (typeof s?.urls !== 'string' || !/^(stun|turns?):[^\s<>]+$/.test(s.urls)) {
        throw new Error(`config key iceServers[${i}]: give { urls: 'stun:host:port' or 'turn:host:port?transport=tcp', username?, credential? }`);
      }
    }
    const packets = m.hotCounter('packets_total', 'RTP packets sent to browsers (all sessions)', []).child({});
    const rtpMade = m.counter('rtp_packets_made_total', 'RTP packets made from the bus (once per stream, whatever the number of sessions)', ['kind']);
    const refused = m.counter('offers_refused_total', 'WHEP offers refused, by reason', ['reason']);
    const keyFrameRequests = m.counter('key_frame_requests_total', 'PLI and FIR from browsers (the terminal cannot be asked: the next key frame answers)');
    const talkPackets = m.counter('talk_packets_total', 'RTP audio packets taken from browsers for talk');
    let encoders = 0;
    const format = createRtpFormat({
      mtu: c.mtu,
      packets: { video: rtpMade.labels('video'), audio: rtpMade.labels('audio') },
      encoders: (d) => {
        encoders += d;
      },
    });
    ctx.bus.registerStage(pcmaStage());
    const bindHost = c.host ?? ctx.site.listenHost;
    const port = c.udpPort === 0 ? await freeUdpPort(bindHost) : c.udpPort + ctx.workers.index;
    const publicHost = c.publicHost ?? ctx.site.publicHost;
    const udp = listenMuxedUdp(port, bindHost, ctx.log);
    const plays = servePlays(ctx, { protocol: 'webrtc', streamOf: (rest) => /^([^/]+)\/whep$/.exec(rest)?.[1] });
    const server = new WhepServer({
      config: c,
      sessions: ctx.sessions,
      plays,
      format,
      log: ctx.log,
      port,
      bindHost,
      publicHost,
      talks: ctx.services.find(INTERCOM_TALKS),
      counters: {
        refused: (reason) => refused.inc({ reason }),
        keyFrameRequests: (n) => keyFrameRequests.inc(n),
        packets: (n) => packets.add(n),
        talkPackets: (n) => talkPackets.inc(n),
      },
    });
    server.mount(ctx.routes);
    m.gauge('sessions', 'WebRTC sessions (peer connections) held', [], (g) => g.set(server.count));
    m.gauge('streams', 'streams with WebRTC readers (an RTP encoder of the bus running)', [], (g) => g.set(encoders));
    ctx.sessions.registerOutput({
      name: 'webrtc',
      fmt: 0,
      schemes: ['webrtc'],
      playUrl: ({ streamName, reqId, token, host }) => ctx.routes.url(`${WEBRTC_PREFIX}/${streamName}/whep`, { host, query: { reqId, token } }),
    });
    ctx.log.info({ udpPort: port, bindHost, publicHost, iceServers: c.iceServers.length }, 'WebRTC (WHEP) served on the API port');
    return {
      stop() {
        server.stop();
        plays.stop();
        udp.stop();
      },
    };
  },
});
