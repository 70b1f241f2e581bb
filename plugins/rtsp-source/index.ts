/**
 * rtsp-source: `rtspSrc {url, user, pwd, transport}` on POST /strm/open pulls an RTSP camera into the request's bus stream
 * (named by simNo/chanId like a terminal's channel), so FLV, HLS, RTSP out and the recorder serve it unchanged.
 *
 * How it fits the sessions: an open guard runs for each rtspSrc open before the stream exists. It refuses a key fed
 * by a terminal or another URL (-7 naming rtspSrc.url), then starts or joins the pull of that URL and waits until
 * the camera plays: no answer within openTimeoutSec -5, anything else that fails -3 (decisions.md). The stream the
 * sessions then make is handed to the pull in onStreamOpened; it closes with its last request, and the pull with its
 * last stream. Opens of one URL (and credentials) share one pull, whatever their key, when they ask the same transport
 * (rtspSrc.transport, else the site's; src/transport-choice.ts).
 */
import { createHash } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { IsArray, IsBoolean, IsIn, IsInt, IsString, Max, Min } from 'class-validator';
import { definePlugin, ErrCode, GatewayError, invalidParam, LogLimiter, type ChannelStream, type OpenParams } from '../../plugin-sdk';
import { openErrorOf, SourceError } from './src/errors';
import { Pull, type PullConfig } from './src/pull';
import { TransportMemory, type TransportMode } from './src/transport-choice';
import { parseSourceUrl, type SourceUrl } from './src/url';

export class RtspSourceConfig {
  /**
   * hosts cameras may be pulled from: IP addresses or CIDRs (10.20.0.0/16), host names, or `*.example.com`; empty:
   * any. An rtspSrc makes the gateway connect where an application says, so a site that knows its cameras' networks
   * lists them, and the gateway cannot be pointed at its own neighbours
   */
  @IsArray()
  @IsString({ each: true })
  allowHosts: string[] = [];

  /**
   * RTP over the RTSP connection (tcp: interleaved, works through NAT and firewalls) or over UDP; auto: TCP first,
   * UDP when a camera refuses it, back to TCP when UDP brings nothing, and what played remembered per camera host
   * (src/transport-choice.ts). An open's rtspSrc.transport overrides it
   */
  @IsIn(['auto', 'tcp', 'udp'])
  transport: TransportMode = 'auto';

  /** how long an open waits for the camera to play: then -5 */
  @IsInt()
  @Min(1)
  @Max(120)
  openTimeoutSec = 10;

  /** connect, and each RTSP request's answer */
  @IsInt()
  @Min(1)
  @Max(120)
  requestTimeoutSec = 10;

  /** no media this long while playing: the session is given up and started again */
  @IsInt()
  @Min(1)
  @Max(600)
  stallTimeoutSec = 10;

  /** keep-alive period (GET_PARAMETER, else OPTIONS); 0: half the session timeout the camera gives (default 60 s) */
  @IsInt()
  @Min(0)
  @Max(600)
  keepAliveSec = 0;

  /** reconnect backoff: first wait, doubling up to the max */
  @IsInt()
  @Min(100)
  @Max(60_000)
  reconnectMinMs = 1000;
  @IsInt()
  @Min(100)
  @Max(600_000)
  reconnectMaxMs = 30_000;

  /** rtsps://: check the camera's certificate (cameras with self-signed certificates need false) */
  @IsBoolean()
  tlsVerify = true;

  /** a video frame larger than this is dropped (a broken stream must not grow memory) */
  @IsInt()
  @Min(64 * 1024)
  @Max(64 * 1024 * 1024)
  maxFrameBytes = 4 * 1024 * 1024;
}

/** how long a pull an open allowed waits for the stream the open makes */
const LINGER_MS = 5000;
/** the pull's own GOP cache, so a stream joining a running pull starts at once */
const MAX_PULL_GOP_BYTES = 8 * 1024 * 1024;

