/**
 * The four push listeners (live and replay, 2013 and 2019 layouts), TCP and, with `udp`, UDP on each port, and the
 * links they make: a TCP connection is a link; a UDP source (address:port) is a link until it is silent for udpIdleMs.
 * The listener's layout is only each link's first guess: the parser detects the layout from the packets.
 *
 * Reads go through the gateway's read slices (ctx.net.readSliced): a TCP read lands in one buffer shared by all
 * terminals (no allocation per read) and link.push copies what it keeps; past the loop's slice a read is set aside to
 * the turn's end, so a burst from a few terminals cannot stall the rest. A datagram is the link's to keep as it is. A
 * 50 ms poll drives what no packet arrives to drive: UDP reorder deadlines and UDP silence.
 */
import type { AddressInfo } from 'node:net';
import type { PluginContext, StreamTyp } from '../../../plugin-sdk';
import type { SliceReader } from '../../../plugin-sdk';
import type { Jt1078IngestConfig } from './config';
import type { IngestMetrics } from './ingest-metrics';
import type { TerminalLinkSet } from './link-set';
import type { Jt1078Layout } from './packet';
import { TerminalLink, type LinkHost } from './terminal-link';

export type ListenerName = 'live2013' | 'live2019' | 'replay2013' | 'replay2019';

/** how often UDP links are polled for reorder deadlines and silence */
const POLL_MS = 50;
/** tries at a TCP+UDP pair when the listener asks for a free port */
const FREE_PORT_ATTEMPTS = 8;

export interface TerminalListeners {
  /** the bound port of each listener (TCP and UDP share it) */
  bound: ReadonlyMap<ListenerName, number>;
  stop(): void;
}

export async function listenForTerminals(
  ctx: PluginContext<Jt1078IngestConfig>,
  host: LinkHost,
  links: TerminalLinkSet,
  m: IngestMetrics,
): Promise<TerminalListeners> {
  const c = ctx.config;
  const listeners: Array<{ name: ListenerName; typ: StreamTyp; layout: Jt1078Layout; port: number; key: keyof Jt1078IngestConfig }> = [
    { name: 'live2013', typ: 'live', layout: '2013', port: c.livePort2013, key: 'livePort2013' },
    { name: 'live2019', typ: 'live', layout: '2019', port: c.livePort2019, key: 'livePort2019' },
    { name: 'replay2013', typ: 'replay', layout: '2013', port: c.replayPort2013, key: 'replayPort2013' },
    { name: 'replay2019', typ: 'replay', layout: '2019', port: c.replayPort2019, key: 'replayPort2019' },
  ];
  const bound = new Map<ListenerName, number>();
  const udpLinks = new Map<string, { link: TerminalLink; reader: SliceReader; lastSeen: number }>();
  let linkSeq = 0;
  /** true once the link's layout is known and counted */
  const countLayout = (link: TerminalLink): boolean => {
    if (!link.layout) return false;
    m.layouts.inc({ listener: link.listener, layout: link.layout });
    return true;
  };
  const linkClosed = (x: TerminalLink) => links.closed(x);

  const listenTcp = (l: (typeof listeners)[number], port: number) => {
    const bytes = m.bytes.child({ listener: l.name, transport: 'tcp' });
    return ctx.net.listenTcp({ port, host: c.host, key: l.key, route: 'jt1078' }, (socket) => {
      const id = `${l.name}/tcp#${++linkSeq} ${socket.remoteAddress}:${socket.remotePort}`;
      const link = new TerminalLink(id, l.name, l.typ, l.layout, host, linkClosed, { transport: 'tcp', socket });
      let counted = false;
      links.add(link);
      m.links.inc({ listener: l.name, transport: 'tcp' });
      socket.setNoDelay(true);
      const reader = ctx.net.readSliced(
        socket,
        (chunk: Buffer) => {
          bytes.add(chunk.length);
          link.push(chunk);
          if (!counted) counted = countLayout(link);
        },
        (err) => {
          ctx.log.error({ link: id, err }, 'terminal read failed: connection closed');
          socket.destroy();
        },
      );
      socket.on('error', (err) => ctx.log.debug({ link: id, err: err.message }, 'terminal socket error'));
      socket.on('close', () => {
        // what was set aside for the turn's end is the terminal's last data: before the link ends
        reader.flush();
        link.ended('terminal disconnected');
      });
    });
  };

  const listenUdp = (l: (typeof listeners)[number], port: number) => {
    const udpBytes = m.bytes.child({ listener: l.name, transport: 'udp' });
    return ctx.net.listenUdp({ port, host: c.host, key: l.key, route: 'jt1078' }, (msg, rinfo, sock) => {
      udpBytes.add(msg.length);
      const k = `${l.name}|${rinfo.address}|${rinfo.port}`;
      let u = udpLinks.get(k);
      if (!u) {
        const id = `${l.name}/udp ${rinfo.address}:${rinfo.port}`;
        const link = new TerminalLink(
          id,
          l.name,
          l.typ,
          l.layout,
          host,
          (x) => {
            udpLinks.delete(k);
            linkClosed(x);
          },
          { transport: 'udp', socket: sock, address: rinfo.address, port: rinfo.port },
        );
        links.add(link);
        m.links.inc({ listener: l.name, transport: 'udp' });
        let counted = false;
        const reader = ctx.net.sliceReader(
          (dgram) => {
            link.push(dgram);
            if (!counted) counted = countLayout(link);
          },
          (err) => ctx.log.error({ link: id, err }, 'terminal datagram failed: dropped'),
        );
        u = { link, reader, lastSeen: 0 };
        udpLinks.set(k, u);
      }
      u.lastSeen = ctx.clock.now();
      u.reader.deliver(msg, true);
    });
  };

  for (const l of listeners) {
    // a free port (0) is free for TCP only: someone's UDP socket may hold the same number, so a pair that cannot
    // share it is given up for another; a configured port that is taken fails boot at once
    for (let attempt = 1; ; attempt++) {
      const srv = await listenTcp(l, l.port);
      const port = (srv.address() as AddressInfo).port;
      try {
        if (c.udp) await listenUdp(l, port);
        bound.set(l.name, port);
        break;
      } catch (err) {
        if (l.port !== 0 || attempt >= FREE_PORT_ATTEMPTS) throw err;
        ctx.log.debug({ key: l.key, port, err: (err as Error).message }, 'free TCP port taken for UDP: trying another');
        await new Promise<void>((resolve) => srv.close(() => resolve()));
      }
    }
  }

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
  }, POLL_MS);

  return { bound, stop: cancelPoll };
}
