import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { redactRedisUrl } from '../kv';
import {
  DirectoryUnavailable,
  type ChannelRef,
  type ClaimAnswer,
  type Directory,
  type LostNode,
  type Member,
  type NodeView,
  type RequestEntry,
  type ReserveAnswer,
} from './directory';
import { ChannelClaims, REFRESH_SLICE_MS } from './redis-claims';
import { keys, redisClientFor, scripted, waitOutPastRun, type Client, type Link, type Scripted } from './redis-client';
import { beatMsFor, NodeLiveness, VIEW_MS } from './redis-liveness';
import type { Reaper } from './redis-reap';
import { RequestReservations } from './redis-requests';

/** how long boot waits for the directory's Redis to answer */
const BOOT_TIMEOUT_MS = 5000;

/**
 * The fleet's directory on Redis (a single server, Sentinel or Cluster). Each gateway process (a single process, or
 * each worker of a node) has its own connection: it writes its node's heartbeat field, refreshes the claims of the
 * channels it serves, and reads the live nodes every second, reaping any that stopped. This class holds the
 * connection, its availability and its timers; the node's liveness and view of the live nodes (redis-liveness.ts),
 * channel claims and holds (redis-claims.ts) and request reservations (redis-requests.ts) are parts it puts together.
 */
export class RedisDirectory implements Directory {
  readonly kind = 'redis' as const;
  readonly describe: string;
  private readonly client: Client;
  private readonly s: Scripted;
  private readonly reaper: Reaper;
  private readonly liveness: NodeLiveness;
  private readonly claims: ChannelClaims;
  private readonly requests: RequestReservations;
  private up = false;
  private everUp = false;
  private readonly availability: Array<(up: boolean, why?: string) => void> = [];
  private readonly lost: Array<(l: LostNode) => void> = [];
  private apps: string[] = [];
  private beatTimer: NodeJS.Timeout | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private viewTimer: NodeJS.Timeout | undefined;
  private pending = new Set<Promise<unknown>>();
  private stopped = false;
  private lastDownWhy = '';

  constructor(
    url: string,
    readonly me: Member,
    private readonly ttlMs: number,
    private readonly log: Logger,
  ) {
    this.describe = redactRedisUrl(url);
    this.client = redisClientFor(url);
    this.s = scripted(this.client);
    this.reaper = { client: this.client, s: this.s, me, log, lost: this.lost };
    const isUp = () => this.up;
    const link: Link = {
      client: this.client,
      s: this.s,
      me,
      ttlMs,
      log,
      get up() {
        return isUp();
      },
      track: (p) => this.track(p),
      need: () => this.need(),
    };
    this.liveness = new NodeLiveness(link, this.reaper);
    this.claims = new ChannelClaims(link);
    this.requests = new RequestReservations(link);
    this.client.on('ready', () => this.setUp(true));
    this.client.on('error', (err: Error) => {
      this.lastDownWhy = err.message;
    });
    this.client.on('close', () => this.setUp(false, this.lastDownWhy || 'connection closed'));
    this.client.on('end', () => this.setUp(false, 'connection ended'));
  }

  /** heartbeats, and each held claim's refresh, come this often: a third of the TTL */
  private get beatMs(): number {
    return beatMsFor(this.ttlMs);
  }

  get available(): boolean {
    return this.up;
  }

  onAvailability(cb: (up: boolean, why?: string) => void): void {
    this.availability.push(cb);
  }

  onNodeLost(cb: (l: LostNode) => void): void {
    this.lost.push(cb);
  }

  private setUp(up: boolean, why?: string): void {
    if (this.up === up || this.stopped) return;
    this.up = up;
    if (up && this.everUp) {
      // back after an outage (or a Redis restart that lost everything): put back what this process holds
      this.log.info({ directory: this.describe }, "directory reachable again: putting back this process's claims and requests");
      this.track(this.restore());
    }
    this.everUp ||= up;
    for (const cb of this.availability) cb(up, why);
  }

