/**
 * A terminal's push connection (TCP) or source address (UDP), as the ingest drives it: one parser, then one assembler
 * per channel it carries (its ChannelSource, channel-source.ts).
 *
 * - Packets for a channel nobody opened are counted and dropped; a link that carries nothing wanted is closed after
 *   a grace period (unknownGraceMs), and gets that grace again when another link takes its last channel over.
 * - A channel fed by an RTSP pull is the camera's: a terminal claiming its SIM and channel gets nothing of it.
 * - Who publishes a stream is the host's call (takeover.ts): a refused packet is dropped and the link asks again
 *   with the next one, so it takes the stream over once the publisher is gone.
 * - push and onPacket are the per-packet path, kept in this one class with no object, closure or call of their own
 *   per packet; the previous packet's channel and source are remembered, so most packets build no key string and
 *   look nothing up.
 * - A link's close is logged; a link that never published (a stray or flooding sender) has its close line
 *   rate-limited per source address.
 *
 * The way down to the terminal, and what the terminal-links service offers other plugins, is the base class
 * (terminal-downlink.ts).
 */
import { BYTE_TOTAL_START, type LogLimiter, type Sessions, type ChannelStream, type StreamTyp } from '../../../plugin-sdk';
import type { ChannelSource } from './channel-source';
import { addChannelStats, type LinkCounters, type LinkTotals } from './link-totals';
import type { Jt1078Layout, Jt1078Packet } from './packet';
import { Jt1078Parser } from './parser';
import { TerminalDownlink, type DownlinkHost, type LinkPeer } from './terminal-downlink';

/** What a link needs from the ingest that holds it (index.ts): sessions, takeover, metrics, clock. */
export interface LinkHost extends DownlinkHost {
  sessions: Sessions;
  /**
   * Lines any peer can cause (data for unopened channels, links that carried nothing) are rate-limited per source
   * address across its links: a UDP flood from random ports makes a link per port.
   */
  logLimit: LogLimiter;
  /**
   * The link pushes a stream it has no source for: its source, or undefined when another link keeps the stream
   * (the host counted and logged the refusal; the packet is dropped and the link asks again with the next one).
   */
  attach(link: TerminalLink, stream: ChannelStream): ChannelSource | undefined;
  /** the source is registered on its link: packets flow to it from now on */
  attached?(src: ChannelSource): void;
  detach(src: ChannelSource, why: 'link-closed' | 'stream-closed'): void;
  /** a packet for a channel nobody opened was dropped (counted as it happens: a flood of them is what to see) */
  unmatched(link: TerminalLink): void;
  unknownGraceMs: number;
  setTimer(fn: () => void, ms: number): () => void;
  now(): number;
}

export class TerminalLink extends TerminalDownlink<LinkHost> {
  readonly parser: Jt1078Parser;
  readonly counters: LinkCounters = { bytes: BYTE_TOTAL_START, packets: 0, unmatchedPackets: 0, refusedPackets: 0 };
  readonly sources = new Map<string, ChannelSource>();
  /** the terminal's IP address alone (IPv4-mapped IPv6 as IPv4): what pinning compares, whatever the port */
  readonly address: string;
  /** the host's rate limit on refusal warnings for this link: when it last wrote one (-1: never), packets since */
  readonly refusalLog = { at: -1, notLogged: 0 };
  /** frames and losses of channels this link no longer carries (their assemblers are gone) */
  private readonly retired = { frames: 0, lostPackets: 0, droppedFrames: 0 };
  private cancelGrace: (() => void) | undefined;
  private warnedUnmatched = new Set<string>();
  /** it published a channel at some point: its close is a terminal's, always logged */
  private carried = false;
  /**
   * The previous packet's channel and source: a link nearly always carries one channel, so most packets skip
   * building a key string and looking it up. Cleared whenever a source goes.
   */
  private lastSim = '';
  private lastChannel = -1;
  private lastSrc: ChannelSource | undefined;
  /** the host's clock when the bytes being parsed were received */
  private readAt = 0;

  constructor(
    id: string,
    /** listener name, e.g. live2013 */
    readonly listener: string,
    readonly typ: StreamTyp,
    guess: Jt1078Layout,
    host: LinkHost,
    private readonly closedHook: (link: TerminalLink) => void,
    peer: LinkPeer,
  ) {
    super(id, guess, host, peer);
    this.address = plainAddress(peer.transport === 'tcp' ? (peer.socket.remoteAddress ?? '') : peer.address);
    // TCP: nothing keeps a packet past onPacket but copies (the reassembler detaches its bodies); UDP's reorder buffer does
    this.parser = new Jt1078Parser((p) => this.onPacket(p), { layout: guess, reusePacket: peer.transport === 'tcp' });
    this.armGrace();
  }

  override get layout(): Jt1078Layout | undefined {
    return this.parser.layout;
  }

  /**
   * Bytes from the terminal. A TCP chunk is borrowed (the socket's shared read buffer, core/net/borrowed-reads.ts):
   * whatever outlives this call is copied before it returns. A datagram is the link's to keep (the UDP reorder
   * buffer holds packets that are views of it).
   */
  push(chunk: Buffer): void {
    if (this.isClosed) return;
    // one clock reading a read, not one a packet: a read carries a frame's worth (~6 packets), and a channel's
    // lastAt only has to say it is still fed
    this.readAt = this.host.now();
    this.counters.bytes += chunk.length;
    if (this.transport !== 'tcp') {
      this.parser.pushDatagram(chunk);
      return;
    }
    this.parser.push(chunk);
    // lastSrc is always one of the sources (or none): the common link, one channel, skips the map and its iterator
    const only = this.lastSrc;
    if (only !== undefined && this.sources.size === 1) only.assembler.detach();
    else for (const src of this.sources.values()) src.assembler.detach();
  }

