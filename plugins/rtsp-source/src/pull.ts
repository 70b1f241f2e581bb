/**
 * One pull of one camera (URL and credentials): an RTSP session at a time, started again with backoff when it
 * ends, feeding every bus stream that wants this camera. Each stream gets its own publisher per session (the bus
 * continues its timeline across a reconnect, as for a terminal) and its own time origin, so a stream that joins a
 * running pull starts near 0, at the pull's latest keyframe.
 */
import type { Logger } from 'pino';
import type { Cancel, Clock, MediaStream } from '../../../plugin-sdk';
import { SourceError } from './errors';
import { PullMedia } from './pull-media';
import { RtspSession } from './session';
import { StreamFeed } from '../../../plugin-sdk';
import type { ReceiverStats } from './tracks';
import { RtpProbe, TransportChoice, type ChoiceHow, type FallbackReason, type Transport, type TransportMemory, type TransportMode } from './transport-choice';
import type { SourceUrl } from './url';

export interface PullConfig {
  /** auto, or a transport forced by the open or the site (transport-choice.ts) */
  transport: TransportMode;
  forcedBy: 'request' | 'site';
  /** what played per camera host, shared by the plugin's pulls */
  memory: TransportMemory;
  requestTimeoutMs: number;
  stallTimeoutMs: number;
  keepAliveMs: number;
  tlsVerify: boolean;
  reconnectMinMs: number;
  reconnectMaxMs: number;
  maxFrameBytes: number;
  /** the pull's own GOP cache for streams that join it, bytes */
  maxGopBytes: number;
  /** a pull that no stream took within this long after an open allowed it is closed */
  lingerMs: number;
}

export interface PullEvents {
  connect(result: 'ok' | SourceError['kind']): void;
  reconnect(): void;
  bytes(n: number): void;
  malformed(what: string): void;
  unit(kind: 'video' | 'audio'): void;
  fallback(from: Transport, to: Transport, reason: FallbackReason): void;
  transportUsed(t: Transport, how: ChoiceHow): void;
  /** the pull ended for good (closed, or it never played) */
  closed(p: Pull): void;
}

/** what happened to a pull's first session: the opens waiting on it learn it here */
type FirstOutcome = { ok: true } | { ok: false; err: SourceError };

export class Pull {
  private readonly targets = new Map<string, StreamFeed>();
  private session: RtspSession | undefined;
  private readonly media: PullMedia;
  private closedFlag = false;
  private everPlayed = false;
  private holds = 0;
  private linger: Cancel | undefined;
  private wait: { cancel: Cancel; resolve: () => void } | undefined;
  /** the first session's outcome, for the opens that wait on it */
  private readonly first: Promise<FirstOutcome>;
  private settleFirst!: (o: FirstOutcome) => void;
  private firstDeadline: number;
  private sessions = 0;
  private readonly choice: TransportChoice;
  private playingTransport: Transport | undefined;

  constructor(
    readonly key: string,
    readonly source: SourceUrl,
    private readonly cfg: PullConfig,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly ev: PullEvents,
    openTimeoutMs: number,
  ) {
    this.first = new Promise<FirstOutcome>((resolve) => {
      this.settleFirst = resolve;
    });
    this.firstDeadline = clock.now() + openTimeoutMs;
    this.media = new PullMedia({
      targets: this.targets,
      clock,
      log,
      shown: source.redacted,
      maxFrameBytes: cfg.maxFrameBytes,
      maxGopBytes: cfg.maxGopBytes,
      malformed: (what) => ev.malformed(what),
      unit: (kind) => ev.unit(kind),
    });
    this.choice = new TransportChoice({
      mode: cfg.transport,
      forcedBy: cfg.forcedBy,
      host: `${source.host.toLowerCase()}:${source.port}`,
      tls: source.tls,
      memory: cfg.memory,
      log,
      shown: source.redacted,
      events: { fallback: (from, to, reason) => ev.fallback(from, to, reason), used: (t, how) => ev.transportUsed(t, how) },
    });
    this.run().catch((err: unknown) => {
      // a bug of ours, not the camera's: the pull stops (its streams stay, and a new open starts another)
      this.log.error({ source: this.source.redacted, err: (err as Error).message }, 'RTSP pull failed');
      this.settleFirst({ ok: false, err: new SourceError('dropped', 'internal error') });
      this.close('internal error');
    });
  }

