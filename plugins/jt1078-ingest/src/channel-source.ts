/**
 * A channel's source as a link starts publishing it: the stream's publisher and the assembler that turns the link's
 * packets for that channel into units (stream-assembler.ts).
 *
 * - Reordering only on UDP: a TCP link delivers packets in order, and holding them back would only add delay.
 * - Frames are carved from the publisher's memory (alloc/discard), which the bus reuses once its readers are done:
 *   each frame is pushed in the call that took it.
 * - Audio options: a terminal's own entry in terminalAudio (by normalised SIM) over the site's g726* keys, since
 *   terminals never say their G.726 packing and some label its rate wrong.
 */
import { normaliseSim, type ChannelStream, type Publisher } from '../../../plugin-sdk';
import type { Logger } from 'pino';
import type { Jt1078IngestConfig } from './config';
import { Jt1078StreamAssembler, type AudioOptions } from './stream-assembler';
import type { TerminalLink } from './terminal-link';

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

export class ChannelSources {
  private readonly siteAudio: AudioOptions;
  private readonly audioBySim = new Map<string, AudioOptions>();

  constructor(
    private readonly c: Jt1078IngestConfig,
    private readonly log: Logger,
  ) {
    this.siteAudio = { g726Packing: c.g726Packing, g726Bits: c.g726Bits || undefined };
    for (const [sim, o] of Object.entries(c.terminalAudio)) {
      this.audioBySim.set(normaliseSim(sim), { g726Packing: o.g726Packing ?? this.siteAudio.g726Packing, g726Bits: o.g726Bits ?? this.siteAudio.g726Bits });
    }
  }

  /** A new source of `stream` on `link`, with a publisher attached to the stream; `now` counts as its last packet. */
  start(stream: ChannelStream, link: TerminalLink, now: number): ChannelSource {
    const c = this.c;
    const publisher = stream.media.attachPublisher();
    const key = `${stream.normSim}_${stream.chanId}`;
    const assembler = new Jt1078StreamAssembler(
      {
        onTrack: (t) => publisher.setTrack(t),
        onAccessUnit: (au) => publisher.push(au),
        onAudioFraming: (f) => {
          link.noteAudioFraming(key, f);
          this.log.info({ stream: stream.name, link: link.id, pt: f.pt, codec: f.codec, hisilicon: f.hisilicon }, 'terminal audio framing');
        },
      },
      {
        reorder: link.transport === 'udp' ? { maxPackets: c.reorderPackets, maxDelayMs: c.reorderMs } : false,
        maxFrameBytes: c.maxFrameBytes,
        audio: this.audioBySim.get(stream.normSim) ?? this.siteAudio,
        alloc: (n) => publisher.alloc(n),
        discard: (b) => publisher.discard(b),
      },
    );
    return { key, stream, publisher, assembler, link, lastAt: now };
  }
}
