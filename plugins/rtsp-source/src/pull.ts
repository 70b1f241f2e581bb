/**
 * One pull of one camera (URL and credentials): an RTSP session at a time, started again with backoff when it
 * ends, feeding every bus stream that wants this camera. Each stream gets its own publisher per session (the bus
 * continues its timeline across a reconnect, as for a terminal) and its own time origin, so a stream that joins a
 * running pull starts near 0, at the pull's latest keyframe.
 */
import type { Logger } from 'pino';
import type { AccessUnit, Cancel, Clock, MediaStream, TrackInfo } from '../../../plugin-sdk';
import { SourceError } from './errors';
import { parseRtcpSr } from './rtp';
import { RtspSession, type PlayInfo } from './session';
import { StreamFeed } from '../../../plugin-sdk';
import { statsOf, TrackReceiver, trackProblem, type ReceiverStats } from './tracks';
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
  private receivers: Array<TrackReceiver | undefined> = [];
  private tracks = new Map<'video' | 'audio', TrackInfo>();
  private hasVideo = false;
  private gop: AccessUnit[] = [];
  private gopBytes = 0;
  private closedFlag = false;
  private everPlayed = false;
  private holds = 0;
  private linger: Cancel | undefined;
  private wait: { cancel: Cancel; resolve: () => void } | undefined;
  private sessionStart = 0;
  /** the first session's outcome, for the opens that wait on it */
  private readonly first: Promise<FirstOutcome>;
  private settleFirst!: (o: FirstOutcome) => void;
  private firstDeadline: number;
  private sessions = 0;
  /** the track whose sender reports anchor the wall clock (video when there is one) */
  private clockTrack = -1;
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
    return this.receivers.filter((r): r is TrackReceiver => r !== undefined).map(statsOf);
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
    // a stream joining a running session starts at the pull's latest keyframe, not a GOP later
    for (const u of this.gop) t.push(u, this.tracks, this.hasVideo);
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
    this.gop = [];
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
      // packets that come before onPlaying (in the chunk that brings PLAY's answer) are not for an earlier session's tracks
      this.receivers = [];
      let ended!: (e: SourceError) => void;
      const endedP = new Promise<SourceError>((resolve) => {
        ended = resolve;
      });
      const probe = new RtpProbe();
      try {
        const info = await session.start({
          rtp: (track, data) => {
            probe.rtp();
            this.onRtp(track, data);
          },
          rtcp: (track, data) => this.onRtcp(track, data),
          bytes: (n) => this.ev.bytes(n),
          malformed: (what) => this.ev.malformed(what),
          ended: (e) => ended(e),
        });
        if (this.closedFlag) {
          session.close();
          return undefined;
        }
        // the tracks take packets from here on, so a probe loses none of what it waits for
        this.onPlaying(info);
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

  private onPlaying(info: PlayInfo): void {
    this.sessionStart = this.clock.now();
    this.gop = [];
    this.gopBytes = 0;
    this.tracks.clear();
    // every stream starts again at the new session's first start point, with a new publisher (the bus moves the
    // new timeline on from where the old one stopped)
    for (const t of this.targets.values()) {
      t.baseMs = undefined;
      t.publisher = undefined;
    }
    this.receivers = [];
    this.clockTrack = -1;
    const taken: string[] = [];
    for (const pt of info.tracks) {
      const problem = trackProblem(pt.media);
      if (problem) {
        this.log.warn({ source: this.source.redacted, media: `${pt.media.type} ${pt.media.encoding}`, problem }, 'RTSP track left out');
        this.receivers[pt.index] = undefined;
        continue;
      }
      const r = new TrackReceiver(
        pt.media,
        pt.rtptime,
        () => this.clock.now() - this.sessionStart,
        {
          track: (ti) => this.onTrack(ti),
          unit: (u) => this.onUnit(u),
        },
        this.cfg.maxFrameBytes,
      );
      this.receivers[pt.index] = r;
      taken.push(`${pt.media.type} ${pt.media.codec}`);
      if (r.kind === 'video' && this.clockTrack < 0) this.clockTrack = pt.index;
    }
    if (this.clockTrack < 0) this.clockTrack = info.tracks.findIndex((t) => !trackProblem(t.media));
    this.hasVideo = info.tracks.some((t) => t.media.type === 'video' && !trackProblem(t.media));
    this.log.info(
      {
        source: this.source.redacted,
        transport: info.transport,
        tracks: taken,
        skipped: info.skipped,
        sdpBadLines: info.sdp.badLines || undefined,
        streams: this.streamNames,
      },
      'RTSP source playing',
    );
  }

  private onRtp(track: number, data: Buffer): void {
    const r = this.receivers[track];
    if (!r) return;
    try {
      r.rtp(data);
    } catch (err) {
      // odd input must never take the gateway down: count it, log it, go on with the next packet
      this.ev.malformed('rtp');
      this.log.warn({ source: this.source.redacted, err: (err as Error).message }, 'RTP packet could not be handled');
    }
  }

  private onRtcp(track: number, data: Buffer): void {
    const { sr, bad } = parseRtcpSr(data);
    if (bad) {
      this.ev.malformed('rtcp');
      return;
    }
    if (!sr || track !== this.clockTrack) return;
    const ms = this.receivers[track]?.msOf(sr.rtpTimestamp);
    if (ms === undefined) return;
    for (const t of this.targets.values()) {
      if (t.publisher && t.baseMs !== undefined) t.publisher.setWallClock(sr.epochMs, ms - t.baseMs);
    }
  }

  private onTrack(info: TrackInfo): void {
    this.tracks.set(info.kind, info);
    for (const t of this.targets.values()) t.publisher?.setTrack(info);
  }

  private onUnit(u: AccessUnit): void {
    this.ev.unit(u.kind);
    if (this.hasVideo) {
      if (u.kind === 'video' && u.keyframe) {
        this.gop = [];
        this.gopBytes = 0;
      }
      if (this.gop.length > 0 || (u.kind === 'video' && u.keyframe)) {
        this.gop.push(u);
        this.gopBytes += u.payload.length;
        if (this.gopBytes > this.cfg.maxGopBytes) {
          this.gop = [];
          this.gopBytes = 0;
        }
      }
    }
    for (const t of this.targets.values()) {
      try {
        t.push(u, this.tracks, this.hasVideo);
      } catch (err) {
        this.log.error({ source: this.source.redacted, stream: t.stream.name, err: (err as Error).message }, 'publishing to a stream failed');
      }
    }
  }
}
