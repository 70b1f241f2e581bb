import type { Logger } from 'pino';
import type { Application } from '../../plugin-sdk/http';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import { normaliseSim, SIM_PATTERN } from '../../plugin-sdk/sim';
import { answerByHolder, checkReqIds } from '../sessions/request-ids';
import { DirectoryUnavailable, type ChannelRef, type Directory, type Member, type NodeView } from '../directory/directory';
import { callNode, NodeUnreachable, type FleetMethod } from './fleet-calls';
import { directoryDown } from './directory-down';

type KeepItem = { reqId: string; keep: boolean };
type CloseItem = { reqId: string; closed: boolean };

/** the session API of this node alone (its SessionManager, or its workers' through the primary) */
export interface NodeSessions {
  open(app: Application, body: Record<string, unknown>): Promise<Record<string, unknown>>;
  keep(app: Application, reqIds: string[]): Promise<KeepItem[]>;
  close(app: Application, reqIds: string[]): Promise<CloseItem[]>;
  status(app: Application): Promise<unknown[]>;
}

/** an open is passed on at most this often (asked node -> placed node -> owner found meanwhile) */
const MAX_HOPS = 2;
/** how long a placement counts on top of the heartbeats' stream counts: a heartbeat and a read of the view */
const PLACED_MEMORY_MS = 4000;

/** the channel an open body names, when it names one well enough to place it (else the node's validation answers) */
export function channelOfOpen(body: Record<string, unknown>): ChannelRef | undefined {
  const sim = body.simNo;
  const chan = body.chanId ?? body.channelId;
  if (typeof sim !== 'string' || !SIM_PATTERN.test(sim) || typeof chan !== 'number' || !Number.isInteger(chan) || chan < 1 || chan > 255) return undefined;
  return { sim: normaliseSim(sim), chan };
}

/**
 * The session API over a fleet: an open goes to the node that owns its channel (or is placed on one and claimed
 * there); keep and close go to the node that holds each request; status asks every live node. With the in-process
 * directory there is one node and every call is this node's.
 */
export class FleetSessions {
  private secret: string | undefined;
  /** channels this node placed lately, by node: not in the heartbeats' counts yet */
  private readonly placed: Array<{ nodeId: string; at: number }> = [];

  constructor(
    private readonly dir: Directory,
    private readonly local: NodeSessions,
    private readonly log: Logger,
    /** this process holds a stream of the channel (an open that failed leaves no claim behind it) */
    private readonly servesHere: (c: ChannelRef) => boolean | undefined,
    /** a call to another node ended: answered (ok or an error answer) or unreachable */
    private readonly counted: (method: FleetMethod, outcome: 'answered' | 'unreachable') => void = () => undefined,
  ) {}

  private get me(): Member {
    return this.dir.me;
  }

  private async call(node: NodeView, method: FleetMethod, args: unknown): Promise<unknown[]> {
    this.secret ??= await this.dir.fleetSecret();
    try {
      const out = await callNode(node.apiBase, this.secret, method, args);
      this.counted(method, 'answered');
      return out;
    } catch (err) {
      this.counted(method, err instanceof NodeUnreachable ? 'unreachable' : 'answered');
      throw err;
    }
  }

  /** a live node: from the view, or read now (it may have started since the view was read) */
  private async nodeById(id: string): Promise<NodeView | undefined> {
    return this.dir.liveNodes().find((n) => n.nodeId === id) ?? (await this.dir.node(id).catch(() => undefined));
  }

  /**
   * The rule for a channel nobody owns: the node with the fewest streams, ties to this node. The counts come with the
   * nodes' heartbeats (every third of the TTL) and are read every second: the channels this node placed since are
   * added, or a burst of opens through one node would all land where the counts were lowest a moment ago.
   */
  private fewest(): string {
    const now = Date.now();
    while (this.placed.length && now - this.placed[0].at > PLACED_MEMORY_MS) this.placed.shift();
    const extra = new Map<string, number>();
    for (const p of this.placed) extra.set(p.nodeId, (extra.get(p.nodeId) ?? 0) + 1);
    const load = (n: NodeView) => n.streams + (extra.get(n.nodeId) ?? 0);
    const view = this.dir.liveNodes();
    let best: NodeView | undefined = view.find((n) => n.nodeId === this.me.nodeId);
    for (const n of view) if (!best || load(n) < load(best)) best = n;
    return best?.nodeId ?? this.me.nodeId;
  }

  private notePlaced(nodeId: string): void {
    this.placed.push({ nodeId, at: Date.now() });
  }

  async open(app: Application, body: Record<string, unknown>, hop = 0): Promise<Record<string, unknown>> {
    const ch = channelOfOpen(body);
    if (!ch || this.dir.kind === 'memory') return this.local.open(app, body);
    if (!this.dir.available) throw directoryDown(this.dir);
    try {
      let target: string | undefined;
      // this process serves the channel already (its claim is refreshed here): no round trip to claim it again
      if (this.servesHere(ch) === true) return await this.openHere(app, body, ch);
      // passed here by another node, or this node would be chosen anyway: claim straight away (the claim says
      // whether the channel, or another channel of its SIM, is owned already)
      let here = hop > 0 || this.fewest() === this.me.nodeId;
      let placedByRule = false;
      if (!here) {
        const { owner, simHolder } = await this.dir.lookup(ch);
        const holder = owner ?? simHolder;
        placedByRule = !(holder && (await this.nodeById(holder.nodeId))?.epoch === holder.epoch);
        target = placedByRule ? this.fewest() : holder!.nodeId;
        here = target === this.me.nodeId;
      }
      if (here) {
        target = await this.claimHere(ch);
        if (target === undefined) {
          this.notePlaced(this.me.nodeId);
          return await this.openHere(app, body, ch);
        }
      } else if (placedByRule) {
        this.notePlaced(target!);
      }
      if (hop >= MAX_HOPS) throw new GatewayError(ErrCode.RETRY, 'The channel changed owner while it was being opened; retry.');
      return await this.openOn(target!, app, body, hop, ch);
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the directory may go down during the awaits above
      if (err instanceof DirectoryUnavailable || (!this.dir.available && !(err instanceof GatewayError))) throw directoryDown(this.dir);
      throw err;
    }
  }

