import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { CloseCause, definePlugin, type ChannelStream, type StreamTyp } from '../../plugin-sdk';
import type { Jt1078Layout } from './src/packet';
import { Jt1078StreamAssembler } from './src/stream-assembler';
import { TerminalLink, type ChannelSource, type LinkHost, type LinkTotals } from './src/terminal-link';

export class Jt1078IngestConfig {
  @IsInt() @Min(0) @Max(65535)
  livePort2013 = 7612;
  @IsInt() @Min(0) @Max(65535)
  livePort2019 = 7613;
  @IsInt() @Min(0) @Max(65535)
  replayPort2013 = 7614;
  @IsInt() @Min(0) @Max(65535)
  replayPort2019 = 7615;

  @IsOptional() @IsString()
  host: string | undefined = undefined;

  @IsBoolean()
  udp = true;

  /** what open results advertise: terminals push over TCP or UDP */
  @IsIn(['tcp', 'udp'])
  advertise = 'tcp';

  /** UDP reorder buffer: packets held and how long (ms) */
  @IsInt() @Min(0) @Max(4096)
  reorderPackets = 64;
  @IsInt() @Min(0) @Max(5000)
  reorderMs = 200;

  /** a link that carries no opened channel is closed after this long (ms) */
  @IsInt() @Min(100) @Max(600_000)
  unknownGraceMs = 10_000;

  /** after a terminal disconnects, how long a reconnect resumes the same stream (ms); then closeCause 2 */
  @IsInt() @Min(0) @Max(600_000)
  disconnectGraceMs = 10_000;

  /** a UDP source silent this long counts as disconnected (ms) */
  @IsInt() @Min(100) @Max(600_000)
  udpIdleMs = 10_000;

  /** largest reassembled frame (bytes); bigger ones are dropped */
  @IsInt() @Min(64 * 1024) @Max(64 * 1024 * 1024)
  maxFrameBytes = 4 * 1024 * 1024;
}

type ListenerName = 'live2013' | 'live2019' | 'replay2013' | 'replay2019';

/**
 * JT/T 1078 terminals push here: four listeners (live/replay x 2013/2019), TCP and UDP on each port.
 * Each link detects its layout from the packets; each channel it carries feeds the bus stream that requests opened.
 */
