/**
 * A terminal link as the terminal-links service offers it to other plugins (plugin-sdk/services/terminal-links.ts):
 * who the terminal is, whether the link is closed, and the way down to the terminal (intercom audio).
 *
 * - Downlink packets carry the link's own sequence numbers: one counter for the link, whatever the channel (the
 *   terminal's counters are its own business).
 * - Nothing is queued here: a refused frame is the caller's to drop, so a stalled terminal costs at most
 *   maxPendingBytes plus one write.
 * - Downlink audio is framed like the terminal's own audio on that channel (else its latest audio on any channel):
 *   the terminal's payload type when the codec is its own, and ('auto') a HiSilicon header when its audio has one.
 *   So the link remembers each channel's audio framing (the assembler reports it), past the channel's source.
 * - UDP sends one packet per datagram, as terminals send them; the bytes handed to dgram count as pending until its
 *   callback says they left.
 *
 * TerminalLink (terminal-link.ts) extends this class rather than holding one: sendAudio runs per downlink frame, and
 * a downlink object of its own reached through a field would add a call and an object to that path.
 */
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { normaliseSim, type DownlinkAudio, type Off, type TerminalLink as SdkTerminalLink, type UdpPort } from '../../../plugin-sdk';
import { addHisiliconHeader } from './audio';
import { DATA_TYPE, type Jt1078Layout } from './packet';
import { Jt1078Packer } from './packer';
import { audioCodecOfPt, ptOfAudioCodec } from './payload-types';
import type { AudioFraming } from './stream-assembler';

/** Where bytes for the terminal go: its TCP connection, or its source address through the listener's UDP socket. */
export type LinkPeer = { transport: 'tcp'; socket: Socket } | { transport: 'udp'; socket: UdpPort; address: string; port: number };

/** 'auto': add a HiSilicon header to downlink audio when the terminal's own audio has one */
export type HisiliconDownlink = 'auto' | 'always' | 'never';

export interface DownlinkOptions {
  /** bytes waiting to go to a terminal past which sendAudio/write refuse */
  maxPendingBytes: number;
  hisilicon: HisiliconDownlink;
}

/** What the downlink needs from the ingest that holds the link. */
export interface DownlinkHost {
  log: Logger;
  downlink: DownlinkOptions;
  /** downlink bytes handed to the socket */
  sent?(link: TerminalDownlink, packets: number, bytes: number): void;
  /** downlink refused ('closed' | 'backlog') */
  refused?(link: TerminalDownlink, why: 'closed' | 'backlog'): void;
}

/** channels whose audio framing a link remembers after their source went (a terminal has a handful) */
const MAX_FRAMINGS = 64;

/** A link's face to other plugins and the way down to its terminal; TerminalLink is the one subclass. */
export abstract class TerminalDownlink<H extends DownlinkHost = DownlinkHost> implements SdkTerminalLink {
  readonly transport: 'tcp' | 'udp';
  readonly remote: string;
  protected isClosed = false;
  protected closeReason = '';
  private readonly closeCbs = new Set<(reason: string) => void>();
  /** per `${sim}_${channel}`: how that channel's audio was framed (kept after its source goes) */
  private readonly framings = new Map<string, AudioFraming>();
  private lastFraming: AudioFraming | undefined;
  private downSeq = 0;
  private packer: Jt1078Packer | undefined;
  /** UDP: bytes handed to dgram and not yet reported sent */
  private udpInFlight = 0;

  constructor(
    readonly id: string,
    /** the listener's layout: packets go down in it until the terminal's own is known */
    protected readonly guess: Jt1078Layout,
    protected readonly host: H,
    protected readonly peer: LinkPeer,
  ) {
    this.transport = peer.transport;
    this.remote = peer.transport === 'tcp' ? `${peer.socket.remoteAddress}:${peer.socket.remotePort}` : `${peer.address}:${peer.port}`;
  }

  /** the layout the terminal's packets use, once known */
  abstract get layout(): Jt1078Layout | undefined;

  get closed(): boolean {
    return this.isClosed;
  }

  get socket(): Socket | undefined {
    return this.peer.transport === 'tcp' ? this.peer.socket : undefined;
  }

  /** true when the terminal's latest audio frame (any channel) carried a HiSilicon header */
  get hisiliconAudio(): boolean {
    return this.lastFraming?.hisilicon ?? false;
  }

  get pendingBytes(): number {
    if (this.peer.transport === 'tcp') return this.peer.socket.writableLength;
    return this.udpInFlight;
  }

  /** The assembler of channel `key` saw the terminal's audio framing (first audio frame, or a change). */
  noteAudioFraming(key: string, f: AudioFraming): void {
    if (!this.framings.has(key) && this.framings.size >= MAX_FRAMINGS) this.framings.clear();
    this.framings.set(key, f);
    this.lastFraming = f;
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

  /** The link closed: onClose callbacks hear why; one that throws is logged and the rest still run. */
  protected runCloseCallbacks(reason: string): void {
    for (const cb of [...this.closeCbs]) {
      try {
        cb(reason);
      } catch (err) {
        this.host.log.error({ link: this.id, err }, 'a terminal link onClose callback threw');
      }
    }
    this.closeCbs.clear();
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
