import type { AddressInfo } from 'node:net';
import {
  CloseCause, TERMINAL_LINKS, definePlugin, normaliseSim, type ChannelStream, type StreamTyp, type TerminalLinks,
} from '../../plugin-sdk';
import { Jt1078IngestConfig } from './src/config';
import type { Jt1078Layout } from './src/packet';
import { Jt1078StreamAssembler, type AudioOptions } from './src/stream-assembler';
import { LogLimiter } from '../../plugin-sdk';
import type { SliceReader } from '../../plugin-sdk';
import { TerminalLink, type ChannelSource, type LinkHost, type LinkTotals } from './src/terminal-link';

export { Jt1078IngestConfig, terminalAudioProblem, type TerminalAudioOverride } from './src/config';

type ListenerName = 'live2013' | 'live2019' | 'replay2013' | 'replay2019';
type AttachListener = Parameters<TerminalLinks['onAttach']>[0];

const channelKey = (typ: StreamTyp, normSim: string, chanId: number): string => `${typ}/${normSim}/${chanId}`;

/**
 * A publisher link that sent for its channel within this long keeps its stream: disconnectGraceMs, but never less
 * than this (a site with no reconnect grace would otherwise let any sender take a stream between two packets).
 */
const MIN_ALIVE_MS = 1000;
/** addresses remembered per stream as refused (an address spraying from many ports is one) */
const MAX_SUSPECTS = 16;
/** a link still refused writes one more warning (with what it was refused since) this often at most */
const REFUSAL_RELOG_MS = 60_000;
/** links whose first refusal is logged, at most, per window (a UDP sender can be a new link per source port) */
const REFUSAL_LINES_PER_WINDOW = 20;
const REFUSAL_WINDOW_MS = 10_000;
const REFUSED_LINE = 'another link pushes this stream: refused';

/**
 * One channel stream as the ingest holds it: who publishes it, and who may take it over. A stream has one
 * publisher link; another link pushing it is refused while the publisher is alive (it sent within the grace).
 */
interface Claim {
  readonly stream: ChannelStream;
  /** the source publishing now; undefined while its terminal is away (and before the first) */
  src: ChannelSource | undefined;
  /** the publisher's link closed: the disconnect grace runs */
  away: { lastAt: number; address: string; link: string; cancel: () => void } | undefined;
  /** pinFirstAddress: the first publisher's address */
  pinned: string | undefined;
  /**
   * Addresses refused for this stream. While the publisher's terminal is away, a link from one of them (other than
   * the terminal's own address) is not taken for the terminal coming back: it waits out the grace like any sender.
   */
  readonly suspects: Set<string>;
  /** the link refused last, and when: it takes the stream if the grace ends with nobody publishing */
  contender: { link: TerminalLink; at: number } | undefined;
}

/**
 * JT/T 1078 terminals push here: four listeners (live/replay x 2013/2019), TCP and UDP on each port.
 * Each link detects its layout from the packets; each channel it carries feeds the bus stream that requests opened.
 * The links are offered to other plugins as the terminal-links service (intercom sends audio down them).
 */
