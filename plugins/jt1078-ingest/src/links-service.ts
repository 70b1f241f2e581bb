/**
 * The terminal-links service this plugin provides (plugin-sdk/services/terminal-links.ts): the link that publishes a
 * channel now, and a callback each time a link starts publishing one. A terminal's push connection is the only path
 * to it the gateway owns, so intercom sends its audio down the link found here. Only a channel's publisher is listed
 * (takeover.ts): a refused link is never offered, so no plugin talks to a sender that does not own the stream.
 */
import { normaliseSim, type StreamTyp, type TerminalLink, type TerminalLinks } from '../../../plugin-sdk';
import type { Logger } from 'pino';
import type { ChannelSource } from './channel-source';

type AttachListener = Parameters<TerminalLinks['onAttach']>[0];

const channelKey = (typ: StreamTyp, normSim: string, chanId: number): string => `${typ}/${normSim}/${chanId}`;

export class TerminalLinksService implements TerminalLinks {
  /** the publishing sources by channel (typ, SIM, channel) */
  private readonly byChannel = new Map<string, ChannelSource>();
  private readonly attachListeners = new Set<AttachListener>();

  constructor(private readonly log: Logger) {}

  find(normSim: string, chanId: number, typ: StreamTyp): TerminalLink | undefined {
    const src = this.byChannel.get(channelKey(typ, normaliseSim(normSim), chanId));
    return src && !src.link.closed ? src.link : undefined;
  }

  onAttach(cb: AttachListener): () => void {
    this.attachListeners.add(cb);
    return () => {
      this.attachListeners.delete(cb);
    };
  }

  /** `src` publishes its channel from now on */
  published(src: ChannelSource): void {
    this.byChannel.set(this.keyOf(src), src);
  }

  /** `src` stopped publishing its channel (a later source of the channel stays) */
  unpublished(src: ChannelSource): void {
    const ck = this.keyOf(src);
    if (this.byChannel.get(ck) === src) this.byChannel.delete(ck);
  }

  /** `src` is registered on its link: onAttach listeners hear of it; one that throws is logged and the rest still do */
  attached(src: ChannelSource): void {
    const e = { normSim: src.stream.normSim, chanId: src.stream.chanId, typ: src.stream.typ, link: src.link };
    for (const cb of [...this.attachListeners]) {
      try {
        cb(e);
      } catch (err) {
        this.log.error({ err, stream: src.stream.name }, 'a terminal-links onAttach callback threw');
      }
    }
  }

  stop(): void {
    this.attachListeners.clear();
  }

  private keyOf(src: ChannelSource): string {
    return channelKey(src.stream.typ, src.stream.normSim, src.stream.chanId);
  }
}
