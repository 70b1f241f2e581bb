import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { LogLimiter, UdpPort } from '../../../plugin-sdk';
import { normaliseSim, type ChannelStream, type Publisher, type Sessions, type StreamTyp } from '../../../plugin-sdk';
import type { Off } from '../../../plugin-sdk';
import type { DownlinkAudio, TerminalLink as SdkTerminalLink } from '../../../plugin-sdk';
import { Jt1078Parser } from './parser';
import { DATA_TYPE, type Jt1078Layout, type Jt1078Packet } from './packet';
import { Jt1078Packer } from './packer';
import { addHisiliconHeader } from './audio';
import { audioCodecOfPt, ptOfAudioCodec } from './payload-types';
import type { AudioFraming, Jt1078StreamAssembler } from './stream-assembler';

export interface LinkCounters {
  bytes: number;
  packets: number;
  unmatchedPackets: number;
  /** packets for a stream another link publishes (or pinned to another address): dropped */
  refusedPackets: number;
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
  /** when the link last carried a packet for this channel (host clock): a link silent past the grace can be replaced */
  lastAt: number;
}

/** Where bytes for the terminal go: its TCP connection, or its source address through the listener's UDP socket. */
export type LinkPeer =
  | { transport: 'tcp'; socket: Socket }
  | { transport: 'udp'; socket: UdpPort; address: string; port: number };

/** 'auto': add a HiSilicon header to downlink audio when the terminal's own audio has one */
export type HisiliconDownlink = 'auto' | 'always' | 'never';

export interface DownlinkOptions {
  /** bytes waiting to go to a terminal past which sendAudio/write refuse */
  maxPendingBytes: number;
  hisilicon: HisiliconDownlink;
}

export interface LinkHost {
  sessions: Sessions;
  log: Logger;
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
  downlink: DownlinkOptions;
  /** downlink bytes handed to the socket */
  sent?(link: TerminalLink, packets: number, bytes: number): void;
  /** downlink refused ('closed' | 'backlog') */
  refused?(link: TerminalLink, why: 'closed' | 'backlog'): void;
}

/** channels whose audio framing a link remembers after their source went (a terminal has a handful) */
const MAX_FRAMINGS = 64;

/**
 * A terminal's push connection (TCP) or source address (UDP): one parser, then one assembler per channel it carries.
 * Packets for a channel nobody opened are counted and dropped; a link that carries nothing wanted is closed after
 * a grace period.
 *
 * It is also the terminal-links service's link (plugin-sdk/services/terminal-links.ts): the way down to the
 * terminal. Downlink packets carry the link's own sequence numbers (one counter for the link, whatever the channel:
 * the terminal's counters are its own business), and nothing is queued here: a refused frame is the caller's to
 * drop, so a stalled terminal costs at most maxPendingBytes plus one write.
 */
export class TerminalLink implements SdkTerminalLink {
  readonly parser: Jt1078Parser;
  readonly counters: LinkCounters = { bytes: 0, packets: 0, unmatchedPackets: 0, refusedPackets: 0 };
  readonly sources = new Map<string, ChannelSource>();
  readonly transport: 'tcp' | 'udp';
  readonly remote: string;
  /** the terminal's IP address alone (IPv4-mapped IPv6 as IPv4): what pinning compares, whatever the port */
  readonly address: string;
  /** the host's rate limit on refusal warnings for this link: when it last wrote one (-1: never), packets since */
  readonly refusalLog = { at: -1, notLogged: 0 };
  /** frames and losses of channels this link no longer carries (their assemblers are gone) */
  private readonly retired = { frames: 0, lostPackets: 0, droppedFrames: 0 };
  private isClosed = false;
  private closeReason = '';
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
  /** per `${sim}_${channel}`: how that channel's audio was framed (kept after its source goes) */
  private readonly framings = new Map<string, AudioFraming>();
  private lastFraming: AudioFraming | undefined;
  private readonly closeCbs = new Set<(reason: string) => void>();
  private downSeq = 0;
  private packer: Jt1078Packer | undefined;
  /** UDP: bytes handed to dgram and not yet reported sent */
  private udpInFlight = 0;

  constructor(
    readonly id: string,
    /** listener name, e.g. live2013 */
    readonly listener: string,
    readonly typ: StreamTyp,
    private readonly guess: Jt1078Layout,
    private readonly host: LinkHost,
    private readonly closedHook: (link: TerminalLink) => void,
    private readonly peer: LinkPeer,
  ) {
    this.transport = peer.transport;
    this.remote = peer.transport === 'tcp' ? `${peer.socket.remoteAddress}:${peer.socket.remotePort}` : `${peer.address}:${peer.port}`;
    this.address = plainAddress(peer.transport === 'tcp' ? peer.socket.remoteAddress ?? '' : peer.address);
    // TCP: nothing keeps a packet past onPacket but copies (the reassembler detaches its bodies); UDP's reorder buffer does
    this.parser = new Jt1078Parser((p) => this.onPacket(p), { layout: guess, reusePacket: peer.transport === 'tcp' });
    this.armGrace();
  }

