import { IsArray, IsBoolean, IsInt, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { definePlugin } from '../../plugin-sdk';
import { CallbackDispatcher } from './src/delivery';
import { HostPolicy } from './src/host-policy';
import { promCallbackMetrics } from './src/metrics';
import { redactUrlPassword as redactRedisUrl } from '../../plugin-sdk';
import { RedisNoticePublisher } from './src/redis-publisher';
import { trustedCertificates } from './src/trust-store';

export class CallbackNotifierConfig {
  @IsInt()
  @Min(100)
  @Max(60_000)
  attemptTimeoutMs = 5000;

  /** how long a notice is retried after it was queued; a backoff that would overshoot it is cut, for a last attempt at the deadline */
  @IsInt()
  @Min(0)
  @Max(24 * 3600_000)
  retryForMs = 120_000;

  @IsInt()
  @Min(1)
  @Max(1_000_000)
  maxQueuePerHost = 1000;

  @IsInt()
  @Min(1)
  @Max(64)
  concurrencyPerHost = 4;

  /** callback hosts allowed (names, *.suffix, IPs, CIDRs); empty: any host the internal-address rule lets through */
  @IsArray()
  @IsString({ each: true })
  allowHosts: string[] = [];

  /** refuse callback hosts that are or resolve to internal addresses (private, link-local, loopback, ...) */
  @IsBoolean()
  blockInternal = true;

  /**
   * with blockInternal, still allow loopback. Off unless a site asks: a callback to 127.0.0.1 reaches whatever
   * listens on the gateway's own machine (admin ports, local databases' HTTP fronts). The default site turns it on,
   * its demo application runs beside it.
   */
  @IsBoolean()
  allowLoopback = false;

  /** Redis for notices of requests without cb (Redis Streams XADD); unset: such notices are only logged */
  @IsOptional()
  @Matches(/^rediss?:\/\//)
  redisUrl: string | undefined = undefined;

  @IsString()
  redisStreamKey = 'gw:strm_notif';

  /** one stream per application (`<redisStreamKey>:<appId>`), so an application reads only its own requests */
  @IsBoolean()
  redisStreamPerApp = true;

  @IsInt()
  @Min(100)
  redisMaxLen = 100_000;

  @IsInt()
  @Min(1)
  redisBufferLimit = 1000;

  /** PEM files of extra CAs trusted for HTTPS callbacks, beside the system's store (e.g. a private enterprise CA) */
  @IsArray()
  @IsString({ each: true })
  caFiles: string[] = [];

  /** at shutdown, how long queued notices may still be delivered */
  @IsInt()
  @Min(0)
  @Max(9000)
  shutdownGraceMs = 3000;
}

/**
 * Delivers ready/closed/failed notices: POST <cb>/strm_notif for requests with a cb, else XADD to a Redis stream.
 * Delivery is queued per callback host and never slows media or the API.
 */
export default definePlugin({
  name: 'callback-notifier',
  config: CallbackNotifierConfig,
  setup(ctx) {
    const c = ctx.config;
    let trustedCa: string[];
    try {
      trustedCa = trustedCertificates(c.caFiles);
    } catch (err) {
      throw new Error(`config key caFiles: ${(err as Error).message}`, { cause: err });
    }
    const policy = new HostPolicy({ allow: c.allowHosts, blockInternal: c.blockInternal, allowLoopback: c.allowLoopback });
    const dispatcher = new CallbackDispatcher({
      logger: ctx.log,
      metrics: promCallbackMetrics(ctx.metrics.registry),
      hostPolicy: policy,
      attemptTimeoutMs: c.attemptTimeoutMs,
      retryForMs: c.retryForMs,
      maxQueuePerHost: c.maxQueuePerHost,
      concurrencyPerHost: c.concurrencyPerHost,
      trustedCa,
    });
    const published = ctx.metrics.counter('mq_published_total', 'notices added to the Redis stream');
    const mqDropped = ctx.metrics.counter('mq_dropped_total', 'notices dropped while Redis was unreachable');
    const unrouted = ctx.metrics.counter('unrouted_total', 'notices of requests without cb on a site without a message queue');
    const mq = c.redisUrl
      ? new RedisNoticePublisher({
          url: c.redisUrl,
          logger: ctx.log,
          streamKey: c.redisStreamKey,
          maxLen: c.redisMaxLen,
          bufferLimit: c.redisBufferLimit,
          metrics: { published: () => published.inc(), dropped: () => mqDropped.inc() },
        })
      : undefined;

    ctx.notices.on((n) => {
      if (n.cb) dispatcher.enqueue(n.payload.reqId, n.cb, n.payload);
      else if (mq) mq.publish(n.payload, c.redisStreamPerApp ? n.appId : undefined);
      else unrouted.inc();
    });

    ctx.log.info(
      {
        redis: c.redisUrl ? redactRedisUrl(c.redisUrl) : undefined,
        streamKey: mq ? c.redisStreamKey : undefined,
        allowHosts: c.allowHosts,
        blockInternal: c.blockInternal,
        allowLoopback: c.allowLoopback,
        caFiles: c.caFiles,
      },
      'callback notifier ready',
    );
    return {
      async stop() {
        // the closed notices of requests ended by the shutdown get a short chance to leave
        await Promise.race([Promise.all([dispatcher.whenIdle(), mq?.whenIdle()]), new Promise((r) => setTimeout(r, c.shutdownGraceMs))]);
        await dispatcher.stop();
        await mq?.stop();
      },
    };
  },
});