export default definePlugin({
  name: 'jt1078-ingest',
  config: Jt1078IngestConfig,
  provides: [TERMINAL_LINKS],
  // with several workers, a terminal's connection goes to the worker of its channel (src/route.ts, loaded alone by
  // the primary)
  routers: { jt1078: './src/route' },
  async setup(ctx) {
    const c = ctx.config;
    const links = new Set<TerminalLink>();
    /** by stream name */
    const claims = new Map<string, Claim>();
    /** the same sources by channel (typ, SIM, channel), for the service */
    const byChannel = new Map<string, ChannelSource>();
    const attachListeners = new Set<AttachListener>();
    /** per listener: what its closed links carried */
    const closedTotals = new Map<string, LinkTotals>();
    let linkSeq = 0;

    const siteAudio: AudioOptions = { g726Packing: c.g726Packing, g726Bits: c.g726Bits || undefined };
    const audioBySim = new Map<string, AudioOptions>();
    for (const [sim, o] of Object.entries(c.terminalAudio)) {
      audioBySim.set(normaliseSim(sim), { g726Packing: o.g726Packing ?? siteAudio.g726Packing, g726Bits: o.g726Bits ?? siteAudio.g726Bits });
    }

    const m = {
      // added to per socket read: a hot counter, folded in at scrape time
      bytes: ctx.metrics.hotCounter('bytes_total', 'bytes received from terminals', ['listener', 'transport']),
      links: ctx.metrics.counter('links_total', 'terminal connections (TCP) or sources (UDP) accepted', ['listener', 'transport']),
      layouts: ctx.metrics.counter('layouts_detected_total', 'links by the packet layout detected', ['listener', 'layout']),
      unmatched: ctx.metrics.counter('unmatched_packets_total', 'packets for channels nobody opened (dropped)', ['listener']),
      reconnects: ctx.metrics.counter('reconnects_total', 'terminals that came back within the disconnect grace'),
      graceExpired: ctx.metrics.counter('disconnects_total', 'streams closed because the terminal stayed away past the grace'),
      takeoversRefused: ctx.metrics.counter('takeovers_refused_total', 'packets dropped because another link publishes their stream (alive: it sent within the grace), or the stream is pinned to another address', ['listener', 'transport']),
      takeoversAccepted: ctx.metrics.counter('takeovers_accepted_total', 'streams taken over by another link: reason silent (the publisher\'s link was silent past the grace) or gone (its link closed and it did not come back)', ['listener', 'transport', 'reason']),
      downPackets: ctx.metrics.counter('downlink_packets_total', 'JT/T 1078 packets sent to terminals (intercom audio, raw writes)', ['transport']),
      downBytes: ctx.metrics.counter('downlink_bytes_total', 'bytes sent to terminals', ['transport']),
      downRefused: ctx.metrics.counter('downlink_refused_total', 'downlink frames refused: link closed, or its backlog over downlinkMaxPendingBytes', ['reason']),
    };
    ctx.metrics.gauge('links', 'open terminal links', [], (g) => g.set(links.size));
    const listenerGauge = (name: string, help: string, pick: (t: LinkTotals) => number) =>
      ctx.metrics.gauge(name, help, ['listener'], (g) => {
        g.reset();
        const sum = new Map<string, number>();
        for (const [k, t] of closedTotals) sum.set(k, pick(t));
        for (const l of links) sum.set(l.listener, (sum.get(l.listener) ?? 0) + pick(l.totals()));
        for (const [k, v] of sum) g.set({ listener: k }, v);
      });
    listenerGauge('listener_packets', 'JT/T 1078 packets parsed, by listener', (t) => t.packets);
    listenerGauge('listener_frames', 'audio and video frames published, by listener', (t) => t.frames);
    listenerGauge('listener_lost_packets', 'packets lost (sequence gaps), by listener', (t) => t.lostPackets);
    listenerGauge('listener_dropped_frames', 'frames dropped for loss or bad reassembly, by listener', (t) => t.droppedFrames);
    listenerGauge('listener_resyncs', 'parser resynchronisations after junk, by listener', (t) => t.resyncs);
    // one series a stream each: read in one pass a scrape (a Gauge per column cost ~170 ms a scrape at 1,000 streams)
    const streamColumns: Array<[string, string, (s: ChannelSource) => number]> = [
      ['stream_packets', 'packets of a channel stream', (s) => s.assembler.stats.packets],
      ['stream_video_frames', 'video frames published', (s) => s.assembler.stats.videoUnits],
      ['stream_audio_frames', 'audio frames published', (s) => s.assembler.stats.audioUnits],
      ['stream_lost_packets', 'packets lost (sequence gaps)', (s) => s.assembler.stats.reorder.lost],
      ['stream_dropped_frames', 'frames dropped for loss or bad reassembly', (s) => s.assembler.stats.reassembly.droppedFrames],
      ['stream_audio_waiting_frames', 'audio frames left out while the codec\'s parameters were unknown (raw AAC before ADTS, G.726 before its rate)', (s) => s.assembler.stats.audio.waitingForParameters],
      ['stream_audio_malformed_frames', 'audio frames that could not be framed (broken ADTS, ADPCM without its header)', (s) => s.assembler.stats.audio.malformed],
      ['stream_audio_hisilicon_frames', 'audio frames that carried a HiSilicon header (removed)', (s) => s.assembler.stats.reassembly.hisiliconHeaders],
      ['stream_link_bytes', 'bytes received on the stream\'s link', (s) => s.link.counters.bytes],
      ['stream_resyncs', 'resynchronisations on the stream\'s link', (s) => s.link.parser.stats.resyncs],
    ];
    ctx.metrics.gaugeTable(streamColumns.map(([name, help]) => ({ name, help })), ['stream', 'layout', 'transport'], (emit) => {
      for (const { src: s } of claims.values()) {
        if (s) emit({ stream: s.stream.name, layout: s.link.layout ?? 'unknown', transport: s.link.transport }, streamColumns.map((c) => c[2](s)));
      }
    });

    const logLimit = new LogLimiter({ intervalMs: 10_000, now: () => ctx.clock.now() });
    const host: LinkHost = {
      sessions: ctx.sessions,
      log: ctx.log,
      logLimit,
      unknownGraceMs: c.unknownGraceMs,
      downlink: { maxPendingBytes: c.downlinkMaxPendingBytes, hisilicon: c.hisiliconDownlink },
      unmatched: (link) => m.unmatched.inc({ listener: link.listener }),
      setTimer: (fn, ms) => ctx.clock.setTimeout(fn, ms),
      now: () => ctx.clock.now(),
      sent: (link, packets, bytes) => {
        m.downPackets.inc({ transport: link.transport }, packets);
        m.downBytes.inc({ transport: link.transport }, bytes);
      },
      refused: (_link, why) => m.downRefused.inc({ reason: why }),
      attach(link, stream: ChannelStream): ChannelSource | undefined {
        const now = ctx.clock.now();
        let cl = claims.get(stream.name);
        if (cl && cl.stream !== stream) {
          // a stream of the same name closed and was opened again: nothing of the old one carries over
          forget(cl);
          cl = undefined;
        }
        if (!cl) cl = claimOf(stream);
        const why = refusal(cl, link, now);
        if (why) {
          refuse(cl, link, why, now);
          return undefined;
        }
        return publish(cl, link, now);
      },
      attached(src) {
        const e = { normSim: src.stream.normSim, chanId: src.stream.chanId, typ: src.stream.typ, link: src.link };
        for (const cb of [...attachListeners]) {
          try {
            cb(e);
          } catch (err) {
            ctx.log.error({ err, stream: src.stream.name }, 'a terminal-links onAttach callback threw');
          }
        }
      },
      detach(src, why) {
        const ck = channelKey(src.stream.typ, src.stream.normSim, src.stream.chanId);
        if (byChannel.get(ck) === src) byChannel.delete(ck);
        const cl = claims.get(src.stream.name);
        if (!cl || cl.src !== src) return;
        cl.src = undefined;
        if (why !== 'link-closed' || src.publisher.closed || src.stream.state === 'closing') return;
        src.publisher.pause();
        const name = src.stream.name;
        ctx.log.info({ stream: name, graceMs: c.disconnectGraceMs }, 'terminal disconnected: waiting for it to come back');
        cl.away = {
          lastAt: src.lastAt, address: src.link.address, link: src.link.id,
          cancel: ctx.clock.setTimeout(() => awayOver(cl), c.disconnectGraceMs),
        };
      },
    };

    const aliveMs = Math.max(c.disconnectGraceMs, MIN_ALIVE_MS);

    function claimOf(stream: ChannelStream): Claim {
      const cl: Claim = { stream, src: undefined, away: undefined, pinned: undefined, suspects: new Set(), contender: undefined };
      claims.set(stream.name, cl);
      stream.media.on('closed', () => {
        if (claims.get(stream.name) === cl) forget(cl);
      });
      return cl;
    }

    function forget(cl: Claim): void {
      cl.away?.cancel();
      cl.away = undefined;
      cl.contender = undefined;
      if (claims.get(cl.stream.name) === cl) claims.delete(cl.stream.name);
    }

    /** Why `link` may not publish the claim's stream now, or undefined when it may. */
    function refusal(cl: Claim, link: TerminalLink, now: number): string | undefined {
      if (c.pinFirstAddress && cl.pinned !== undefined && link.address !== cl.pinned) return 'pinned to another address';
      if (cl.src) return now - cl.src.lastAt <= aliveMs ? 'another link publishes it' : undefined;
      const away = cl.away;
      if (away && now - away.lastAt <= aliveMs && link.address !== away.address && cl.suspects.has(link.address)) {
        return 'waiting for its terminal to come back';
      }
      return undefined;
    }

    const refusedCounters = new Map<string, { inc(): void }>();
    let refusalWindow = { start: -Infinity, lines: 0, notLogged: 0 };

    function refuse(cl: Claim, link: TerminalLink, why: string, now: number): void {
      const ck = `${link.listener}|${link.transport}`;
      let counter = refusedCounters.get(ck);
      if (!counter) refusedCounters.set(ck, (counter = m.takeoversRefused.labels(link.listener, link.transport)));
      counter.inc();
      if (cl.contender?.link === link) cl.contender.at = now;
      else cl.contender = { link, at: now };
      if (cl.suspects.size < MAX_SUSPECTS) cl.suspects.add(link.address);
      // one warning per refused link, then one per REFUSAL_RELOG_MS with the packets refused since: a sender
      // flooding a stream costs a line, not a line per packet
      const r = link.refusalLog;
      if (r.at < 0) {
        r.at = now;
        if (now - refusalWindow.start >= REFUSAL_WINDOW_MS) refusalWindow = { start: now, lines: 0, notLogged: refusalWindow.notLogged };
        if (refusalWindow.lines >= REFUSAL_LINES_PER_WINDOW) {
          refusalWindow.notLogged++;
          r.notLogged++;
          return;
        }
        refusalWindow.lines++;
        const linksNotLogged = refusalWindow.notLogged;
        refusalWindow.notLogged = 0;
        ctx.log.warn({
          link: link.id, stream: cl.stream.name, why, publisher: cl.src?.link.id ?? cl.away?.link,
          ...(linksNotLogged > 0 ? { linksNotLogged } : {}),
        }, REFUSED_LINE);
      } else if (now - r.at >= REFUSAL_RELOG_MS) {
        ctx.log.warn({ link: link.id, stream: cl.stream.name, why, refusedSinceLastLine: r.notLogged + 1 }, 'another link still pushes this stream: refused');
        r.at = now;
        r.notLogged = 0;
      } else {
        r.notLogged++;
      }
    }

    /** `link` publishes the claim's stream from now on (a first push, a reconnect or a takeover). */
    function publish(cl: Claim, link: TerminalLink, now: number, handedOver = false): ChannelSource {
      const stream = cl.stream;
      const prev = cl.src;
      if (prev) {
        // alive checked by the caller: the previous link was silent past the grace
        prev.link.forgetSource(prev.key);
        m.takeoversAccepted.inc({ listener: link.listener, transport: link.transport, reason: 'silent' });
        ctx.log.info({ stream: stream.name, link: link.id, from: prev.link.id, silentMs: now - prev.lastAt }, 'stream taken over: its link was silent past the grace');
      } else if (cl.away || handedOver) {
        const away = cl.away;
        away?.cancel();
        cl.away = undefined;
        if (handedOver || (away && link.address !== away.address && cl.suspects.has(link.address))) {
          m.takeoversAccepted.inc({ listener: link.listener, transport: link.transport, reason: 'gone' });
          ctx.log.info({ stream: stream.name, link: link.id, from: away?.link }, 'stream taken over: its terminal did not come back within the grace');
        } else {
          m.reconnects.inc();
          ctx.log.info({ stream: stream.name, link: link.id }, 'terminal reconnected within the grace: stream resumes');
        }
      }
      const publisher = stream.media.attachPublisher();
      const key = `${stream.normSim}_${stream.chanId}`;
      const assembler = new Jt1078StreamAssembler({
        onTrack: (t) => publisher.setTrack(t),
        onAccessUnit: (au) => publisher.push(au),
        onAudioFraming: (f) => {
          link.noteAudioFraming(key, f);
          ctx.log.info({ stream: stream.name, link: link.id, pt: f.pt, codec: f.codec, hisilicon: f.hisilicon }, 'terminal audio framing');
        },
      }, {
        reorder: link.transport === 'udp' ? { maxPackets: c.reorderPackets, maxDelayMs: c.reorderMs } : false,
        maxFrameBytes: c.maxFrameBytes,
        audio: audioBySim.get(stream.normSim) ?? siteAudio,
        // frames in memory the bus reuses once its readers are done (each frame is pushed in the call that took it)
        alloc: (n) => publisher.alloc(n),
        discard: (b) => publisher.discard(b),
      });
      const src: ChannelSource = { key, stream, publisher, assembler, link, lastAt: now };
      cl.src = src;
      cl.pinned ??= link.address;
      if (cl.contender?.link === link) cl.contender = undefined;
      const ck = channelKey(stream.typ, stream.normSim, stream.chanId);
      byChannel.set(ck, src);
      // the last request on the stream went: the terminal's channel stops, and its link if nothing else is on it
      publisher.onClose(() => {
        if (cl.src === src) cl.src = undefined;
        if (byChannel.get(ck) === src) byChannel.delete(ck);
        link.dropSource(key);
      });
      return src;
    }

    /**
     * The disconnect grace ended with nobody publishing: a link that was refused and still pushes takes the stream
     * (the terminal is gone past the grace); else the stream's requests close (closeCause 2).
     */
    function awayOver(cl: Claim): void {
      if (cl.src || claims.get(cl.stream.name) !== cl) {
        cl.away = undefined;
        return;
      }
      const name = cl.stream.name;
      const now = ctx.clock.now();
      const ct = cl.contender;
      if (ct && !ct.link.closed && now - ct.at <= aliveMs && (!c.pinFirstAddress || ct.link.address === cl.pinned)
        && !cl.stream.media.closed && cl.stream.state !== 'closing') {
        ct.link.adopt(publish(cl, ct.link, now, true));
        return;
      }
      cl.away = undefined;
      m.graceExpired.inc();
      ctx.log.warn({ stream: name }, 'terminal did not come back: closing the stream (closeCause 2)');
      ctx.sessions.closeStream(name, CloseCause.termStrmClose);
    }

    const service: TerminalLinks = {
      find(normSim, chanId, typ) {
        const src = byChannel.get(channelKey(typ, normaliseSim(normSim), chanId));
        return src && !src.link.closed ? src.link : undefined;
      },
      onAttach(cb) {
        attachListeners.add(cb);
        return () => {
          attachListeners.delete(cb);
        };
      },
    };
    ctx.services.provide(TERMINAL_LINKS, service);

    const listeners: Array<{ name: ListenerName; typ: StreamTyp; layout: Jt1078Layout; port: number; key: keyof Jt1078IngestConfig }> = [
      { name: 'live2013', typ: 'live', layout: '2013', port: c.livePort2013, key: 'livePort2013' },
      { name: 'live2019', typ: 'live', layout: '2019', port: c.livePort2019, key: 'livePort2019' },
      { name: 'replay2013', typ: 'replay', layout: '2013', port: c.replayPort2013, key: 'replayPort2013' },
      { name: 'replay2019', typ: 'replay', layout: '2019', port: c.replayPort2019, key: 'replayPort2019' },
    ];
    const bound = new Map<ListenerName, number>();
    const udpLinks = new Map<string, { link: TerminalLink; reader: SliceReader; lastSeen: number }>();
    /** true once the link's layout is known and counted */
    const countLayout = (link: TerminalLink): boolean => {
      if (!link.layout) return false;
      m.layouts.inc({ listener: link.listener, layout: link.layout });
      return true;
    };

    const linkClosed = (x: TerminalLink) => {
      links.delete(x);
      const t = closedTotals.get(x.listener);
      const add = x.totals();
      if (!t) closedTotals.set(x.listener, add);
      else for (const k of Object.keys(add) as Array<keyof LinkTotals>) t[k] += add[k];
    };

    for (const l of listeners) {
      const bytes = m.bytes.child({ listener: l.name, transport: 'tcp' });
      const srv = await ctx.net.listenTcp({ port: l.port, host: c.host, key: l.key, route: 'jt1078' }, (socket) => {
        const id = `${l.name}/tcp#${++linkSeq} ${socket.remoteAddress}:${socket.remotePort}`;
        const link = new TerminalLink(id, l.name, l.typ, l.layout, host, linkClosed, { transport: 'tcp', socket });
        let counted = false;
        links.add(link);
        m.links.inc({ listener: l.name, transport: 'tcp' });
        socket.setNoDelay(true);
        // into one read buffer shared by all terminals (no allocation per read), in the loop's slices: link.push
        // copies what it keeps
        const reader = ctx.net.readSliced(socket, (chunk: Buffer) => {
          bytes.add(chunk.length);
          link.push(chunk);
          if (!counted) counted = countLayout(link);
        }, (err) => {
          ctx.log.error({ link: id, err }, 'terminal read failed: connection closed');
          socket.destroy();
        });
        socket.on('error', (err) => ctx.log.debug({ link: id, err: err.message }, 'terminal socket error'));
        socket.on('close', () => {
          // what was set aside for the turn's end is the terminal's last data: before the link ends
          reader.flush();
          link.ended('terminal disconnected');
        });
      });
      bound.set(l.name, (srv.address() as AddressInfo).port);
      if (c.udp) {
        const udpBytes = m.bytes.child({ listener: l.name, transport: 'udp' });
        await ctx.net.listenUdp({ port: bound.get(l.name)!, host: c.host, key: l.key, route: 'jt1078' }, (msg, rinfo, sock) => {
          udpBytes.add(msg.length);
          const k = `${l.name}|${rinfo.address}|${rinfo.port}`;
          let u = udpLinks.get(k);
          if (!u) {
            const id = `${l.name}/udp ${rinfo.address}:${rinfo.port}`;
            const link = new TerminalLink(id, l.name, l.typ, l.layout, host, (x) => {
              udpLinks.delete(k);
              linkClosed(x);
            }, { transport: 'udp', socket: sock, address: rinfo.address, port: rinfo.port });
            links.add(link);
            m.links.inc({ listener: l.name, transport: 'udp' });
            let counted = false;
            // a datagram is the link's to keep: past the loop's slice it waits for the turn's end as it is
            const reader = ctx.net.sliceReader((dgram) => {
              link.push(dgram);
              if (!counted) counted = countLayout(link);
            }, (err) => ctx.log.error({ link: id, err }, 'terminal datagram failed: dropped'));
            u = { link, reader, lastSeen: 0 };
            udpLinks.set(k, u);
          }
          u.lastSeen = ctx.clock.now();
          u.reader.deliver(msg, true);
        });
      }
    }

    // UDP reorder deadlines and silence detection
    const cancelPoll = ctx.clock.setInterval(() => {
      const now = ctx.clock.now();
      for (const u of [...udpLinks.values()]) {
        if (now - u.lastSeen > c.udpIdleMs) u.link.close('UDP source silent');
        else {
          // the reorder deadlines count from what arrived: what was set aside first
          u.reader.flush();
          u.link.poll();
        }
      }
    }, 50);

    ctx.sessions.registerIngest({
      name: 'jt1078-ingest',
      source: 'terminal',
      pushAddress: (typ) => ({
        host: ctx.site.publicHost,
        port: bound.get(typ === 'live' ? 'live2013' : 'replay2013')!,
        tcp: c.advertise === 'tcp',
        port2019: bound.get(typ === 'live' ? 'live2019' : 'replay2019')!,
        tcp2019: c.advertise === 'tcp',
      }),
    });
    ctx.log.info({ ports: Object.fromEntries(bound), udp: c.udp }, 'listening for terminals');

    return {
      stop() {
        cancelPoll();
        for (const cl of [...claims.values()]) forget(cl);
        for (const link of [...links]) link.close('gateway stopping');
        attachListeners.clear();
        if (logLimit.suppressedTotal > 0) {
          ctx.log.info({ suppressed: logLimit.suppressedTotal, untold: logLimit.pending().size }, 'lines left out by the per-source log rate limit since start');
        }
      },
    };
  },
});
