import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { redactRedisUrl } from '../kv';
import {
  channelName,
  memberValue,
  nodePrefix,
  parseMember,
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
import { keys, nodeOf, redisClientFor, scripted, waitOutPastRun, type Client, type NodeField, type Scripted } from './redis-client';
import { dropRid, readEntries, reapNode, type Reaper } from './redis-reap';

/** how long boot waits for the directory's Redis to answer */
const BOOT_TIMEOUT_MS = 5000;
/** how often the live nodes are read (and lost ones found) */
const VIEW_MS = 1000;
/** held claims are refreshed a slice this often (each once a beat) */
const REFRESH_SLICE_MS = 100;

/**
 * The fleet's directory on Redis (a single server, Sentinel or Cluster). Each gateway process (a single process, or
 * each worker of a node) has its own connection: it writes its node's heartbeat field, refreshes the claims of the
 * channels it serves, and reads the live nodes every second, reaping any that stopped.
 */
export class RedisDirectory implements Directory {
  readonly kind = 'redis' as const;
  readonly describe: string;
  private readonly client: Client;
  private readonly s: Scripted;
  private readonly reaper: Reaper;
  private up = false;
  private everUp = false;
  private readonly availability: Array<(up: boolean, why?: string) => void> = [];
  private readonly lost: Array<(l: LostNode) => void> = [];
  private view: NodeView[] = [];
  private streams = 0;
  private self: { apiBase: string; hosts: string[] } = { apiBase: '', hosts: [] };
  private apps: string[] = [];
  /** channels this process serves (refreshed each beat), by channelName */
  private readonly held = new Map<string, ChannelRef>();
  /** requests this process reserved (put back after Redis lost them) */
  private readonly mine = new Map<string, RequestEntry>();
  /** requests this process forgot while Redis was unreachable (or the call failed), by appId + reqId: removed by restore() */
  private readonly unforgotten = new Map<string, { appId: string; reqId: string; nodeId: string }>();
  private beatTimer: NodeJS.Timeout | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  /** held claims still to refresh this beat */
  private refreshQueue: ChannelRef[] = [];
  private viewTimer: NodeJS.Timeout | undefined;
  private pending = new Set<Promise<unknown>>();
  private stopped = false;
  /** set by ready(): lost nodes are reaped from then on */
  private reaping = false;
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
    this.client.on('ready', () => this.setUp(true));
    this.client.on('error', (err: Error) => {
      this.lastDownWhy = err.message;
    });
    this.client.on('close', () => this.setUp(false, this.lastDownWhy || 'connection closed'));
    this.client.on('end', () => this.setUp(false, 'connection ended'));
  }

  /** heartbeats, and each held claim's refresh, come this often: a third of the TTL */
  private get beatMs(): number {
    return Math.max(200, Math.floor(this.ttlMs / 3));
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
    this.self = self;
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
    await this.beat();
    await this.readView();
    const beatMs = this.beatMs;
    this.beatTimer = setInterval(() => this.track(this.beat()), beatMs);
    this.viewTimer = setInterval(() => this.track(this.readView()), Math.min(VIEW_MS, beatMs));
    this.refreshTimer = setInterval(() => this.refreshSlice(), REFRESH_SLICE_MS);
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
      await this.client.hdel(keys.node(this.me.nodeId), String(this.me.worker)).catch(() => undefined);
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
    return this.view;
  }

  setStreamCount(n: number): void {
    this.streams = n;
  }

  /** this process's heartbeat, and the claims of the channels it serves */
  /** this process's heartbeat; `allClaims`: every held claim refreshed now too (after an outage) */
  private async beat(allClaims = false): Promise<void> {
    if (!this.up) return;
    const field: NodeField = { epoch: this.me.epoch, apiBase: this.self.apiBase, hosts: this.self.hosts, streams: this.streams, at: Date.now() };
    const nk = keys.node(this.me.nodeId);
    await Promise.all([
      this.client.hset(nk, String(this.me.worker), JSON.stringify(field)),
      this.client.pexpire(nk, this.ttlMs),
      this.client.sadd(keys.nodes, this.me.nodeId),
      ...(allClaims ? [...this.held.values()].map((c) => this.refresh(c)) : []),
    ]);
  }

  private async refresh(c: ChannelRef): Promise<void> {
    const ok = await this.s.gwRefresh(keys.ch(c), keys.sim(c), memberValue(this.me), this.ttlMs, c.chan, nodePrefix(this.me));
    if (ok === 0) this.log.error({ channel: channelName(c) }, 'another node claimed a channel this node serves (it was unreachable longer than the claim TTL)');
  }

  /**
   * The held claims are refreshed a slice at a time, each once a beat: a thousand refreshes at once held an open's
   * command behind them on the connection, and their answers took a turn of the event loop (open p99 +2-6 ms).
   */
  private refreshSlice(): void {
    if (!this.up || this.held.size === 0) return;
    if (this.refreshQueue.length === 0) this.refreshQueue = [...this.held.values()];
    const n = Math.ceil((this.held.size * REFRESH_SLICE_MS) / this.beatMs);
    for (const c of this.refreshQueue.splice(0, n)) {
      // one unheld since the queue was made is left to expire
      if (this.held.get(channelName(c)) === c) this.track(this.refresh(c));
    }
  }

  async nodesNow(): Promise<NodeView[]> {
    this.need();
    await this.readView();
    return this.view;
  }

  private async readView(): Promise<void> {
    if (!this.up) return;
    const ids = await this.client.smembers(keys.nodes);
    const all = await Promise.all(ids.map(async (id) => ({ id, fields: await this.client.hgetall(keys.node(id)) })));
    const view: NodeView[] = [];
    for (const { id, fields } of all) {
      const n = nodeOf(id, fields);
      if (n) view.push(n);
      else if (id !== this.me.nodeId && this.reaping) await reapNode(this.reaper, id, undefined);
    }
    this.view = view.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  }

  async isLive(m: Member): Promise<boolean> {
    const n = await this.node(m.nodeId);
    return n !== undefined && n.epoch === m.epoch;
  }

  async node(nodeId: string): Promise<NodeView | undefined> {
    this.need();
    return nodeOf(nodeId, await this.client.hgetall(keys.node(nodeId)));
  }

  ready(): void {
    if (this.reaping) return;
    this.reaping = true;
    // a node restarted (within the TTL or not) may have left requests of its last run: this one sends their notices
    this.track(reapNode(this.reaper, this.me.nodeId, this.me.epoch));
  }

  // --- channels -------------------------------------------------------------------------------------------------

  async lookup(c: ChannelRef): Promise<{ owner?: Member; simHolder?: Member }> {
    this.need();
    const [cur, holder] = await this.s.gwLookup(keys.ch(c), keys.sim(c), c.chan);
    return { owner: cur ? parseMember(cur) : undefined, simHolder: holder ? parseMember(holder) : undefined };
  }

  async claim(c: ChannelRef, replace?: Member): Promise<ClaimAnswer> {
    this.need();
    const [what, v] = await this.s.gwClaim(
      keys.ch(c),
      keys.sim(c),
      memberValue(this.me),
      this.ttlMs,
      c.chan,
      nodePrefix(this.me),
      replace ? nodePrefix(replace) : '',
    );
    if (what === 'ok') return { ok: true };
    return { ok: false, why: what === 'sim' ? 'sim' : 'owned', holder: parseMember(v)! };
  }

  hold(c: ChannelRef): void {
    const name = channelName(c);
    if (this.held.has(name)) return;
    // claimed by the open that made the stream (a third of its TTL ago at most), maybe in another process of this
    // node: from now on refreshed here, with the next slices (no round trip of its own on the open's path)
    this.held.set(name, c);
  }

  heldCount(): number {
    return this.held.size;
  }

  unhold(c: ChannelRef): void {
    if (!this.held.delete(channelName(c))) return;
    if (this.up) this.track(this.s.gwRelease(keys.ch(c), keys.sim(c), nodePrefix(this.me), c.chan));
  }

  // --- requests -------------------------------------------------------------------------------------------------

  private field(e: Pick<RequestEntry, 'nodeId' | 'epoch' | 'worker'>): string {
    return `${e.nodeId}/${e.epoch}/${e.worker}`;
  }

  async reserve(e: RequestEntry, limit: number): Promise<ReserveAnswer> {
    this.need();
    // the id across applications and the place in the application's count, sent together (one round trip: an open
    // waits for it); an application's own id in use shows in the entry, another's in the id key
    const [was, res] = await Promise.all([
      this.client.set(keys.rid(e.reqId), e.appId, 'NX', 'GET'),
      this.s.gwReserve(
        keys.count(e.appId),
        keys.entry(e.appId, e.reqId),
        keys.set(e.appId, e.nodeId),
        this.field(e),
        limit,
        JSON.stringify(e),
        e.reqId,
        e.keepDeadline,
      ),
    ]);
    if (was !== null && was !== e.appId) {
      // another application's: the place just taken (if it was) is given back
      if (res === 1) await this.s.gwForget(keys.count(e.appId), keys.entry(e.appId, e.reqId), keys.set(e.appId, e.nodeId), e.reqId);
      return 'other';
    }
    if (res === 2) return 'self';
    if (res === 0) {
      if (was === null) await this.client.del(keys.rid(e.reqId));
      return was === null ? 'cap' : 'self';
    }
    // (an id key of this application without its entry was left by a forget cut short: the entry is this request's now)
    this.mine.set(e.reqId, e);
    this.unforgotten.delete(`${e.appId}\n${e.reqId}`);
    return 'ok';
  }

  forget(appId: string, reqId: string): void {
    const e = this.mine.get(reqId);
    this.mine.delete(reqId);
    const nodeId = e?.nodeId ?? this.me.nodeId;
    const left = { appId, reqId, nodeId };
    // not applied now: the entry and its id would stay taken for good if Redis kept them; restore() removes them
    if (!this.up) {
      this.unforgotten.set(`${appId}\n${reqId}`, left);
      return;
    }
    this.track(
      (async () => {
        await this.s.gwForget(keys.count(appId), keys.entry(appId, reqId), keys.set(appId, nodeId), reqId);
        await dropRid(this.client, reqId, appId);
      })().catch((err: Error) => {
        this.unforgotten.set(`${appId}\n${reqId}`, left);
        throw err;
      }),
    );
  }

  touch(appId: string, reqIds: string[], keepDeadline: number): void {
    for (const id of reqIds) {
      const e = this.mine.get(id);
      if (e) e.keepDeadline = keepDeadline;
    }
    if (!this.up) return;
    this.track(Promise.all(reqIds.map((id) => this.client.hset(keys.entry(appId, id), 'k', keepDeadline))));
  }

  async find(appId: string, reqIds: string[]): Promise<Array<RequestEntry | undefined>> {
    this.need();
    return readEntries(this.client, appId, reqIds);
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
    await this.beat(true);
    // requests that ended while Redis could not be told (it may have kept them): gone now, unless another node took
    // the id meanwhile (after a restart that lost it)
    for (const [k, f] of [...this.unforgotten]) {
      const [cur] = await readEntries(this.client, f.appId, [f.reqId]);
      if (cur?.nodeId === f.nodeId) {
        await this.s.gwForget(keys.count(f.appId), keys.entry(f.appId, f.reqId), keys.set(f.appId, f.nodeId), f.reqId);
        await dropRid(this.client, f.reqId, f.appId);
      }
      this.unforgotten.delete(k);
    }
    const perApp = new Map<string, number>();
    for (const e of this.mine.values()) {
      const was = await this.client.set(keys.rid(e.reqId), e.appId, 'NX', 'GET');
      const cur =
        was === null || was === e.appId ? (JSON.parse((await this.client.hget(keys.entry(e.appId, e.reqId), 'e')) ?? 'null') as RequestEntry | null) : null;
      const other = was !== null && was !== e.appId ? `application ${was}` : cur && cur.nodeId !== this.me.nodeId ? `node ${cur.nodeId}` : undefined;
      if (other !== undefined) {
        // reserved elsewhere while this process could not say it held it (Redis lost it): the other holder keeps it
        this.log.error(
          { reqId: e.reqId, appId: e.appId, heldBy: other },
          'a request of this process was taken by another while the directory was away: left to it',
        );
        continue;
      }
      await this.client.hset(keys.entry(e.appId, e.reqId), 'e', JSON.stringify(e), 'k', e.keepDeadline);
      await this.client.sadd(keys.set(e.appId, e.nodeId), e.reqId);
      perApp.set(e.appId, (perApp.get(e.appId) ?? 0) + 1);
    }
    for (const app of new Set([...this.apps, ...perApp.keys()])) {
      await this.client.hset(keys.count(app), this.field(this.me), perApp.get(app) ?? 0);
    }
    this.log.info({ claims: this.held.size, requests: this.mine.size }, 'directory: claims and requests put back');
  }
}