  /** claims the channel for this node; undefined when it is this node's now, else the node that holds it */
  private async claimHere(ch: ChannelRef): Promise<string | undefined> {
    const a = await this.dir.claim(ch);
    if (a.ok) return undefined;
    if (await this.dir.isLive(a.holder)) return a.holder.nodeId;
    // its holder's node stopped and its claim has not expired yet: take its place
    this.log.info({ channel: `${ch.sim}_${ch.chan}`, lost: a.holder.nodeId }, 'claiming a channel of a lost node');
    const b = await this.dir.claim(ch, a.holder);
    return b.ok ? undefined : b.holder.nodeId;
  }

  private async openHere(app: Application, body: Record<string, unknown>, ch: ChannelRef): Promise<Record<string, unknown>> {
    try {
      return await this.local.open(app, body);
    } catch (err) {
      // nothing serves the channel here after all: give the claim back (with workers, the worker that would have
      // held it is elsewhere; an unheld claim expires by itself)
      if (this.servesHere(ch) === false) this.dir.unhold(ch);
      throw err;
    }
  }

  private async openOn(nodeId: string, app: Application, body: Record<string, unknown>, hop: number, ch: ChannelRef): Promise<Record<string, unknown>> {
    const node = await this.nodeById(nodeId);
    try {
      if (!node) throw new NodeUnreachable(`node ${nodeId} is not live`);
      const [result] = await this.call(node, 'open', { appId: app.appId, body, hop: hop + 1 });
      return result as Record<string, unknown>;
    } catch (err) {
      if (!(err instanceof NodeUnreachable)) throw err;
      this.log.warn({ node: nodeId, channel: `${ch.sim}_${ch.chan}`, err: err.message }, 'the node chosen for an open did not answer');
      // a node that stopped: its claim goes to this node (once its heartbeat is gone); one that answers nothing but
      // lives: the client retries
      const target = await this.claimHere(ch);
      if (target === undefined) return this.openHere(app, body, ch);
      throw new GatewayError(ErrCode.EXECUTION_ERROR, `The gateway node that serves this channel (${nodeId}) does not answer; retry.`);
    }
  }

  keep(app: Application, reqIds: unknown): Promise<KeepItem[]> {
    return this.each<KeepItem>(app, reqIds, 'keep');
  }

  close(app: Application, reqIds: unknown): Promise<CloseItem[]> {
    return this.each<CloseItem>(app, reqIds, 'close');
  }

  /** each id to the node that holds it (this node for ids the directory does not know), answers in the caller's order */
  private async each<T extends { reqId: string }>(app: Application, reqIds: unknown, method: 'keep' | 'close'): Promise<T[]> {
    const ids = checkReqIds(reqIds);
    let entries: Array<{ nodeId: string } | undefined> = [];
    if (this.dir.kind === 'redis' && this.dir.available) {
      // Redis gone mid-call: keeps and closes of this node's requests still work
      entries = await this.dir.find(app.appId, ids).catch(() => []);
    }
    return answerByHolder(
      ids,
      method === 'keep' ? 'keep' : 'closed',
      (i) => entries[i]?.nodeId ?? this.me.nodeId,
      async (nodeId, sub) => {
        if (nodeId === this.me.nodeId) return this.local[method](app, sub) as never;
        const node = await this.nodeById(nodeId);
        return node ? (this.call(node, method, { appId: app.appId, reqIds: sub }) as never) : [];
      },
      (nodeId, err) => {
        // a node that does not answer holds them no more as far as the caller can tell: they answer false
        this.log.warn({ node: nodeId, method, err: err.message }, 'a fleet node did not answer for its requests');
      },
    ) as unknown as Promise<T[]>;
  }

  /** this node's requests of the application and every other live node's */
  async status(app: Application): Promise<unknown[]> {
    const mine = this.local.status(app);
    if (this.dir.kind === 'memory' || !this.dir.available) return mine;
    const others = (await this.dir.nodesNow().catch(() => this.dir.liveNodes())).filter((n) => n.nodeId !== this.me.nodeId);
    const parts = await Promise.all(
      others.map(async (n) => {
        try {
          return (await this.call(n, 'status', { appId: app.appId })).map((e) => ({ ...(e as object), node: n.nodeId }));
        } catch (err) {
          this.log.warn({ node: n.nodeId, err: (err as Error).message }, 'a fleet node did not answer status: its requests are left out');
          return [];
        }
      }),
    );
    return [...(await mine).map((e) => ({ ...(e as object), node: this.me.nodeId })), ...parts.flat()];
  }
}