  get closed(): boolean {
    return this.closedFlag;
  }
  get playing(): boolean {
    return !!this.session?.isPlaying;
  }
  /** the transport of the session playing now */
  get transport(): Transport | undefined {
    return this.playing ? this.playingTransport : undefined;
  }
  get streamNames(): string[] {
    return [...this.targets.keys()];
  }
  /** sessions started so far (1 + reconnects) */
  get sessionCount(): number {
    return this.sessions;
  }
  get receiverStats(): ReceiverStats[] {
    return this.media.receiverStats;
  }

  /**
   * Waits until the pull plays (or has played: a source down for a moment still takes opens), or fails.
   * Holds the pull open meanwhile; call the returned release once the open is through, stream or not.
   */
  async ready(): Promise<{ release: () => void }> {
    this.holds++;
    this.linger?.();
    this.linger = undefined;
    const release = () => {
      this.holds--;
      this.idleCheck(true);
    };
    if (this.everPlayed) return { release };
    const o = await this.first;
    if (!o.ok) {
      release();
      throw o.err;
    }
    return { release };
  }

  addTarget(stream: MediaStream): void {
    if (this.closedFlag || this.targets.has(stream.name)) return;
    const t = new StreamFeed(stream);
    this.targets.set(stream.name, t);
    this.linger?.();
    this.linger = undefined;
    t.offClosed = stream.on('closed', () => this.removeTarget(stream.name));
    this.media.joined(t);
    this.log.info({ source: this.source.redacted, stream: stream.name, streams: this.targets.size }, 'stream fed by the RTSP pull');
  }

  removeTarget(name: string): void {
    const t = this.targets.get(name);
    if (!t) return;
    t.offClosed?.();
    this.targets.delete(name);
    this.idleCheck(false);
  }

