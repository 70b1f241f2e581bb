/**
 * The directory: who owns a channel, where a request lives, request ids unique across the fleet, each application's
 * open count. One interface, two backends: in-process for one node (memory-directory.ts, what `npm start` uses) and
 * Redis for a fleet (redis-directory.ts). Ownership is claimed, never computed: the node that serves a channel holds
 * a claim on it that it refreshes; a claim nobody refreshes expires within the directory's TTL, so a node that stops
 * loses its channels by itself, and a survivor sends the closed notices of the requests it held.
 */
import type { Notice } from '../../plugin-sdk/notices';

/** one process of one node: a single process is worker 0 */
export interface Member {
  nodeId: string;
  /** new at every start of the node (its primary, or its single process): a restarted node is a new incarnation */
  epoch: string;
  worker: number;
}

/** a node as the fleet sees it: what its processes last wrote */
export interface NodeView {
  nodeId: string;
  epoch: string;
  /** where the other nodes call it (gateway.apiBase) */
  apiBase: string;
  /** its address sets: connIdx k is hosts[k] */
  hosts: string[];
  /** channel streams its processes hold, for placement */
  streams: number;
}

/** a terminal channel: live and replay of one channel have one owner (a terminal pushes both to one node) */
export interface ChannelRef {
  /** normalised SIM */
  sim: string;
  chan: number;
}

export function channelName(c: ChannelRef): string {
  return `${c.sim}_${c.chan}`;
}

export type ClaimAnswer =
  /** the channel is this node's (claimed now, or already) */
  | { ok: true }
  /** another node owns it ('owned'), or owns another channel of the same SIM ('sim': terminals may share a link) */
  | { ok: false; why: 'owned' | 'sim'; holder: Member };

/** a request as the directory holds it */
export interface RequestEntry {
  reqId: string;
  appId: string;
  nodeId: string;
  epoch: string;
  worker: number;
  /** channelName() */
  channel: string;
  fmt: number;
  ctrl: boolean;
  keepIntv: number;
  /** ms since the Unix epoch */
  keepDeadline: number;
  /** the closed notice a survivor sends should the request's node be lost */
  notice: Notice;
}

export type ReserveAnswer =
  | 'ok'
  /** held already by the same application ('self') or another ('other') */
  | 'self'
  | 'other'
  /** the application holds its maximum of open requests across the fleet */
  | 'cap';

/** a node found lost (its processes stopped refreshing), with the requests it held */
export interface LostNode {
  nodeId: string;
  epoch: string;
  requests: RequestEntry[];
}

/** the directory is unreachable: what an open that needs it answers (-2), with why */
export class DirectoryUnavailable extends Error {}

/** another running node has this node's id: boot stops */
export class NodeIdInUse extends Error {}

export interface Directory {
  readonly kind: 'memory' | 'redis';
  readonly me: Member;
  /** false while the backend cannot be reached */
  readonly available: boolean;
  /** what the backend is, for logs and health (a Redis URL without its password) */
  readonly describe: string;
  /** told when availability changes */
  onAvailability(cb: (up: boolean, why?: string) => void): void;
  /** told once per lost node, in one process of the fleet (the one that took the reaping) */
  onNodeLost(cb: (lost: LostNode) => void): void;

  /** announces this process and keeps it alive; `apps`: the site's application ids (their counts are reaped) */
  start(self: { apiBase: string; hosts: string[] }, apps: string[]): Promise<void>;
  /**
   * The gateway has started (its notices reach their plugins): from now on this process reaps lost nodes and its own
   * node's last run, telling onNodeLost
   */
  ready(): void;
  /** stops refreshing and says goodbye (what this process held is left to expire or to its close) */
  stop(): Promise<void>;
  /** the live nodes as last read (refreshed about every second) */
  liveNodes(): NodeView[];
  /** the live nodes read now (for calls that must not miss a node that started a moment ago) */
  nodesNow(): Promise<NodeView[]>;
  /** channel streams this process holds, told to the fleet with the next heartbeat */
  setStreamCount(n: number): void;

  // --- channels -------------------------------------------------------------------------------------------------
  /** who owns the channel, and who owns another channel of its SIM */
  lookup(c: ChannelRef): Promise<{ owner?: Member; simHolder?: Member }>;
  /**
   * Claims the channel for this node unless another node owns it or another channel of its SIM. `replace`: a stale
   * owner (its node is lost) the claim may take the place of.
   */
  claim(c: ChannelRef, replace?: Member): Promise<ClaimAnswer>;
  /** this process serves the channel: it refreshes the claim until unhold (then releases it) */
  hold(c: ChannelRef): void;
  /** this process no longer serves the channel: the claim is released if it is still this node's */
  unhold(c: ChannelRef): void;
  /** channels this process holds */
  heldCount(): number;
  /** whether the member's node runs that incarnation now (read from the backend, not the cached view) */
  isLive(m: Member): Promise<boolean>;
  /** a node as it is now (read from the backend): one that started since the view was read is found too */
  node(nodeId: string): Promise<NodeView | undefined>;

  // --- requests -------------------------------------------------------------------------------------------------
  reserve(e: RequestEntry, limit: number): Promise<ReserveAnswer>;
  /** the request ended (fire and forget: failures are logged and healed by the next reconnect) */
  forget(appId: string, reqId: string): void;
  /** the keep deadline of requests kept (fire and forget) */
  touch(appId: string, reqIds: string[], keepDeadline: number): void;
  /** the entries of an application's requests (undefined: unknown, or another application's) */
  find(appId: string, reqIds: string[]): Promise<Array<RequestEntry | undefined>>;
  /** the fleet's shared secret for calls between nodes */
  fleetSecret(): Promise<string>;
}

/** nodeId: letters, digits, '.', '_', '-' (it is part of keys and of claim values) */
export const NODE_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** `node|epoch|worker`: how a claim names its owner */
export function memberValue(m: Member): string {
  return `${m.nodeId}|${m.epoch}|${m.worker}`;
}

/** the node part of a claim value: every process of one node incarnation shares it */
export function nodePrefix(m: Pick<Member, 'nodeId' | 'epoch'>): string {
  return `${m.nodeId}|${m.epoch}|`;
}

export function parseMember(v: string): Member | undefined {
  const [nodeId, epoch, worker] = v.split('|');
  if (!nodeId || !epoch || worker === undefined) return undefined;
  return { nodeId, epoch, worker: Number(worker) };
}