function streamNameOf(p: OpenParams): string {
  return `${p.normSim}_${p.chanId}_${p.typ === 'live' ? 1 : 0}`;
}

/** allowHosts as a predicate on a URL's host (an IP literal is matched by CIDR, a name by name or `*.` suffix). */
function hostAllowList(list: string[]): (host: string) => boolean {
  if (list.length === 0) return () => true;
  const ips = new BlockList();
  const names: string[] = [];
  const suffixes: string[] = [];
  list.forEach((raw, i) => {
    const v = raw.trim().toLowerCase();
    const m = /^([^/]+)\/(\d{1,3})$/.exec(v);
    const fam = (a: string) => (isIP(a) === 6 ? 'ipv6' : 'ipv4');
    if (m && isIP(m[1])) {
      const bits = Number(m[2]);
      if (bits > (isIP(m[1]) === 6 ? 128 : 32)) throw new Error(`config key allowHosts[${i}]: '${raw}' has a prefix too long for its address`);
      ips.addSubnet(m[1], bits, fam(m[1]));
    } else if (isIP(v)) ips.addAddress(v, fam(v));
    else if (/^\*\.[a-z0-9.-]+$/.test(v)) suffixes.push(v.slice(1));
    else if (/^[a-z0-9.-]+$/.test(v)) names.push(v);
    else throw new Error(`config key allowHosts[${i}]: '${raw}' is not an IP address, CIDR, host name or *.domain`);
  });
  return (host) => {
    const h = host.toLowerCase();
    if (isIP(h)) return ips.check(h, isIP(h) === 6 ? 'ipv6' : 'ipv4');
    return names.includes(h) || suffixes.some((s) => h.endsWith(s));
  };
}

/** a digest of the request URL and credentials, so no map holds a password */
function sourceKeyOf(src: SourceUrl): string {
  return createHash('sha256')
    .update(`${src.requestUrl}\0${src.user ?? ''}\0${src.pwd ?? ''}`)
    .digest('base64url');
}

/**
 * One pull per source and transport mode: opens that force another transport than a running pull's get their own
 * (a forced tcp or udp must not be served by a pull that chose otherwise, nor take an auto pull's choice from it)
 */
function pullKeyOf(src: SourceUrl, mode: TransportMode): string {
  return `${sourceKeyOf(src)}.${mode}`;
}

