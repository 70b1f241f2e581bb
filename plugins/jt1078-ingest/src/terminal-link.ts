import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { ChannelStream, Publisher, Sessions, StreamTyp } from '../../../plugin-sdk';
import { Jt1078Parser } from './parser';
import type { Jt1078Layout, Jt1078Packet } from './packet';
import { Jt1078StreamAssembler } from './stream-assembler';

export interface LinkCounters {
  bytes: number;
  packets: number;
  unmatchedPackets: number;
}

/** What a link has carried so far, its channels' frames and losses included, for per-listener metrics. */
export interface LinkTotals {
  packets: number;
  unmatchedPackets: number;
  frames: number;
  lostPackets: number;
  droppedFrames: number;
  resyncs: number;
}

/** One pushed channel on a link: its publisher and assembler. */
export interface ChannelSource {
  key: string;
  stream: ChannelStream;
  publisher: Publisher;
  assembler: Jt1078StreamAssembler;
  link: TerminalLink;
}

export interface LinkHost {
  sessions: Sessions;
  log: Logger;
  /** where a channel source lives while its link is up (one per stream) */
  attach(link: TerminalLink, stream: ChannelStream): ChannelSource;
  detach(src: ChannelSource, why: 'link-closed' | 'stream-closed'): void;
  /** a packet for a channel nobody opened was dropped (counted as it happens: a flood of them is what to see) */
  unmatched(link: TerminalLink): void;
  unknownGraceMs: number;
  setTimer(fn: () => void, ms: number): () => void;
  now(): number;
}

/**
 * A terminal's push connection (TCP) or source address (UDP): one parser, then one assembler per channel it carries.
 * Packets for a channel nobody opened are counted and dropped; a link that carries nothing wanted is closed after
 * a grace period.
 */
export class TerminalLink {
  readonly parser: Jt1078Parser;
  readonly counters: LinkCounters = { bytes: 0, packets: 0, unmatchedPackets: 0 };
  readonly sources = new Map<string, ChannelSource>();
  /** frames and losses of channels this link no longer carries (their assemblers are gone) */
  private readonly retired = { frames: 0, lostPackets: 0, droppedFrames: 0 };
  private closed = false;
  private cancelGrace: (() => void) | undefined;
  private warnedUnmatched = new Set<string>();
  /**
   * The previous packet's channel and source: a link nearly always carries one channel, so most packets skip
   * building a key string and looking it up. Cleared whenever a source goes.
   */
  private lastSim = '';
  private lastChannel = -1;
  private lastSrc: ChannelSource | undefined;

  constructor(
    readonly id: string,
    /** listener name, e.g. live2013 */
    readonly listener: string,
    readonly typ: StreamTyp,
    readonly transport: 'tcp' | 'udp',
    guess: Jt1078Layout,
    private readonly host: LinkHost,
    private readonly onClose: (link: TerminalLink) => void,
    readonly socket?: Socket,
  ) {
    this.parser = new Jt1078Parser((p) => this.onPacket(p), { layout: guess });
    this.armGrace();
  }

  get layout(): Jt1078Layout | undefined {
    return this.parser.layout;
  }

  push(chunk: Buffer): void {
    if (this.closed) return;
    this.counters.bytes += chunk.length;
    if (this.transport === 'tcp') this.parser.push(chunk);
    else this.parser.pushDatagram(chunk);
  }

  private onPacket(p: Jt1078Packet): void {
    this.counters.packets++;
    if (p.dataType === 4) return;
    // the SIM decoder returns the same string while the SIM bytes repeat, so this is a pointer comparison
    if (this.lastSrc !== undefined && p.sim === this.lastSim && p.channel === this.lastChannel) {
      this.lastSrc.assembler.push(p);
      return;
    }
    const key = `${p.sim}_${p.channel}`;
    let src = this.sources.get(key);
    if (!src) {
      const stream = this.host.sessions.findStream(p.sim, p.channel, this.typ);
      if (!stream) {
        this.counters.unmatchedPackets++;
        this.host.unmatched(this);
        if (!this.warnedUnmatched.has(key) && this.warnedUnmatched.size < 16) {
          this.warnedUnmatched.add(key);
          this.host.log.warn({ link: this.id, sim: p.sim, channel: p.channel, typ: this.typ }, 'data for a channel nobody opened: dropped');
        }
        return;
      }
      src = this.host.attach(this, stream);
      this.sources.set(key, src);
      this.cancelGrace?.();
      this.cancelGrace = undefined;
      this.host.log.info({ link: this.id, stream: stream.name, layout: this.parser.layout, transport: this.transport }, 'terminal pushing');
    }
    this.lastSim = p.sim;
    this.lastChannel = p.channel;
    this.lastSrc = src;
    src.assembler.push(p);
  }

  /** another link took this channel over: packets for it here find no source again */
  forgetSource(key: string): void {
    const src = this.sources.get(key);
    if (src) addChannelStats(this.retired, src);
    this.sources.delete(key);
    this.lastSrc = undefined;
  }

  /** the stream closed (last request gone): the channel stops; a link left carrying nothing closes */
  dropSource(key: string): void {
    this.forgetSource(key);
    if (this.sources.size === 0) this.close('no open channel left');
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
    if (this.closed) return;
    this.parser.end();
    this.close(reason);
  }

  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.cancelGrace?.();
    this.host.log.info({ link: this.id, reason, bytes: this.counters.bytes, packets: this.counters.packets, unmatched: this.counters.unmatchedPackets, resyncs: this.parser.stats.resyncs }, 'terminal link closed');
    for (const src of [...this.sources.values()]) {
      addChannelStats(this.retired, src);
      this.host.detach(src, 'link-closed');
    }
    this.sources.clear();
    this.lastSrc = undefined;
    this.socket?.destroy();
    this.onClose(this);
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

  get isClosed(): boolean {
    return this.closed;
  }
}

/** Adds what a channel's assembler counted to a link's totals. */
function addChannelStats(into: Pick<LinkTotals, 'frames' | 'lostPackets' | 'droppedFrames'>, src: ChannelSource): void {
  const s = src.assembler.stats;
  into.frames += s.videoUnits + s.audioUnits;
  into.lostPackets += s.reorder.lost;
  into.droppedFrames += s.reassembly.droppedFrames;
}
