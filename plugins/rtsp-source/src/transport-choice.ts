/**
 * Which transport a pull's RTP takes. `auto`, the default: interleaved in the RTSP connection (TCP)
 * first, since it passes NAT and firewalls and loses nothing; a SETUP that refuses it (461, another error status, an
 * answer that is not interleaved, the connection closed at SETUP) moves to UDP; UDP that brings no RTP within
 * UDP_PROBE_MS of PLAY (a firewall) moves back to TCP. Each transport is tried once per round (a pull's first play,
 * or one reconnect): both failing is the round's failure, its message naming each attempt.
 *
 * Every attempt is a fresh RTSP connection, not a second SETUP on the one that refused: cameras differ on what an
 * error answer leaves behind (some close the connection, some keep half a session from an answer they gave), and a
 * host pays for the extra connection once, since what played is remembered per host:port for the process (bounded,
 * the longest unused forgotten first) and the next pull starts there. A remembered transport that fails is
 * forgotten. `tcp` and `udp` force one transport: no fallback, no probe, no memory.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../../plugin-sdk';
import type { RtspResponse } from '../../../plugin-sdk/rtsp';
import { SourceError } from './errors';
import { redactText } from './url';

export type Transport = 'tcp' | 'udp';
export type TransportMode = 'auto' | Transport;
export type FallbackReason = 'refused' | 'no_rtp';
/** how the transport of a session that played was chosen */
export type ChoiceHow = 'forced' | 'remembered' | 'tried';

/** how long auto waits for RTP over UDP after PLAY before it goes back to TCP */
export const UDP_PROBE_MS = 3000;
export const MAX_REMEMBERED_HOSTS = 10_000;

/** the transport that last played per camera host:port; at most `max` hosts */
export class TransportMemory {
  private readonly byHost = new Map<string, Transport>();
  constructor(private readonly max = MAX_REMEMBERED_HOSTS) {}

  get(host: string): Transport | undefined {
    return this.byHost.get(host);
  }
  set(host: string, t: Transport): void {
    this.byHost.delete(host);
    this.byHost.set(host, t);
    // a Map iterates in insertion order: its first key is the host whose transport played longest ago
    while (this.byHost.size > this.max) this.byHost.delete(this.byHost.keys().next().value as string);
  }
  forget(host: string): void {
    this.byHost.delete(host);
  }
  get size(): number {
    return this.byHost.size;
  }
}

export interface ChoiceEvents {
  fallback(from: Transport, to: Transport, reason: FallbackReason): void;
  used(t: Transport, how: ChoiceHow): void;
}

export interface ChoiceOptions {
  mode: TransportMode;
  /** who forced a `tcp` or `udp` mode: the hint of a failed open says what to change */
  forcedBy: 'request' | 'site';
  /** the camera's host:port, the memory's key */
  host: string;
  /** rtsps://: auto stays on TCP, RTP over UDP would leave the TLS connection unencrypted */
  tls: boolean;
  memory: TransportMemory;
  events: ChoiceEvents;
  log: Logger;
  /** the source's URL as logs may show it */
  shown: string;
}

const NAME: Record<Transport, string> = { tcp: 'TCP', udp: 'UDP' };

/** one pull's way through the transports, round after round */
export class TransportChoice {
  private current!: Transport;
  private fromMemory = false;
  /** this round's failed attempts, as the failure's message names them */
  private tried: Array<{ t: Transport; what: string }> = [];

  constructor(private readonly o: ChoiceOptions) {
    this.begin();
  }

  /** the transport of the next session */
  get transport(): Transport {
    return this.current;
  }

  /** the next session must bring RTP within UDP_PROBE_MS of PLAY, else it counts as failed (`no_rtp`) */
  get probe(): boolean {
    return this.o.mode === 'auto' && this.current === 'udp';
  }

  /** a session over `transport` played (and brought RTP, when probed); the next round starts where it played */
  played(): void {
    const how: ChoiceHow = this.o.mode !== 'auto' ? 'forced' : this.fromMemory ? 'remembered' : 'tried';
    if (this.o.mode === 'auto') this.o.memory.set(this.o.host, this.current);
    this.o.events.used(this.current, how);
    this.begin();
  }