  private onPacket(p: Jt1078Packet): void {
    this.counters.packets++;
    if (p.dataType === 4) return;
    // the SIM decoder returns the same string while the SIM bytes repeat, so this is a pointer comparison
    if (this.lastSrc !== undefined && p.sim === this.lastSim && p.channel === this.lastChannel) {
      this.lastSrc.lastAt = this.readAt;
      this.lastSrc.assembler.push(p);
      return;
    }
    const key = `${p.sim}_${p.channel}`;
    let src = this.sources.get(key);
    if (!src) {
      const found = this.host.sessions.findStream(p.sim, p.channel, this.typ);
      // a channel fed by an RTSP pull (rtspSrc opens) is the camera's: a terminal claiming its SIM and channel must
      // not take it over, so its packets count as unmatched
      const stream = found?.requests.some((r) => r.params.rtspSrc) ? undefined : found;
      if (!stream) {
        this.counters.unmatchedPackets++;
        this.host.unmatched(this);
        if (!this.warnedUnmatched.has(key) && this.warnedUnmatched.size < 16) {
          this.warnedUnmatched.add(key);
          this.host.logLimit.log(
            this.host.log,
            'warn',
            `unmatched ${this.address}`,
            { link: this.id, sim: p.sim, channel: p.channel, typ: this.typ },
            'data for a channel nobody opened: dropped',
          );
        }
        return;
      }
      src = this.host.attach(this, stream);
      if (!src) {
        // not cached as lastSrc: the next packet asks again, so the link takes over once the publisher is gone
        this.counters.refusedPackets++;
        return;
      }
      this.addSource(key, src);
    }
    this.lastSim = p.sim;
    this.lastChannel = p.channel;
    this.lastSrc = src;
    src.lastAt = this.readAt;
    src.assembler.push(p);
  }

  /**
   * The host hands this link a stream it was refused for (the publisher's terminal did not come back within the
   * grace, and this link was pushing it): packets for it flow from the next one on.
   */
  adopt(src: ChannelSource): void {
    if (this.isClosed) return;
    this.addSource(src.key, src);
  }

  private addSource(key: string, src: ChannelSource): void {
    this.carried = true;
    this.sources.set(key, src);
    // (a source set again under its key must not leave lastSrc on the one it replaced: push's detach relies on it)
    if (this.lastSrc !== undefined && this.lastSrc !== src && this.lastSrc.key === key) this.lastSrc = undefined;
    this.cancelGrace?.();
    this.cancelGrace = undefined;
    this.host.log.info({ link: this.id, stream: src.stream.name, layout: this.parser.layout, transport: this.transport }, 'terminal pushing');
    this.host.attached?.(src);
  }

  /**
   * Another link took this channel over (this one was silent past the grace): packets for it here find no source
   * again, and are refused while the new publisher is alive. A link left carrying nothing gets the unknown-channel
   * grace again, like a new one.
   */
  forgetSource(key: string): void {
    this.removeSource(key);
    if (this.sources.size === 0 && !this.isClosed) this.armGrace();
  }

  /** the stream closed (last request gone): the channel stops; a link left carrying nothing closes */
  dropSource(key: string): void {
    this.removeSource(key);
    if (this.sources.size === 0) this.close('no open channel left');
  }

  private removeSource(key: string): void {
    const src = this.sources.get(key);
    if (src) addChannelStats(this.retired, src);
    this.sources.delete(key);
    this.lastSrc = undefined;
  }

  poll(): void {
    for (const s of this.sources.values()) s.assembler.poll();
  }

  private armGrace(): void {
    this.cancelGrace?.();
    this.cancelGrace = this.host.setTimer(() => {
      if (this.sources.size === 0) this.close('no opened channel within the grace period');
    }, this.host.unknownGraceMs);
  }

  /**
   * The terminal closed its TCP connection. A packet read after junk is only taken once the header after it
   * confirms it; when the stream ends exactly at its end, the end confirms it, so the parser is flushed first.
   */
  ended(reason: string): void {
    if (this.isClosed) return;
    this.parser.end();
    this.close(reason);
  }

  close(reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.closeReason = reason;
    this.cancelGrace?.();
    const refused = this.counters.refusedPackets;
    const line = {
      link: this.id,
      reason,
      bytes: this.counters.bytes,
      packets: this.counters.packets,
      unmatched: this.counters.unmatchedPackets,
      resyncs: this.parser.stats.resyncs,
      // the refusal warnings were rate-limited: what they did not tell
      ...(refused > 0 ? { refused, refusedNotLogged: this.refusalLog.notLogged } : {}),
    };
    if (this.carried) this.host.log.info(line, 'terminal link closed');
    else this.host.logLimit.log(this.host.log, 'info', `closed ${this.address}`, line, 'terminal link closed');
    for (const src of [...this.sources.values()]) {
      addChannelStats(this.retired, src);
      this.host.detach(src, 'link-closed');
    }
    this.sources.clear();
    this.lastSrc = undefined;
    if (this.peer.transport === 'tcp') this.peer.socket.destroy();
    this.closedHook(this);
    this.runCloseCallbacks(reason);
  }

  totals(): LinkTotals {
    const t: LinkTotals = {
      packets: this.counters.packets,
      unmatchedPackets: this.counters.unmatchedPackets,
      ...this.retired,
      resyncs: this.parser.stats.resyncs,
    };
    for (const src of this.sources.values()) addChannelStats(t, src);
    return t;
  }
}

/** An IP address as pinning compares it: `::ffff:10.0.0.1` (a dual-stack socket's IPv4) is `10.0.0.1`. */
export function plainAddress(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}
