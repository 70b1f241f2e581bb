/**
 * Who publishes a channel stream: one link at a time, and when another link may take the stream over (README "One
 * publisher link per stream").
 *
 * A stream has one publisher link. A link is alive while it carried a packet for the channel within
 * disconnectGraceMs (at least MIN_ALIVE_MS, so a site with no grace does not hand a stream to whoever sends between
 * two packets). Another link pushing the stream while its publisher is alive is refused: its packets are dropped and
 * it gets nothing of the stream (no publisher, assembler or onAttach), so it cannot close, pause or reset the stream
 * or move its timeline. A second sender is either a terminal reconnecting (NAT gives it a new port; a half-open TCP
 * connection may still be there) or a stranger, and the rules tell the two apart without trusting either:
 *
 * - silent: the publisher's link is open but sent nothing for the channel past the grace. The next link that pushes
 *   takes the stream; the old link is refused from then on, so the stream never flips back.
 * - gone: the publisher's link closed. While the grace runs, a link from the terminal's own address (any port), or
 *   from an address never refused for this stream, is the terminal coming back and resumes at once (a reconnect). A
 *   link from an address refused before (a suspect) waits until the terminal's last packet is older than the grace.
 *   When the grace ends with nobody publishing, the link refused last takes the stream if it pushed within the grace
 *   (the terminal is gone, its replacement is there); else the stream's requests close with closeCause 2.
 * - pinFirstAddress: the first publisher's address keeps the stream for its life; other addresses are refused
 *   whatever happens, and the stream closes with closeCause 2 when the pinned terminal is away past the grace.
 *
 * A stream of the same name that closed and opened again starts with a fresh claim: nothing of the old one carries
 * over.
 */
import { CloseCause, type ChannelStream, type Clock, type Sessions } from '../../../plugin-sdk';
import type { Logger } from 'pino';
import type { ChannelSource, ChannelSources } from './channel-source';
import type { IngestMetrics } from './ingest-metrics';
import type { TerminalLinksService } from './links-service';
import type { RefusalLog } from './refusal-log';
import type { TerminalLink } from './terminal-link';

/** A publisher link that sent for its channel within this long keeps its stream: disconnectGraceMs, but never less. */
const MIN_ALIVE_MS = 1000;
/** addresses remembered per stream as refused (an address spraying from many ports is one) */
const MAX_SUSPECTS = 16;

/** One channel stream as the ingest holds it: who publishes it, and who may take it over. */
interface Claim {
  readonly stream: ChannelStream;
  /** the source publishing the stream; undefined while its terminal is away (and before the first) */
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

export interface TakeoverOptions {
  disconnectGraceMs: number;
  pinFirstAddress: boolean;
  clock: Clock;
  log: Logger;
  sessions: Sessions;
  metrics: IngestMetrics;
  refusals: RefusalLog;
  sources: ChannelSources;
  /** the terminal-links service: it lists each channel's publisher */
  service: TerminalLinksService;
}

/** The claims on channel streams, by stream name: the takeover policy above. */
export class StreamClaims {
  private readonly claims = new Map<string, Claim>();
  private readonly aliveMs: number;

  constructor(private readonly o: TakeoverOptions) {
    this.aliveMs = Math.max(o.disconnectGraceMs, MIN_ALIVE_MS);
  }

  /** the sources publishing now */
  *publishing(): Iterable<ChannelSource> {
    for (const { src } of this.claims.values()) if (src) yield src;
  }

  /** `link` pushes `stream` and has no source for it: its new source, or undefined when it is refused (counted, logged) */
  attach(link: TerminalLink, stream: ChannelStream): ChannelSource | undefined {
    const now = this.o.clock.now();
    let cl = this.claims.get(stream.name);
    if (cl && cl.stream !== stream) {
      // a stream of the same name closed and was opened again: nothing of the old one carries over
      this.forget(cl);
      cl = undefined;
    }
    if (!cl) cl = this.claimOf(stream);
    const why = this.refusal(cl, link, now);
    if (why) {
      this.refuse(cl, link, why, now);
      return undefined;
    }
    return this.publish(cl, link, now);
  }

  /** `src` left its link: the stream closed, or the link did (then the disconnect grace starts) */
  detach(src: ChannelSource, why: 'link-closed' | 'stream-closed'): void {
    this.o.service.unpublished(src);
    const cl = this.claims.get(src.stream.name);
    if (!cl || cl.src !== src) return;
    cl.src = undefined;
    if (why !== 'link-closed' || src.publisher.closed || src.stream.state === 'closing') return;
    src.publisher.pause();
    this.o.log.info({ stream: src.stream.name, graceMs: this.o.disconnectGraceMs }, 'terminal disconnected: waiting for it to come back');
    cl.away = {
      lastAt: src.lastAt,
      address: src.link.address,
      link: src.link.id,
      cancel: this.o.clock.setTimeout(() => this.awayOver(cl), this.o.disconnectGraceMs),
    };
  }