export default definePlugin({
  name: 'jt1078-ingest',
  config: Jt1078IngestConfig,
  async setup(ctx) {
    const c = ctx.config;
    const links = new Set<TerminalLink>();
    const active = new Map<string, ChannelSource>();
    const graceTimers = new Map<string, () => void>();
    /** per listener: what its closed links carried */
    const closedTotals = new Map<string, LinkTotals>();
    let linkSeq = 0;

    const m = {
      bytes: ctx.metrics.counter('bytes_total', 'bytes received from terminals', ['listener', 'transport']),
      links: ctx.metrics.counter('links_total', 'terminal connections (TCP) or sources (UDP) accepted', ['listener', 'transport']),
      layouts: ctx.metrics.counter('layouts_detected_total', 'links by the packet layout detected', ['listener', 'layout']),
      unmatched: ctx.metrics.counter('unmatched_packets_total', 'packets for channels nobody opened (dropped)', ['listener']),
      reconnects: ctx.metrics.counter('reconnects_total', 'terminals that came back within the disconnect grace'),
      graceExpired: ctx.metrics.counter('disconnects_total', 'streams closed because the terminal stayed away past the grace'),
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
    const streamGauge = (name: string, help: string, pick: (s: ChannelSource) => number) =>
      ctx.metrics.gauge(name, help, ['stream', 'layout', 'transport'], (g) => {
        g.reset();
        for (const s of active.values()) g.set({ stream: s.stream.name, layout: s.link.layout ?? 'unknown', transport: s.link.transport }, pick(s));
      });
    streamGauge('stream_packets', 'packets of a channel stream', (s) => s.assembler.stats.packets);
    streamGauge('stream_video_frames', 'video frames published', (s) => s.assembler.stats.videoUnits);
    streamGauge('stream_audio_frames', 'audio frames published', (s) => s.assembler.stats.audioUnits);
    streamGauge('stream_lost_packets', 'packets lost (sequence gaps)', (s) => s.assembler.stats.reorder.lost);
    streamGauge('stream_dropped_frames', 'frames dropped for loss or bad reassembly', (s) => s.assembler.stats.reassembly.droppedFrames);
    streamGauge('stream_link_bytes', 'bytes received on the stream\'s link', (s) => s.link.counters.bytes);
    streamGauge('stream_resyncs', 'resynchronisations on the stream\'s link', (s) => s.link.parser.stats.resyncs);

    const host: LinkHost = {
      sessions: ctx.sessions,
      log: ctx.log,
      unknownGraceMs: c.unknownGraceMs,
      unmatched: (link) => m.unmatched.inc({ listener: link.listener }),
      setTimer: (fn, ms) => ctx.clock.setTimeout(fn, ms),
      now: () => ctx.clock.now(),
      attach(link, stream: ChannelStream): ChannelSource {
        const grace = graceTimers.get(stream.name);
        if (grace) {
          grace();
          graceTimers.delete(stream.name);
          m.reconnects.inc();
          ctx.log.info({ stream: stream.name, link: link.id }, 'terminal reconnected within the grace: stream resumes');
        }
        const publisher = stream.media.attachPublisher();
        const assembler = new Jt1078StreamAssembler({
          onTrack: (t) => publisher.setTrack(t),
          onAccessUnit: (au) => {
            au.receivedAt = performance.now();
            publisher.push(au);
          },
        }, {
          reorder: link.transport === 'udp' ? { maxPackets: c.reorderPackets, maxDelayMs: c.reorderMs } : false,
          maxFrameBytes: c.maxFrameBytes,
        });
        const key = `${stream.normSim}_${stream.chanId}`;
        const src: ChannelSource = { key, stream, publisher, assembler, link };
        const previous = active.get(stream.name);
        if (previous && previous.link !== link) previous.link.forgetSource(previous.key);
        active.set(stream.name, src);
        // the last request on the stream went: the terminal's channel stops, and its link if nothing else is on it
        publisher.onClose(() => {
          if (active.get(stream.name) === src) active.delete(stream.name);
          link.dropSource(key);
        });
        return src;
      },
      detach(src, why) {
        if (active.get(src.stream.name) !== src) return;
        active.delete(src.stream.name);
        if (why !== 'link-closed' || src.publisher.closed || src.stream.state === 'closing') return;
        src.publisher.pause();
        const name = src.stream.name;
        ctx.log.info({ stream: name, graceMs: c.disconnectGraceMs }, 'terminal disconnected: waiting for it to come back');
        graceTimers.set(name, ctx.clock.setTimeout(() => {
          graceTimers.delete(name);
          if (active.has(name)) return;
          m.graceExpired.inc();
          ctx.log.warn({ stream: name }, 'terminal did not come back: closing the stream (closeCause 2)');
          ctx.sessions.closeStream(name, CloseCause.termStrmClose);
        }, c.disconnectGraceMs));
      },
    };

    const listeners: Array<{ name: ListenerName; typ: StreamTyp; layout: Jt1078Layout; port: number; key: keyof Jt1078IngestConfig }> = [
      { name: 'live2013', typ: 'live', layout: '2013', port: c.livePort2013, key: 'livePort2013' },
      { name: 'live2019', typ: 'live', layout: '2019', port: c.livePort2019, key: 'livePort2019' },
      { name: 'replay2013', typ: 'replay', layout: '2013', port: c.replayPort2013, key: 'replayPort2013' },
      { name: 'replay2019', typ: 'replay', layout: '2019', port: c.replayPort2019, key: 'replayPort2019' },
    ];
    const bound = new Map<ListenerName, number>();
    const udpLinks = new Map<string, { link: TerminalLink; lastSeen: number; layoutCounted: boolean }>();
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
      const bytes = m.bytes.labels(l.name, 'tcp');
      const srv = await ctx.net.listenTcp({ port: l.port, host: c.host, key: l.key }, (socket) => {
        const id = `${l.name}/tcp#${++linkSeq} ${socket.remoteAddress}:${socket.remotePort}`;
        const link = new TerminalLink(id, l.name, l.typ, 'tcp', l.layout, host, linkClosed, socket);
        let counted = false;
        links.add(link);
        m.links.inc({ listener: l.name, transport: 'tcp' });
        socket.setNoDelay(true);
        socket.on('data', (chunk: Buffer) => {
          bytes.inc(chunk.length);
          link.push(chunk);
          if (!counted) counted = countLayout(link);
        });
        socket.on('error', (err) => ctx.log.debug({ link: id, err: err.message }, 'terminal socket error'));
        socket.on('close', () => link.ended('terminal disconnected'));
      });
      bound.set(l.name, (srv.address() as AddressInfo).port);
      if (c.udp) {
        const udpBytes = m.bytes.labels(l.name, 'udp');
        await ctx.net.listenUdp({ port: bound.get(l.name)!, host: c.host, key: l.key }, (msg, rinfo) => {
          udpBytes.inc(msg.length);
          const k = `${l.name}|${rinfo.address}|${rinfo.port}`;
          let u = udpLinks.get(k);
          if (!u) {
            const id = `${l.name}/udp ${rinfo.address}:${rinfo.port}`;
            const link = new TerminalLink(id, l.name, l.typ, 'udp', l.layout, host, (x) => {
              udpLinks.delete(k);
              linkClosed(x);
            });
            links.add(link);
            m.links.inc({ listener: l.name, transport: 'udp' });
            u = { link, lastSeen: 0, layoutCounted: false };
            udpLinks.set(k, u);
          }
          u.lastSeen = ctx.clock.now();
          u.link.push(msg);
          if (!u.layoutCounted) u.layoutCounted = countLayout(u.link);
        });
      }
    }

    // UDP reorder deadlines and silence detection
    const cancelPoll = ctx.clock.setInterval(() => {
      const now = ctx.clock.now();
      for (const u of [...udpLinks.values()]) {
        if (now - u.lastSeen > c.udpIdleMs) u.link.close('UDP source silent');
        else u.link.poll();
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
        for (const cancel of graceTimers.values()) cancel();
        graceTimers.clear();
        for (const link of [...links]) link.close('gateway stopping');
      },
    };
  },
});