  /**
   * A session over `transport` failed before it played. Undefined: another transport is to be tried now (see
   * `transport`); else the round's failure, which the pull reports (an open's -3 or -5) or retries later.
   */
  failed(err: SourceError): SourceError | undefined {
    const t = this.current;
    if (err.kind !== 'transport' && err.kind !== 'no_rtp') {
      // not the transport's doing (unreachable, credentials, DESCRIBE's status...): the answer, after what came before
      const history = this.history();
      this.begin();
      return history ? new SourceError(err.kind, `${history}, then over ${NAME[t]}: ${err.message}`) : err;
    }
    this.tried.push({ t, what: err.kind === 'no_rtp' ? `${NAME[t]} brought no RTP in ${UDP_PROBE_MS / 1000} s` : `${NAME[t]} refused (${err.message})` });
    const other: Transport = t === 'tcp' ? 'udp' : 'tcp';
    let end: string | undefined;
    if (this.o.mode !== 'auto') end = this.forcedHint();
    else if (this.tried.some((x) => x.t === other)) end = '';
    else if (other === 'udp' && this.o.tls) end = 'UDP is not tried for rtsps:// (its RTP would not be encrypted): ask rtspSrc.transport udp to accept that';
    if (this.o.mode === 'auto' && this.fromMemory) {
      this.o.memory.forget(this.o.host);
      this.fromMemory = false;
    }
    if (end !== undefined) {
      const e = new SourceError(err.kind, end ? `${this.history()}; ${end}` : this.history());
      this.begin();
      return e;
    }
    const reason: FallbackReason = err.kind === 'no_rtp' ? 'no_rtp' : 'refused';
    this.o.log.info(
      { source: this.o.shown, from: t, to: other, reason, why: err.message },
      `RTSP source: ${NAME[t]} failed (${err.message}), falling back to ${NAME[other]}`,
    );
    this.o.events.fallback(t, other, reason);
    this.current = other;
    return undefined;
  }

  private begin(): void {
    this.tried = [];
    const known = this.o.mode === 'auto' ? this.o.memory.get(this.o.host) : undefined;
    this.fromMemory = known !== undefined;
    this.current = this.o.mode === 'auto' ? (known ?? 'tcp') : this.o.mode;
  }

  private history(): string {
    return this.tried.map((x) => x.what).join(', then ');
  }

  private forcedHint(): string {
    const t = this.o.mode;
    return this.o.forcedBy === 'request'
      ? `the open forces ${t} (rtspSrc.transport): ask auto instead`
      : `this site forces ${t} (rtsp-source's transport): ask rtspSrc.transport auto, or set the site's to auto`;
  }
}

/** a session's first RTP, for auto over UDP: packets that do not come mean UDP is blocked on the way */
export class RtpProbe {
  seen = false;
  private onFirst: (() => void) | undefined;

  /** called for every RTP packet of the session */
  rtp(): void {
    if (this.seen) return;
    this.seen = true;
    this.onFirst?.();
  }

  /**
   * Resolves at the session's first RTP; throws `no_rtp` when none comes within UDP_PROBE_MS (or at the stop
   * `hold` is given), and the session's end when it ends first.
   */
  async expect(clock: Clock, ended: Promise<SourceError>, hold: (stop: (() => void) | undefined) => void): Promise<void> {
    if (this.seen) return;
    const outcome = await new Promise<'rtp' | 'silent' | 'ended'>((resolve) => {
      const cancel = clock.setTimeout(() => resolve('silent'), UDP_PROBE_MS);
      const done = (o: 'rtp' | 'silent' | 'ended') => {
        cancel();
        resolve(o);
      };
      this.onFirst = () => done('rtp');
      void ended.then(() => done('ended'));
      hold(() => done('silent'));
    });
    hold(undefined);
    const e = outcome === 'ended' ? await ended : undefined;
    // a stall timeout shorter than the probe ends the session first: that is no RTP too
    if (e && e.kind !== 'stalled') throw e;
    if (outcome !== 'rtp') throw new SourceError('no_rtp', `no RTP within ${UDP_PROBE_MS / 1000} s of PLAY`);
  }
}

/** the SETUP request's Transport header */
export function transportHeader(t: Transport, track: number, udpPort: number): string {
  return t === 'tcp' ? `RTP/AVP/TCP;unicast;interleaved=${track * 2}-${track * 2 + 1}` : `RTP/AVP;unicast;client_port=${udpPort}-${udpPort + 1}`;
}

/**
 * Why a SETUP answer refuses the transport asked for, or undefined when it takes it: an error status (401 was
 * answered before), or a Transport header of the other kind. An answer without a Transport header is taken as
 * agreeing, as players do.
 */
export function setupRefusal(t: Transport, r: RtspResponse, pwd: string | undefined): string | undefined {
  const shown = (s: string) => redactText(s, [pwd]).slice(0, 160);
  if (r.status < 200 || r.status >= 300) return `${[r.status, shown(r.reason)].filter(Boolean).join(' ')} to SETUP`;
  const answer = r.headers.get('transport');
  if (answer === undefined) return undefined;
  const interleaved = /interleaved=|\/TCP/i.test(answer);
  if (t === 'tcp' && !interleaved) return `SETUP answered with Transport ${shown(answer)}, not interleaved`;
  if (t === 'udp' && interleaved) return `SETUP answered with Transport ${shown(answer)}, interleaved`;
  return undefined;
}
