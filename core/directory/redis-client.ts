/**
 * The directory's Redis plumbing: the client a `directoryUrl` names (one server, Sentinel or Cluster), what the
 * directory's parts share of its connection, the key layout (README "A fleet of nodes"), the Lua scripts as commands,
 * and what a node's heartbeat hash says.
 */
import Redis, { Cluster, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { NodeIdInUse, type ChannelRef, type Member, type NodeView } from './directory';
import { CLAIM, FORGET, LOOKUP, RELEASE, REFRESH, RESERVE } from './redis-scripts';

/** a command that gets no answer within this fails (an open answers -2 rather than hang) */
const COMMAND_TIMEOUT_MS = 2000;

export type Client = Redis | Cluster;

/** what the directory's parts (liveness, claims, requests) share of one process's connection */
export interface Link {
  client: Client;
  s: Scripted;
  me: Member;
  ttlMs: number;
  log: Logger;
  /** false while Redis cannot be reached */
  readonly up: boolean;
  /** a fire-and-forget call: its failure is logged, and stop() waits for it */
  track(p: Promise<unknown>): void;
  /** throws DirectoryUnavailable while Redis cannot be reached */
  need(): void;
}

export interface Scripted {
  gwClaim(ch: string, sim: string, value: string, ttl: number, chan: number, prefix: string, stale: string): Promise<[string, string]>;
  gwRefresh(ch: string, sim: string, value: string, ttl: number, chan: number, prefix: string): Promise<number>;
  gwRelease(ch: string, sim: string, prefix: string, chan: number): Promise<number>;
  gwLookup(ch: string, sim: string, chan: number): Promise<[string, string]>;
  gwReserve(count: string, entry: string, set: string, field: string, limit: number, json: string, reqId: string, deadline: number): Promise<number>;
  gwForget(count: string, entry: string, set: string, reqId: string): Promise<number>;
}

/** where the directory lives: `redis://` / `rediss://` (one server), `redis+sentinel://h:p,h:p/<master>`, `redis+cluster://h:p,h:p` */
export function redisClientFor(url: string): Client {
  const common: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: 3000,
    // no auto-pipelining: it holds a command until the loop's check phase (setImmediate), after every other read of
    // that turn, and an open waits on its one round trip (written at once, its answer can come within the turn)
    retryStrategy: (n: number) => Math.min(100 * n, 1000),
    lazyConnect: true,
    enableAutoPipelining: false,
  };
  const m = /^redis\+(sentinel|cluster)(s?):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?]+)(?:\/([^?]*))?/.exec(url);
  if (!m) return new Redis(url, common);
  const [, kind, tls, user, password, hostList, name] = m;
  const hosts = hostList.split(',').map((h) => {
    const i = h.lastIndexOf(':');
    return { host: i > 0 ? h.slice(0, i) : h, port: i > 0 ? Number(h.slice(i + 1)) : kind === 'sentinel' ? 26379 : 6379 };
  });
  const auth = { ...(user ? { username: decodeURIComponent(user) } : {}), ...(password ? { password: decodeURIComponent(password) } : {}) };
  if (kind === 'sentinel') {
    if (!name) throw new Error('a redis+sentinel:// URL names its master after the hosts: redis+sentinel://h1:26379,h2:26379/mymaster');
    return new Redis({ ...common, ...auth, sentinels: hosts, name, ...(tls ? { tls: {}, enableTLSForSentinelMode: true } : {}) });
  }
  return new Cluster(hosts, {
    redisOptions: { ...common, ...auth, ...(tls ? { tls: {} } : {}) },
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    lazyConnect: true,
  });
}

export const keys = {
  nodes: 'gw:nodes',
  apps: 'gw:apps',
  secret: 'gw:secret',
  node: (id: string) => `gw:node:${id}`,
  reap: (id: string, epoch: string) => `gw:reap:${id}:${epoch}`,
  ch: (c: ChannelRef) => `gw:{s:${c.sim}}:ch:${c.chan}`,
  sim: (c: ChannelRef) => `gw:{s:${c.sim}}:sim`,
  rid: (reqId: string) => `gw:rid:${reqId}`,
  count: (app: string) => `gw:{a:${encodeURIComponent(app)}}:count`,
  entry: (app: string, reqId: string) => `gw:{a:${encodeURIComponent(app)}}:req:${reqId}`,
  set: (app: string, node: string) => `gw:{a:${encodeURIComponent(app)}}:node:${node}`,
};

/** one process's heartbeat field in `gw:node:<id>` */
export interface NodeField {
  epoch: string;
  apiBase: string;
  hosts: string[];
  streams: number;
  at: number;
}

/** the scripts of redis-scripts.ts as the client's own commands (EVALSHA, loaded on first use) */
export function scripted(client: Client): Scripted {
  for (const [name, lua, numberOfKeys] of [
    ['gwClaim', CLAIM, 2],
    ['gwRefresh', REFRESH, 2],
    ['gwRelease', RELEASE, 2],
    ['gwLookup', LOOKUP, 2],
    ['gwReserve', RESERVE, 3],
    ['gwForget', FORGET, 3],
  ] as const) {
    client.defineCommand(name, { lua, numberOfKeys });
  }
  return client as unknown as Scripted;
}

/** the freshest run of a node, from its processes' heartbeat fields */
export function nodeOf(nodeId: string, fields: Record<string, string>): NodeView | undefined {
  const parsed: NodeField[] = [];
  for (const v of Object.values(fields)) {
    try {
      parsed.push(JSON.parse(v) as NodeField);
    } catch {
      /* not ours */
    }
  }
  if (parsed.length === 0) return undefined;
  const newest = parsed.reduce((a, b) => (b.at > a.at ? b : a));
  const same = parsed.filter((f) => f.epoch === newest.epoch);
  return { nodeId, epoch: newest.epoch, apiBase: newest.apiBase, hosts: newest.hosts, streams: same.reduce((n, f) => n + f.streams, 0) };
}

/**
 * Another run of this node id still in the directory: a run that stopped (its fields stay until the TTL) is waited
 * out and its fields removed; one that still beats is another node given the same id, and boot stops rather than
 * share its claims.
 */
export async function waitOutPastRun(client: Client, me: Member, ttlMs: number, describe: string, log: Logger): Promise<void> {
  const nk = keys.node(me.nodeId);
  const others = async () => {
    const out = new Map<string, number>();
    for (const [field, v] of Object.entries(await client.hgetall(nk))) {
      try {
        const f = JSON.parse(v) as NodeField;
        if (f.epoch !== me.epoch) out.set(field, f.at);
      } catch {
        /* not ours */
      }
    }
    return out;
  };
  const first = await others();
  if (first.size === 0) return;
  const deadline = Date.now() + ttlMs + 500;
  log.warn({ node: me.nodeId, fields: first.size }, 'this node id has a heartbeat of another run: waiting up to the directory TTL for it to stop');
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, Math.max(100, Math.floor(ttlMs / 6))));
    const now = await others();
    for (const [field, at] of now) {
      if (at > (first.get(field) ?? 0)) {
        throw new NodeIdInUse(`'${me.nodeId}' is in use by another running node (it keeps beating in ${describe}): give each node of a fleet its own nodeId`);
      }
    }
    if (now.size === 0) return;
  }
  const gone = [...(await others()).keys()];
  if (gone.length) await client.hdel(nk, ...gone);
}
