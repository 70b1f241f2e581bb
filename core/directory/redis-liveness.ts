/**
 * A process's liveness in the Redis directory, and its view of the live nodes: it writes its node's heartbeat field a
 * third of the TTL apart, reads the live nodes every second, and reaps any that stopped once the gateway is ready.
 */
import type { NodeView, Member } from './directory';
import { keys, nodeOf, type Link, type NodeField } from './redis-client';
import { reapNode, type Reaper } from './redis-reap';

/** how often the live nodes are read (and lost ones found) */
export const VIEW_MS = 1000;

/** heartbeats, and each held claim's refresh, come this often: a third of the TTL */
export function beatMsFor(ttlMs: number): number {
  return Math.max(200, Math.floor(ttlMs / 3));
}

export class NodeLiveness {
  /** the live nodes as last read */
  view: NodeView[] = [];
  streams = 0;
  self: { apiBase: string; hosts: string[] } = { apiBase: '', hosts: [] };
  /** set by ready(): lost nodes are reaped from then on */
  private reaping = false;

  constructor(
    private readonly link: Link,
    private readonly reaper: Reaper,
  ) {}

  /** this process's heartbeat; `alsoSend`: more calls sent with it (every held claim's refresh, after an outage) */
  async beat(alsoSend?: () => Array<Promise<void>>): Promise<void> {
    const { client, me, ttlMs } = this.link;
    if (!this.link.up) return;
    const field: NodeField = { epoch: me.epoch, apiBase: this.self.apiBase, hosts: this.self.hosts, streams: this.streams, at: Date.now() };
    const nk = keys.node(me.nodeId);
    await Promise.all([
      client.hset(nk, String(me.worker), JSON.stringify(field)),
      client.pexpire(nk, ttlMs),
      client.sadd(keys.nodes, me.nodeId),
      ...(alsoSend ? alsoSend() : []),
    ]);
  }

  async readView(): Promise<void> {
    const { client } = this.link;
    if (!this.link.up) return;
    const ids = await client.smembers(keys.nodes);
    const all = await Promise.all(ids.map(async (id) => ({ id, fields: await client.hgetall(keys.node(id)) })));
    const view: NodeView[] = [];
    for (const { id, fields } of all) {
      const n = nodeOf(id, fields);
      if (n) view.push(n);
      else if (id !== this.link.me.nodeId && this.reaping) await reapNode(this.reaper, id, undefined);
    }
    this.view = view.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  }

  async isLive(m: Member): Promise<boolean> {
    const n = await this.node(m.nodeId);
    return n !== undefined && n.epoch === m.epoch;
  }

  async node(nodeId: string): Promise<NodeView | undefined> {
    this.link.need();
    return nodeOf(nodeId, await this.link.client.hgetall(keys.node(nodeId)));
  }

  ready(): void {
    if (this.reaping) return;
    this.reaping = true;
    // a node restarted (within the TTL or not) may have left requests of its last run: this one sends their notices
    this.link.track(reapNode(this.reaper, this.link.me.nodeId, this.link.me.epoch));
  }

  /** this process says goodbye; the node's other processes keep it alive */
  async goodbye(): Promise<void> {
    const { me } = this.link;
    await this.link.client.hdel(keys.node(me.nodeId), String(me.worker)).catch(() => undefined);
  }
}
