/**
 * Requests' entries in the Redis directory as a process reads and removes them, and the reaping of a lost node (or
 * of this node's past run): its requests' entries go, their closed notices are told, and its counts are given back.
 */
import type { Logger } from 'pino';
import { memberValue, type LostNode, type Member, type RequestEntry } from './directory';
import { keys, type Client, type Scripted } from './redis-client';

/** a reaper's hold on a lost node, so one survivor sends its notices */
const REAP_LOCK_MS = 30_000;

/** what reaping needs of the directory */
export interface Reaper {
  client: Client;
  s: Scripted;
  me: Member;
  log: Logger;
  /** told each lost run's requests (onNodeLost) */
  lost: ReadonlyArray<(l: LostNode) => void>;
}

/** the entries of these requests of one application (undefined: none, or another application's) */
export async function readEntries(client: Client, appId: string, reqIds: string[]): Promise<Array<RequestEntry | undefined>> {
  return Promise.all(
    reqIds.map(async (id) => {
      const [e, k] = await client.hmget(keys.entry(appId, id), 'e', 'k');
      if (!e) return undefined;
      try {
        const entry = JSON.parse(e) as RequestEntry;
        if (entry.appId !== appId) return undefined;
        if (k) entry.keepDeadline = Number(k);
        return entry;
      } catch {
        return undefined;
      }
    }),
  );
}

/** a request id is free again, unless another application took it meanwhile */
export async function dropRid(client: Client, reqId: string, appId: string): Promise<void> {
  const rid = keys.rid(reqId);
  if ((await client.get(rid)) === appId) await client.del(rid);
}

/**
 * Takes the reaping of a lost node (or, with `keepEpoch`, of this node's past incarnations): its requests' entries
 * go, their closed notices are told to onNodeLost, and its counts are given back.
 */
export async function reapNode(r: Reaper, nodeId: string, keepEpoch: string | undefined): Promise<void> {
  const { client } = r;
  const lock = keys.reap(nodeId, keepEpoch ?? 'lost');
  if ((await client.set(lock, memberValue(r.me), 'PX', REAP_LOCK_MS, 'NX')) !== 'OK') return;
  const apps = await client.smembers(keys.apps);
  const byEpoch = new Map<string, RequestEntry[]>();
  for (const app of apps) {
    const set = keys.set(app, nodeId);
    const ids = await client.smembers(set);
    const entries = await readEntries(client, app, ids);
    for (let i = 0; i < ids.length; i++) {
      const e = entries[i];
      if (!e) {
        await client.srem(set, ids[i]);
        continue;
      }
      if (keepEpoch !== undefined && e.epoch === keepEpoch) continue;
      await r.s.gwForget(keys.count(app), keys.entry(app, e.reqId), set, e.reqId);
      await dropRid(client, e.reqId, app);
      (byEpoch.get(e.epoch) ?? byEpoch.set(e.epoch, []).get(e.epoch)!).push(e);
    }
    // counts of the lost incarnations' processes
    const count = keys.count(app);
    const fields = await client.hkeys(count);
    const gone = fields.filter((f) => f.startsWith(`${nodeId}/`) && (keepEpoch === undefined || !f.startsWith(`${nodeId}/${keepEpoch}/`)));
    if (gone.length) await client.hdel(count, ...gone);
  }
  if (keepEpoch === undefined) await client.srem(keys.nodes, nodeId);
  // done: a later loss of the same node (restarted, then lost again) is reaped at once, not after the lock's time
  await client.del(lock);
  for (const [epoch, requests] of byEpoch) {
    r.log.warn(
      { node: nodeId, epoch, requests: requests.length },
      keepEpoch === undefined ? "fleet node lost: sending its requests' closed notices" : "requests of this node's last run: sending their closed notices",
    );
    for (const cb of r.lost) cb({ nodeId, epoch, requests });
  }
}