  async start(self: { apiBase: string; hosts: string[] }, apps: string[]): Promise<void> {
    this.liveness.self = self;
    this.apps = apps;
    const timer = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`no answer within ${BOOT_TIMEOUT_MS / 1000} s`)), BOOT_TIMEOUT_MS).unref(),
    );
    try {
      await Promise.race([this.client.connect(), timer]);
      await Promise.race([this.client.ping(), timer]);
    } catch (err) {
      this.stopped = true;
      this.client.disconnect();
      throw new Error(`Redis at ${this.describe} is not reachable (${this.lastDownWhy || (err as Error).message})`, { cause: err });
    }
    this.up = true;
    this.everUp = true;
    try {
      await waitOutPastRun(this.client, this.me, this.ttlMs, this.describe, this.log);
    } catch (err) {
      this.stopped = true;
      this.client.disconnect();
      throw err;
    }
    if (apps.length) await this.client.sadd(keys.apps, ...apps);
    await this.liveness.beat();
    await this.liveness.readView();
    const beatMs = this.beatMs;
    this.beatTimer = setInterval(() => this.track(this.liveness.beat()), beatMs);
    this.viewTimer = setInterval(() => this.track(this.liveness.readView()), Math.min(VIEW_MS, beatMs));
    this.refreshTimer = setInterval(() => this.claims.refreshSlice(), REFRESH_SLICE_MS);
    this.beatTimer.unref();
    this.viewTimer.unref();
    this.refreshTimer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.beatTimer);
    clearInterval(this.viewTimer);
    clearInterval(this.refreshTimer);
    await Promise.allSettled([...this.pending]);
    if (this.up) {
      // this process says goodbye; the node's other processes keep it alive
      await this.liveness.goodbye();
    }
    this.stopped = true;
    this.client.disconnect();
  }

  private track<T>(p: Promise<T>): void {
    const q = p
      .catch((err: Error) => {
        if (this.up) this.log.warn({ err: err.message }, 'directory call failed');
      })
      .finally(() => this.pending.delete(q));
    this.pending.add(q);
  }

  private need(): void {
    if (!this.up) throw new DirectoryUnavailable(`the fleet directory (Redis at ${this.describe}) is not reachable`);
  }

  liveNodes(): NodeView[] {
    return this.liveness.view;
  }

  setStreamCount(n: number): void {
    this.liveness.streams = n;
  }

  async nodesNow(): Promise<NodeView[]> {
    this.need();
    await this.liveness.readView();
    return this.liveness.view;
  }

  isLive(m: Member): Promise<boolean> {
    return this.liveness.isLive(m);
  }

  node(nodeId: string): Promise<NodeView | undefined> {
    return this.liveness.node(nodeId);
  }

  ready(): void {
    this.liveness.ready();
  }

  // --- channels -------------------------------------------------------------------------------------------------

  lookup(c: ChannelRef): Promise<{ owner?: Member; simHolder?: Member }> {
    return this.claims.lookup(c);
  }

  claim(c: ChannelRef, replace?: Member): Promise<ClaimAnswer> {
    return this.claims.claim(c, replace);
  }

  hold(c: ChannelRef): void {
    this.claims.hold(c);
  }

  heldCount(): number {
    return this.claims.heldCount();
  }

  unhold(c: ChannelRef): void {
    this.claims.unhold(c);
  }

  // --- requests -------------------------------------------------------------------------------------------------

  reserve(e: RequestEntry, limit: number): Promise<ReserveAnswer> {
    return this.requests.reserve(e, limit);
  }

  forget(appId: string, reqId: string): void {
    this.requests.forget(appId, reqId);
  }

  touch(appId: string, reqIds: string[], keepDeadline: number): void {
    this.requests.touch(appId, reqIds, keepDeadline);
  }

  find(appId: string, reqIds: string[]): Promise<Array<RequestEntry | undefined>> {
    return this.requests.find(appId, reqIds);
  }

  async fleetSecret(): Promise<string> {
    this.need();
    await this.client.set(keys.secret, randomBytes(24).toString('base64url'), 'NX');
    const s = await this.client.get(keys.secret);
    if (!s) throw new DirectoryUnavailable('the fleet secret could not be read');
    return s;
  }

  /** after an outage: the heartbeat, every claim and every request of this process, as they are here */
  private async restore(): Promise<void> {
    if (this.apps.length) await this.client.sadd(keys.apps, ...this.apps);
    await this.liveness.beat(() => this.claims.refreshAll());
    await this.requests.restore(this.apps);
    this.log.info({ claims: this.claims.heldCount(), requests: this.requests.size }, 'directory: claims and requests put back');
  }
}