  /** every claim dropped, its grace timer cancelled (the plugin stops) */
  clear(): void {
    for (const cl of [...this.claims.values()]) this.forget(cl);
  }

  private claimOf(stream: ChannelStream): Claim {
    const cl: Claim = { stream, src: undefined, away: undefined, pinned: undefined, suspects: new Set(), contender: undefined };
    this.claims.set(stream.name, cl);
    stream.media.on('closed', () => {
      if (this.claims.get(stream.name) === cl) this.forget(cl);
    });
    return cl;
  }

  private forget(cl: Claim): void {
    cl.away?.cancel();
    cl.away = undefined;
    cl.contender = undefined;
    if (this.claims.get(cl.stream.name) === cl) this.claims.delete(cl.stream.name);
  }

  /** Why `link` may not publish the claim's stream now, or undefined when it may. */
  private refusal(cl: Claim, link: TerminalLink, now: number): string | undefined {
    if (this.o.pinFirstAddress && cl.pinned !== undefined && link.address !== cl.pinned) return 'pinned to another address';
    if (cl.src) return now - cl.src.lastAt <= this.aliveMs ? 'another link publishes it' : undefined;
    const away = cl.away;
    if (away && now - away.lastAt <= this.aliveMs && link.address !== away.address && cl.suspects.has(link.address)) {
      return 'waiting for its terminal to come back';
    }
    return undefined;
  }

  private refuse(cl: Claim, link: TerminalLink, why: string, now: number): void {
    this.o.metrics.refused(link);
    if (cl.contender?.link === link) cl.contender.at = now;
    else cl.contender = { link, at: now };
    if (cl.suspects.size < MAX_SUSPECTS) cl.suspects.add(link.address);
    this.o.refusals.note(link, { stream: cl.stream.name, why, publisher: cl.src?.link.id ?? cl.away?.link }, now);
  }

  /** `link` publishes the claim's stream from `now` on (a first push, a reconnect or a takeover). */
  private publish(cl: Claim, link: TerminalLink, now: number, handedOver = false): ChannelSource {
    const { log, metrics: m } = this.o;
    const stream = cl.stream;
    const prev = cl.src;
    if (prev) {
      // alive checked by the caller: the previous link was silent past the grace
      prev.link.forgetSource(prev.key);
      m.takeoversAccepted.inc({ listener: link.listener, transport: link.transport, reason: 'silent' });
      log.info(
        { stream: stream.name, link: link.id, from: prev.link.id, silentMs: now - prev.lastAt },
        'stream taken over: its link was silent past the grace',
      );
    } else if (cl.away || handedOver) {
      const away = cl.away;
      away?.cancel();
      cl.away = undefined;
      if (handedOver || (away && link.address !== away.address && cl.suspects.has(link.address))) {
        m.takeoversAccepted.inc({ listener: link.listener, transport: link.transport, reason: 'gone' });
        log.info({ stream: stream.name, link: link.id, from: away?.link }, 'stream taken over: its terminal did not come back within the grace');
      } else {
        m.reconnects.inc();
        log.info({ stream: stream.name, link: link.id }, 'terminal reconnected within the grace: stream resumes');
      }
    }
    const src = this.o.sources.start(stream, link, now);
    cl.src = src;
    cl.pinned ??= link.address;
    if (cl.contender?.link === link) cl.contender = undefined;
    this.o.service.published(src);
    // the last request on the stream went: the terminal's channel stops, and its link if nothing else is on it
    src.publisher.onClose(() => {
      if (cl.src === src) cl.src = undefined;
      this.o.service.unpublished(src);
      link.dropSource(src.key);
    });
    return src;
  }

  /**
   * The disconnect grace ended with nobody publishing: a link that was refused and still pushes takes the stream
   * (the terminal is gone past the grace); else the stream's requests close (closeCause 2).
   */
  private awayOver(cl: Claim): void {
    if (cl.src || this.claims.get(cl.stream.name) !== cl) {
      cl.away = undefined;
      return;
    }
    const now = this.o.clock.now();
    const ct = cl.contender;
    if (
      ct &&
      !ct.link.closed &&
      now - ct.at <= this.aliveMs &&
      (!this.o.pinFirstAddress || ct.link.address === cl.pinned) &&
      !cl.stream.media.closed &&
      cl.stream.state !== 'closing'
    ) {
      ct.link.adopt(this.publish(cl, ct.link, now, true));
      return;
    }
    cl.away = undefined;
    this.o.metrics.graceExpired.inc();
    this.o.log.warn({ stream: cl.stream.name }, 'terminal did not come back: closing the stream (closeCause 2)');
    this.o.sessions.closeStream(cl.stream.name, CloseCause.termStrmClose);
  }
}
