import Redis from 'ioredis';
import type { Logger } from 'pino';
import { redactUrlPassword as redactRedisUrl } from '../../../plugin-sdk';
import type { NoticePayload } from './payload';

export interface RedisNoticePublisherOptions {
  /** redis:// or rediss:// URL (a password in it is never logged) */
  url: string;
  logger: Logger;
  /** default 'gw:strm_notif' */
  streamKey?: string;
  /** approximate stream length kept (XADD MAXLEN ~), default 100000 */
  maxLen?: number;
  /** notices held in memory while Redis is unreachable; beyond it the oldest is dropped (default 1000) */
  bufferLimit?: number;
  metrics?: { published(): void; dropped(): void };
}

export interface RedisPublisherStats {
  published: number;
  dropped: number;
  buffered: number;
}

/** Stream entry fields: the payload's keys in order, values as strings, absent fields left out. */
export function noticeToStreamFields(payload: NoticePayload): string[] {
  const fields: string[] = [];
  for (const [k, v] of Object.entries(payload)) {
    if (v === undefined || v === null) continue;
    fields.push(k, String(v));
  }
  return fields;
}

const NUMERIC_FIELDS = new Set(['chan', 'closeCause', 'sampleRate', 'frameRate']);

/** The reverse of noticeToStreamFields, for consumers: numbers come back as numbers. */
export function streamFieldsToNotice(fields: readonly string[]): NoticePayload {
  const out: Record<string, string | number> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const k = fields[i];
    out[k] = NUMERIC_FIELDS.has(k) ? Number(fields[i + 1]) : fields[i + 1];
  }
  return out as unknown as NoticePayload;
}

/**
 * Publishes notices of requests without a cb on a Redis stream (`XADD <key> MAXLEN ~ <n> * field value ...`),
 * for applications to read with a consumer group. publish() never waits: notices go into a bounded buffer that
 * is written in order whenever Redis is reachable; ioredis reconnects by itself. Delivery is at least once: a
 * notice whose XADD was cut off by a disconnect is written again.
 */
export class RedisNoticePublisher {
  private readonly redis: Redis;
  private readonly log: Logger;
  private readonly streamKey: string;
  private readonly maxLen: string;
  private readonly bufferLimit: number;
  private readonly metrics?: { published(): void; dropped(): void };
  private readonly buffer: Array<{ key: string; fields: string[] }> = [];
  private readonly counts = { published: 0, dropped: 0 };
  private writing = false;
  private down = false;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];

  constructor(opts: RedisNoticePublisherOptions) {
    this.log = opts.logger;
    this.streamKey = opts.streamKey ?? 'gw:strm_notif';
    this.maxLen = String(opts.maxLen ?? 100_000);
    this.bufferLimit = opts.bufferLimit ?? 1000;
    this.metrics = opts.metrics;
    const where = redactRedisUrl(opts.url);
    this.redis = new Redis(opts.url, {
      // Our buffer is the offline queue: bounded, counted, and in our hands at stop(). ioredis's own is unbounded.
      enableOfflineQueue: false,
      retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5000),
    });
    this.redis.on('ready', () => {
      if (this.down) this.log.info({ redis: where }, 'notice stream reachable again');
      this.down = false;
      void this.pump();
    });
    // One line per outage, not one per reconnect attempt.
    const wentDown = (reason: string) => {
      if (this.down || this.stopped) return;
      this.down = true;
      this.log.warn({ redis: where, reason }, 'notice stream unreachable; buffering notices');
    };
    this.redis.on('error', (err: Error) => wentDown(err.message));
    this.redis.on('close', () => wentDown('connection closed'));
  }

  /** `streamKeySuffix` (e.g. the appId) puts the notice on `<streamKey>:<suffix>`, so each application reads only its own. */
  publish(payload: NoticePayload, streamKeySuffix?: string): void {
    if (this.stopped) {
      this.countDrop(payload.reqId, 'publisher stopped');
      return;
    }
    this.buffer.push({ key: streamKeySuffix ? `${this.streamKey}:${streamKeySuffix}` : this.streamKey, fields: noticeToStreamFields(payload) });
    this.trim();
    void this.pump();
  }

  stats(): RedisPublisherStats {
    return { ...this.counts, buffered: this.buffer.length + (this.writing ? 1 : 0) };
  }

  /** Resolves when the buffer is empty (everything published or dropped). */
  whenIdle(): Promise<void> {
    if (this.buffer.length === 0 && !this.writing) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Closes the connection; notices still buffered are dropped and counted. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const left = this.buffer.splice(0);
    for (const e of left) this.countDrop(reqIdOf(e.fields), undefined);
    if (left.length > 0) this.log.warn({ unsent: left.length }, 'notice publisher stopping with unpublished notices');
    this.redis.disconnect();
    this.wakeIdle();
  }

  private async pump(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.buffer.length > 0 && !this.stopped && this.redis.status === 'ready') {
        // Out of the buffer while being written, so an overflow meanwhile drops a waiting notice, not this one.
        const entry = this.buffer.shift()!;
        const fields = entry.fields;
        try {
          await this.redis.xadd(entry.key, 'MAXLEN', '~', this.maxLen, '*', ...fields);
        } catch (err) {
          if ((err as Error).name === 'ReplyError') {
            // Redis refused the command itself (e.g. the key holds another type): retrying cannot help.
            this.countDrop(reqIdOf(fields), `redis refused XADD: ${(err as Error).message}`);
            continue;
          }
          // Connection trouble: back to the head of the line; the next 'ready' restarts the pump.
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- stop() may run during the await above
          if (this.stopped) {
            this.countDrop(reqIdOf(fields), undefined);
          } else {
            this.buffer.unshift(entry);
            this.trim();
          }
          break;
        }
        this.counts.published++;
        this.metrics?.published();
      }
    } finally {
      this.writing = false;
      if (this.buffer.length === 0 || this.stopped) this.wakeIdle();
    }
  }

  /** Oldest first, for the reason the callback dispatcher gives: the newest notices carry the current state. */
  private trim(): void {
    while (this.buffer.length > this.bufferLimit) this.countDrop(reqIdOf(this.buffer.shift()!.fields), 'notice buffer full');
  }

  private countDrop(reqId: string | undefined, reason: string | undefined): void {
    this.counts.dropped++;
    this.metrics?.dropped();
    if (reason) this.log.warn({ reqId, reason }, 'notice dropped');
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}

function reqIdOf(fields: readonly string[]): string | undefined {
  const i = fields.indexOf('reqId');
  return i >= 0 && i % 2 === 0 ? fields[i + 1] : undefined;
}
