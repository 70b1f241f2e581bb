import { randomBytes } from 'node:crypto';
import {
  channelName,
  nodePrefix,
  type ChannelRef,
  type ClaimAnswer,
  type Directory,
  type LostNode,
  type Member,
  type NodeView,
  type RequestEntry,
  type ReserveAnswer,
} from './directory';

/**
 * The directory of a single node, in its process: no server, nothing to lose but the process itself (whose
 * requests go with it). What `npm start` uses. Its claims need no refresh (the only node owns every channel it
 * serves) and it never loses a node. With several workers each worker has its own, and the primary keeps request
 * ids unique across them (core/cluster/request-directory.ts).
 */
export class MemoryDirectory implements Directory {
  readonly kind = 'memory' as const;
  readonly describe = 'in-process';
  readonly available = true;
  private readonly claims = new Map<string, Member>();
  private readonly held = new Set<string>();
  private readonly entries = new Map<string, RequestEntry>();
  private readonly counts = new Map<string, number>();
  private self: NodeView;
  private readonly secret = randomBytes(24).toString('base64url');

  constructor(readonly me: Member) {
    this.self = { nodeId: me.nodeId, epoch: me.epoch, apiBase: '', hosts: [], streams: 0 };
  }

  onAvailability(): void {
    /* always available */
  }
  onNodeLost(_cb: (l: LostNode) => void): void {
    /* one node: none is ever lost to a survivor */
  }

  async start(self: { apiBase: string; hosts: string[] }): Promise<void> {
    this.self = { ...this.self, ...self };
  }

  ready(): void {
    /* nothing to reap */
  }

  async stop(): Promise<void> {
    /* nothing outside the process */
  }

  liveNodes(): NodeView[] {
    return [this.self];
  }

  async nodesNow(): Promise<NodeView[]> {
    return [this.self];
  }

  setStreamCount(n: number): void {
    this.self.streams = n;
  }

  async lookup(c: ChannelRef): Promise<{ owner?: Member; simHolder?: Member }> {
    const owner = this.claims.get(channelName(c));
    let simHolder: Member | undefined;
    for (const [k, m] of this.claims) if (k.startsWith(`${c.sim}_`) && k !== channelName(c)) simHolder = m;
    return { owner, simHolder };
  }

  async claim(c: ChannelRef): Promise<ClaimAnswer> {
    const cur = this.claims.get(channelName(c));
    if (cur && nodePrefix(cur) !== nodePrefix(this.me)) return { ok: false, why: 'owned', holder: cur };
    this.claims.set(channelName(c), this.me);
    return { ok: true };
  }

  hold(c: ChannelRef): void {
    this.held.add(channelName(c));
    this.claims.set(channelName(c), this.me);
  }

  heldCount(): number {
    return this.held.size;
  }

  unhold(c: ChannelRef): void {
    if (this.held.delete(channelName(c))) this.claims.delete(channelName(c));
  }

  async isLive(m: Member): Promise<boolean> {
    return m.nodeId === this.me.nodeId && m.epoch === this.me.epoch;
  }

  async node(nodeId: string): Promise<NodeView | undefined> {
    return nodeId === this.me.nodeId ? this.self : undefined;
  }

  async reserve(e: RequestEntry, limit: number): Promise<ReserveAnswer> {
    const was = this.entries.get(e.reqId);
    if (was) return was.appId === e.appId ? 'self' : 'other';
    const n = this.counts.get(e.appId) ?? 0;
    if (n >= limit) return 'cap';
    this.entries.set(e.reqId, { ...e });
    this.counts.set(e.appId, n + 1);
    return 'ok';
  }

  forget(appId: string, reqId: string): void {
    const e = this.entries.get(reqId);
    if (!e || e.appId !== appId) return;
    this.entries.delete(reqId);
    const n = (this.counts.get(appId) ?? 1) - 1;
    if (n > 0) this.counts.set(appId, n);
    else this.counts.delete(appId);
  }

  touch(appId: string, reqIds: string[], keepDeadline: number): void {
    for (const id of reqIds) {
      const e = this.entries.get(id);
      if (e?.appId === appId) e.keepDeadline = keepDeadline;
    }
  }

  async find(appId: string, reqIds: string[]): Promise<Array<RequestEntry | undefined>> {
    return reqIds.map((id) => {
      const e = this.entries.get(id);
      return e?.appId === appId ? { ...e } : undefined;
    });
  }

  async fleetSecret(): Promise<string> {
    return this.secret;
  }
}