export default definePlugin({
  name: 'rtsp-source',
  config: RtspSourceConfig,
  setup(ctx) {
    const c = ctx.config;
    if (c.reconnectMaxMs < c.reconnectMinMs) throw new Error('config key reconnectMaxMs: must not be below reconnectMinMs');
    const pulls = new Map<string, Pull>();
    /** stream name -> the pull key feeding it */
    const feeds = new Map<string, string>();
    /** stream name -> the pull key of opens still waiting for their camera */
    const pending = new Map<string, { key: string; n: number }>();
    const logLimit = new LogLimiter({ intervalMs: 10_000, now: () => ctx.clock.now() });
    const allowed = hostAllowList(c.allowHosts);

    const m = {
      connects: ctx.metrics.counter('connects_total', 'RTSP sessions started, by result (ok, unreachable, dropped, auth, status, unsupported, timeout, tls)', [
        'result',
      ]),
      reconnects: ctx.metrics.counter('reconnects_total', 'sessions started again after a source was lost'),
      bytes: ctx.metrics.counter('bytes_total', 'bytes read from cameras (RTSP, RTP, RTCP)'),
      units: ctx.metrics.counter('units_total', 'access units published, by kind', ['kind']),
      malformed: ctx.metrics.counter(
        'malformed_total',
        'bad input from cameras skipped (rtsp: bytes between messages; interleaved: unknown channel; rtp: packet that broke a handler; rtcp)',
        ['what'],
      ),
      refused: ctx.metrics.counter('opens_refused_total', 'rtspSrc opens refused, by errCode', ['errCode']),
      fallbacks: ctx.metrics.counter(
        'transport_fallbacks_total',
        'transport auto moving a pull to the other transport: from, to, reason (refused: SETUP refused it; no_rtp: UDP brought no RTP within 3 s)',
        ['from', 'to', 'reason'],
      ),
      transportsUsed: ctx.metrics.counter(
        'transports_used_total',
        'sessions that played, by transport and how it was chosen (forced, remembered for the host, tried)',
        ['transport', 'how'],
      ),
    };
    const unitsBy = { video: m.units.labels('video'), audio: m.units.labels('audio') };
    ctx.metrics.gauge('pulls', 'camera pulls open', [], (g) => g.set(pulls.size));
    ctx.metrics.gauge('pulls_playing', 'camera pulls playing now', [], (g) => g.set([...pulls.values()].filter((p) => p.playing).length));
    ctx.metrics.gauge('pulls_transport', 'camera pulls playing now, by transport', ['transport'], (g) => {
      for (const t of ['tcp', 'udp'] as const) g.set({ transport: t }, [...pulls.values()].filter((p) => p.transport === t).length);
    });
    const trackSum = (f: (s: Pull['receiverStats'][number]) => number) => () => {
      let n = 0;
      for (const p of pulls.values()) for (const s of p.receiverStats) n += f(s);
      return n;
    };
    const gaugeOf = (name: string, help: string, f: () => number) => ctx.metrics.gauge(name, help, [], (g) => g.set(f()));
    gaugeOf(
      'rtp_lost_packets',
      'RTP packets missing by sequence number, tracks of open pulls',
      trackSum((s) => s.lost),
    );
    gaugeOf(
      'rtp_bad_packets',
      'packets not RTP, of another payload type, duplicate or too late, tracks of open pulls',
      trackSum((s) => s.bad),
    );
    gaugeOf(
      'payload_malformed',
      'RTP payloads that broke their format (RFC 6184/7798/3640), tracks of open pulls',
      trackSum((s) => s.malformed),
    );
    gaugeOf(
      'frames_dropped',
      'access units left out (a hole, over maxFrameBytes, waiting for a keyframe), tracks of open pulls',
      trackSum((s) => s.dropped),
    );

    const pullCfg: Omit<PullConfig, 'transport' | 'forcedBy'> = {
      memory: new TransportMemory(),
      requestTimeoutMs: c.requestTimeoutSec * 1000,
      stallTimeoutMs: c.stallTimeoutSec * 1000,
      keepAliveMs: c.keepAliveSec * 1000,
      tlsVerify: c.tlsVerify,
      reconnectMinMs: c.reconnectMinMs,
      reconnectMaxMs: c.reconnectMaxMs,
      maxFrameBytes: c.maxFrameBytes,
      maxGopBytes: MAX_PULL_GOP_BYTES,
      lingerMs: LINGER_MS,
    };

    /** the transport an rtspSrc asks for: its own, else the site's */
    const modeOf = (r: NonNullable<OpenParams['rtspSrc']>) => ({
      transport: r.transport ?? c.transport,
      forcedBy: r.transport ? ('request' as const) : ('site' as const),
    });

    function pullFor(src: SourceUrl, r: NonNullable<OpenParams['rtspSrc']>): Pull {
      const mode = modeOf(r);
      const key = pullKeyOf(src, mode.transport);
      let p = pulls.get(key);
      if (p && !p.closed) return p;
      p = new Pull(
        key,
        src,
        { ...pullCfg, ...mode },
        ctx.clock,
        ctx.log,
        {
          connect: (result) => m.connects.inc({ result }),
          reconnect: () => m.reconnects.inc(),
          bytes: (n) => m.bytes.inc(n),
          malformed: (what) => {
            m.malformed.inc({ what });
            const v = logLimit.take(`${key}|${what}`);
            if (v.write) ctx.log.warn({ source: src.redacted, what, suppressed: v.suppressed || undefined }, 'bad input from the RTSP source skipped');
          },
          unit: (kind) => unitsBy[kind].inc(),
          fallback: (from, to, reason) => m.fallbacks.inc({ from, to, reason }),
          transportUsed: (transport, how) => m.transportsUsed.inc({ transport, how }),
          closed: (x) => {
            if (pulls.get(x.key) === x) pulls.delete(x.key);
          },
        },
        c.openTimeoutSec * 1000,
      );
      pulls.set(key, p);
      return p;
    }

    const refuse = (e: GatewayError): GatewayError => {
      m.refused.inc({ errCode: String(e.errCode) });
      return e;
    };

    ctx.sessions.addOpenGuard(async (_app, params) => {
      const r = params.rtspSrc;
      if (!r) return;
      let src: SourceUrl;
      try {
        src = parseSourceUrl(r.url, r.user, r.pwd);
      } catch {
        throw refuse(invalidParam('rtspSrc.url'));
      }
      if (!allowed(src.host)) {
        logLimit.log(ctx.log, 'warn', `host ${src.host}`, { source: src.redacted }, 'rtspSrc refused: its host is not in allowHosts');
        throw refuse(invalidParam('rtspSrc.url', 'This gateway does not pull from that host (allowHosts).'));
      }
      const key = pullKeyOf(src, modeOf(r).transport);
      const name = streamNameOf(params);
      const existing = ctx.sessions.getStreamByName(name);
      if (existing?.state === 'closing') throw new GatewayError(ErrCode.RETRY, 'The stream is closing; retry.');
      const waiting = pending.get(name);
      if ((existing && feeds.get(name) !== key) || (waiting && waiting.key !== key)) {
        const feeder = (existing && feeds.get(name)) || waiting?.key;
        if (feeder?.startsWith(`${sourceKeyOf(src)}.`)) {
          throw refuse(
            invalidParam(
              'rtspSrc.transport',
              `The channel is pulled from this source with transport ${feeder.slice(feeder.lastIndexOf('.') + 1)}; ask the same, or open another simNo/chanId.`,
            ),
          );
        }
        throw refuse(
          invalidParam(
            'rtspSrc.url',
            existing && !feeds.has(name)
              ? 'The channel is fed by a terminal; open another simNo/chanId for this source.'
              : 'The channel is fed by another RTSP source; open another simNo/chanId for this one.',
          ),
        );
      }
      const w = waiting ?? { key, n: 0 };
      w.n++;
      pending.set(name, w);
      const pull = pullFor(src, r);
      try {
        const { release } = await pull.ready();
        // the open goes on without awaiting (the sessions make the stream in the same turn); the pull lingers a
        // moment for it, then closes if no stream came (another guard refused, the app's cap was reached)
        queueMicrotask(release);
      } catch (err) {
        const e = err instanceof SourceError ? err : new SourceError('dropped', (err as Error).message);
        throw refuse(openErrorOf(e, src.redacted, c.openTimeoutSec));
      } finally {
        if (--w.n === 0 && pending.get(name) === w) pending.delete(name);
      }
    });

    ctx.sessions.onStreamOpened((s: ChannelStream) => {
      const r = s.requests[0]?.params.rtspSrc;
      if (!r) return;
      let src: SourceUrl;
      try {
        src = parseSourceUrl(r.url, r.user, r.pwd);
      } catch {
        return; // the guard refused it already
      }
      const pull = pullFor(src, r);
      feeds.set(s.name, pull.key);
      s.media.on('closed', () => {
        if (feeds.get(s.name) === pull.key) feeds.delete(s.name);
      });
      pull.addTarget(s.media);
    });

    ctx.sessions.registerIngest({
      name: 'rtsp-source',
      source: 'rtsp',
      // nothing pushes to us for an RTSP source; the result's push fields (required by the spec) say so with port 0
      pushAddress: () => ({ host: ctx.site.publicHost, port: 0, tcp: true, port2019: 0, tcp2019: true }),
    });

    return {
      stop() {
        for (const p of [...pulls.values()]) p.close('gateway stopping');
        pulls.clear();
        feeds.clear();
        pending.clear();
      },
    };
  },
});