  /** stops the pull (TEARDOWN); the streams it fed are left to their owners */
  close(reason: string): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.linger?.();
    this.wait?.cancel();
    this.wait?.resolve();
    this.session?.close();
    for (const t of this.targets.values()) t.offClosed?.();
    this.targets.clear();
    this.media.clear();
    this.settleFirst({ ok: false, err: new SourceError('closed', reason) });
    this.log.info({ source: this.source.redacted, reason }, 'RTSP pull stopped');
    this.ev.closed(this);
  }

  /** no stream and no open waiting: stop now, or after the linger when an open just went through */
  private idleCheck(afterOpen: boolean): void {
    if (this.closedFlag || this.targets.size > 0 || this.holds > 0) return;
    if (!afterOpen) {
      this.close('no stream wants it any more');
      return;
    }
    this.linger ??= this.clock.setTimeout(() => {
      this.linger = undefined;
      if (this.targets.size === 0 && this.holds === 0) this.close('no stream took it');
    }, this.cfg.lingerMs);
  }

  // --- sessions ------------------------------------------------------------------------------------------------

  private async run(): Promise<void> {
    let backoff = this.cfg.reconnectMinMs;
    while (!this.closedFlag) {
      let played: { endedP: Promise<SourceError> } | undefined;
      try {
        played = await this.playOverTransports();
      } catch (err) {
        const e = err as SourceError;
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- close() may run during the await above
        if (this.closedFlag) return;
        if (!this.everPlayed) {
          // before the first PLAY: a source that is not there (yet) is tried until the open timeout; anything
          // else (credentials, an error status, a connection dropped at once) is the answer
          const retry = (e.kind === 'unreachable' || e.kind === 'timeout') && this.clock.now() + backoff < this.firstDeadline;
          this.log.info({ source: this.source.redacted, kind: e.kind, err: e.message, retry }, 'RTSP source could not be played');
          if (!retry) {
            this.settleFirst({ ok: false, err: e });
            this.close(`could not be played: ${e.message}`);
            return;
          }
        } else {
          this.log.warn({ source: this.source.redacted, kind: e.kind, err: e.message, retryInMs: backoff }, 'RTSP source could not be played again; retrying');
        }
        await this.sleep(backoff);
        backoff = Math.min(backoff * 2, this.cfg.reconnectMaxMs);
        continue;
      }
      if (!played) return;
      if (this.everPlayed) this.ev.reconnect();
      this.everPlayed = true;
      this.settleFirst({ ok: true });
      const playedAt = this.clock.now();
      const e = await played.endedP;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- close() may run during the await above
      if (this.closedFlag) return;
      for (const t of this.targets.values()) t.publisher?.pause();
      // a session that ran a while earns a quick retry; one that ends at once backs off further
      if (this.clock.now() - playedAt > 10_000) backoff = this.cfg.reconnectMinMs;
      this.log.warn(
        { source: this.source.redacted, kind: e.kind, err: e.message, retryInMs: backoff, streams: this.streamNames },
        'RTSP source lost; reconnecting',
      );
      await this.sleep(backoff);
      backoff = Math.min(backoff * 2, this.cfg.reconnectMaxMs);
    }
  }

  /**
   * One round: sessions over the transports the choice gives, one after the other at once, until one plays (over
   * UDP in auto: and brings RTP) or the choice gives up (thrown). Undefined: the pull was closed meanwhile.
   */
  private async playOverTransports(): Promise<{ endedP: Promise<SourceError> } | undefined> {
    for (;;) {
      const transport = this.choice.transport;
      const session = new RtspSession({
        source: this.source,
        transport,
        requestTimeoutMs: this.cfg.requestTimeoutMs,
        stallTimeoutMs: this.cfg.stallTimeoutMs,
        keepAliveMs: this.cfg.keepAliveMs,
        tlsVerify: this.cfg.tlsVerify,
        clock: this.clock,
        log: this.log,
      });
      this.session = session;
      this.sessions++;
      this.media.sessionStarting();
      let ended!: (e: SourceError) => void;
      const endedP = new Promise<SourceError>((resolve) => {
        ended = resolve;
      });
      const probe = new RtpProbe();
      try {
        const info = await session.start({
          rtp: (track, data) => {
            probe.rtp();
            this.media.rtp(track, data);
          },
          rtcp: (track, data) => this.media.rtcp(track, data),
          bytes: (n) => this.ev.bytes(n),
          malformed: (what) => this.ev.malformed(what),
          ended: (e) => ended(e),
        });
        if (this.closedFlag) {
          session.close();
          return undefined;
        }
        // the tracks take packets from here on, so a probe loses none of what it waits for
        this.media.playing(info);
        if (this.choice.probe)
          await probe.expect(this.clock, endedP, (stop) => {
            this.wait = stop && { cancel: stop, resolve: stop };
          });
      } catch (err) {
        session.close();
        if (this.closedFlag) return undefined;
        const e = err instanceof SourceError ? err : new SourceError('dropped', (err as Error).message);
        this.ev.connect(e.kind);
        const final = this.choice.failed(e);
        if (final) throw final;
        continue;
      }
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- close() may run during the await above
      if (this.closedFlag) return undefined;
      this.ev.connect('ok');
      this.playingTransport = transport;
      this.choice.played();
      return { endedP };
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.closedFlag) return resolve();
      const cancel = this.clock.setTimeout(() => {
        this.wait = undefined;
        resolve();
      }, ms);
      this.wait = { cancel, resolve };
    });
  }
}
