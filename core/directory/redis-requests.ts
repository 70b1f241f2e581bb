/**
 * Request reservations in the Redis directory as one process makes them: an id unique across the fleet and a place
 * in its application's count, reserved in one round trip; what the process reserved and what it forgot while Redis
 * could not be told are kept here, so that they are put back (or removed) when Redis is reachable again.
 */
import type { RequestEntry, ReserveAnswer } from './directory';
import { keys, type Link } from './redis-client';
import { dropRid, readEntries } from './redis-reap';

export class RequestReservations {
  /** requests this process reserved (put back after Redis lost them) */
  private readonly mine = new Map<string, RequestEntry>();
  /** requests this process forgot while Redis was unreachable (or the call failed), by appId + reqId: removed by restore() */
  private readonly unforgotten = new Map<string, { appId: string; reqId: string; nodeId: string }>();

  constructor(private readonly link: Link) {}

  /** requests this process holds */
  get size(): number {
    return this.mine.size;
  }

  private field(e: Pick<RequestEntry, 'nodeId' | 'epoch' | 'worker'>): string {
    return `${e.nodeId}/${e.epoch}/${e.worker}`;
  }

  async reserve(e: RequestEntry, limit: number): Promise<ReserveAnswer> {
    this.link.need();
    const { client, s } = this.link;
    // the id across applications and the place in the application's count, sent together (one round trip: an open
    // waits for it); an application's own id in use shows in the entry, another's in the id key
    const [was, res] = await Promise.all([
      client.set(keys.rid(e.reqId), e.appId, 'NX', 'GET'),
      s.gwReserve(
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
      if (res === 1) await s.gwForget(keys.count(e.appId), keys.entry(e.appId, e.reqId), keys.set(e.appId, e.nodeId), e.reqId);
      return 'other';
    }
    if (res === 2) return 'self';
    if (res === 0) {
      if (was === null) await client.del(keys.rid(e.reqId));
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
    const nodeId = e?.nodeId ?? this.link.me.nodeId;
    const left = { appId, reqId, nodeId };
    // not applied now: the entry and its id would stay taken for good if Redis kept them; restore() removes them
    if (!this.link.up) {
      this.unforgotten.set(`${appId}\n${reqId}`, left);
      return;
    }
    this.link.track(
      (async () => {
        await this.link.s.gwForget(keys.count(appId), keys.entry(appId, reqId), keys.set(appId, nodeId), reqId);
        await dropRid(this.link.client, reqId, appId);
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
    if (!this.link.up) return;
    this.link.track(Promise.all(reqIds.map((id) => this.link.client.hset(keys.entry(appId, id), 'k', keepDeadline))));
  }

  async find(appId: string, reqIds: string[]): Promise<Array<RequestEntry | undefined>> {
    this.link.need();
    return readEntries(this.link.client, appId, reqIds);
  }

  /**
   * After an outage: every request of this process as it is here, and its count in each of `apps`. The requests go
   * back side by side, each one's steps in order: one after another, a node holding a thousand would leave the last
   * unknown to the rest of the fleet for some four thousand round trips.
   */
  async restore(apps: string[]): Promise<void> {
    const { me } = this.link;
    // requests that ended while Redis could not be told (it may have kept them): gone now, unless another node took
    // the id meanwhile (after a restart that lost it)
    const ended = [...this.unforgotten];
    await Promise.all(ended.map(([, f]) => this.removeEnded(f)));
    for (const [k] of ended) this.unforgotten.delete(k);
    const perApp = new Map<string, number>();
    const back = await Promise.all([...this.mine.values()].map((e) => this.putBack(e)));
    for (const e of back) if (e) perApp.set(e.appId, (perApp.get(e.appId) ?? 0) + 1);
    await Promise.all([...new Set([...apps, ...perApp.keys()])].map((app) => this.link.client.hset(keys.count(app), this.field(me), perApp.get(app) ?? 0)));
  }

  private async removeEnded(f: { appId: string; reqId: string; nodeId: string }): Promise<void> {
    const { client, s } = this.link;
    const [cur] = await readEntries(client, f.appId, [f.reqId]);
    if (cur?.nodeId !== f.nodeId) return;
    await s.gwForget(keys.count(f.appId), keys.entry(f.appId, f.reqId), keys.set(f.appId, f.nodeId), f.reqId);
    await dropRid(client, f.reqId, f.appId);
  }

  /** `e` back in Redis, or undefined when another holder took its id while Redis had lost it */
  private async putBack(e: RequestEntry): Promise<RequestEntry | undefined> {
    const { client, me, log } = this.link;
    const was = await client.set(keys.rid(e.reqId), e.appId, 'NX', 'GET');
    const cur = was === null || was === e.appId ? (JSON.parse((await client.hget(keys.entry(e.appId, e.reqId), 'e')) ?? 'null') as RequestEntry | null) : null;
    const other = was !== null && was !== e.appId ? `application ${was}` : cur && cur.nodeId !== me.nodeId ? `node ${cur.nodeId}` : undefined;
    if (other !== undefined) {
      // reserved elsewhere while this process could not say it held it (Redis lost it): the other holder keeps it
      log.error({ reqId: e.reqId, appId: e.appId, heldBy: other }, 'a request of this process was taken by another while the directory was away: left to it');
      return undefined;
    }
    await Promise.all([
      client.hset(keys.entry(e.appId, e.reqId), 'e', JSON.stringify(e), 'k', e.keepDeadline),
      client.sadd(keys.set(e.appId, e.nodeId), e.reqId),
    ]);
    return e;
  }
}
