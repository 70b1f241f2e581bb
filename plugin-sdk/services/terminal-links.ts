/**
 * The terminal-links service (provided by jt1078-ingest): the connection a terminal pushes a channel on, and a way
 * to send audio down it (intercom). A terminal's push connection is the only path to it that the gateway owns.
 */
import type { Off } from '../bus';
import type { AudioCodec } from '../media';
import type { StreamTyp } from '../sessions';
import { defineService } from '../services';

export type Jt1078Layout = '2013' | '2019';

/** One audio frame for the terminal, in a codec it decodes (its own, as it sends it). */
export interface DownlinkAudio {
  codec: AudioCodec;
  /**
   * The coded frame, without any vendor header: the link adds HiSilicon's when the terminal uses one. AAC goes as
   * ADTS (what terminals decode), unlike AAC units on the bus, which are raw.
   */
  payload: Buffer;
  /** ms on the sender's clock; the link writes it into the packets */
  timestamp: number;
  /** packet layout (default: the one the terminal pushes in) */
  layout?: Jt1078Layout;
}

export interface TerminalLink {
  readonly id: string;
  readonly transport: 'tcp' | 'udp';
  /** address:port of the terminal */
  readonly remote: string;
  /** the layout the terminal's packets use, once known */
  readonly layout: Jt1078Layout | undefined;
  /** true when the terminal's own audio frames carry a HiSilicon header */
  readonly hisiliconAudio: boolean;
  readonly closed: boolean;
  /** bytes waiting to be sent to the terminal */
  readonly pendingBytes: number;
  /**
   * Packs one audio frame as JT/T 1078 packets for this link's SIM and channel (own sequence numbers) and writes
   * them. False when the link is closed or its send backlog is over its cap (the frame is not sent).
   */
  sendAudio(normSim: string, chanId: number, frame: DownlinkAudio): boolean;
  /** raw bytes (whole JT/T 1078 packets) down the connection; false as for sendAudio */
  write(bytes: Buffer): boolean;
  onClose(cb: (reason: string) => void): Off;
}

export interface TerminalLinks {
  /** the link pushing this channel now, if any */
  find(normSim: string, chanId: number, typ: StreamTyp): TerminalLink | undefined;
  /** a link started pushing a channel (again) */
  onAttach(cb: (e: { normSim: string; chanId: number; typ: StreamTyp; link: TerminalLink }) => void): Off;
}

export const TERMINAL_LINKS = defineService<TerminalLinks>('terminal-links', { providedBy: 'jt1078-ingest' });