  get layout(): Jt1078Layout | undefined {
    return this.parser.layout;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  get socket(): Socket | undefined {
    return this.peer.transport === 'tcp' ? this.peer.socket : undefined;
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
          this.host.logLimit.log(this.host.log, 'warn', `unmatched ${this.address}`,
            { link: this.id, sim: p.sim, channel: p.channel, typ: this.typ }, 'data for a channel nobody opened: dropped');
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

  /** The assembler of channel `key` saw the terminal's audio framing (first audio frame, or a change). */
  noteAudioFraming(key: string, f: AudioFraming): void {
    if (!this.framings.has(key) && this.framings.size >= MAX_FRAMINGS) this.framings.clear();
    this.framings.set(key, f);
    this.lastFraming = f;
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
      link: this.id, reason, bytes: this.counters.bytes, packets: this.counters.packets, unmatched: this.counters.unmatchedPackets,
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
    for (const cb of [...this.closeCbs]) {
      try {
        cb(reason);
      } catch (err) {
        this.host.log.error({ link: this.id, err }, 'a terminal link onClose callback threw');
      }
    }
    this.closeCbs.clear();
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

  // --- the way down to the terminal (terminal-links service) ----------------------------------------------------

  /** true when the terminal's latest audio frame (any channel) carried a HiSilicon header */
  get hisiliconAudio(): boolean {
    return this.lastFraming?.hisilicon ?? false;
  }

  get pendingBytes(): number {
    if (this.peer.transport === 'tcp') return this.peer.socket.writableLength;
    return this.udpInFlight;
  }

  onClose(cb: (reason: string) => void): Off {
    if (this.isClosed) {
      const reason = this.closeReason;
      queueMicrotask(() => cb(reason));
      return () => undefined;
    }
    this.closeCbs.add(cb);
    return () => {
      this.closeCbs.delete(cb);
    };
  }

  /**
   * Throws (TypeError/RangeError) for a frame that cannot be packed: a codec with no JT/T 1078 payload type, a
   * timestamp that is not a non-negative integer, an odd-sized frame for a terminal that wants a HiSilicon header,
   * a SIM or channel out of range. Those are the caller's bugs; false is for the link's state only.
   */
  sendAudio(normSim: string, chanId: number, frame: DownlinkAudio): boolean {
    const key = `${normaliseSim(normSim)}_${chanId}`;
    const own = this.framings.get(key) ?? this.lastFraming;
    // the terminal's own payload type for its own codec (G.721 stays 1, AAC-LC stays 24), else the codec's
    const pt = own && audioCodecOfPt(own.pt) === frame.codec ? own.pt : ptOfAudioCodec(frame.codec);
    if (pt === undefined) throw new TypeError(`sendAudio: codec ${frame.codec} has no JT/T 1078 payload type`);
    if (!this.canSend()) return false;
    const mode = this.host.downlink.hisilicon;
    const hisilicon = mode === 'always' || (mode === 'auto' && own !== undefined && own.hisilicon);
    const payload = hisilicon ? addHisiliconHeader(frame.payload) : frame.payload;
    const layout = frame.layout ?? this.layout ?? this.guess;
    let packer = this.packer;
    if (!packer || packer.sim !== normSim || packer.channel !== chanId || packer.layout !== layout) {
      packer = this.packer = new Jt1078Packer({ layout, sim: normSim, channel: chanId });
    }
    packer.seq = this.downSeq;
    const packets = packer.packFrame({ dataType: DATA_TYPE.AUDIO, pt, timestamp: frame.timestamp, payload });
    this.downSeq = packer.seq;
    this.send(packets);
    return true;
  }

  write(bytes: Buffer): boolean {
    if (!this.canSend()) return false;
    this.send([bytes]);
    return true;
  }

  private canSend(): boolean {
    const p = this.peer;
    if (this.isClosed || (p.transport === 'tcp' && (p.socket.destroyed || !p.socket.writable))) {
      this.host.refused?.(this, 'closed');
      return false;
    }
    if (this.pendingBytes > this.host.downlink.maxPendingBytes) {
      this.host.refused?.(this, 'backlog');
      return false;
    }
    return true;
  }

  private send(packets: Buffer[]): void {
    const p = this.peer;
    let bytes = 0;
    if (p.transport === 'tcp') {
      if (packets.length > 1) p.socket.cork();
      for (const b of packets) {
        p.socket.write(b);
        bytes += b.length;
      }
      if (packets.length > 1) p.socket.uncork();
    } else {
      // one packet per datagram, as terminals send them
      for (const b of packets) {
        const n = b.length;
        this.udpInFlight += n;
        bytes += n;
        try {
          p.socket.send(b, p.port, p.address, () => {
            this.udpInFlight -= n;
          });
        } catch (err) {
          // the listener's socket is closing (gateway stopping): what was not sent is lost like any datagram
          this.udpInFlight -= n;
          this.host.log.debug({ link: this.id, err: (err as Error).message }, 'downlink datagram not sent');
        }
      }
    }
    this.host.sent?.(this, packets.length, bytes);
  }
}

/** An IP address as pinning compares it: `::ffff:10.0.0.1` (a dual-stack socket's IPv4) is `10.0.0.1`. */
export function plainAddress(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

/** Adds what a channel's assembler counted to a link's totals. */
function addChannelStats(into: Pick<LinkTotals, 'frames' | 'lostPackets' | 'droppedFrames'>, src: ChannelSource): void {
  const s = src.assembler.stats;
  into.frames += s.videoUnits + s.audioUnits;
  into.lostPackets += s.reorder.lost;
  into.droppedFrames += s.reassembly.droppedFrames;
}
