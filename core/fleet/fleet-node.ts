import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { CloseCause } from '../../plugin-sdk/sessions';
import type { RouteRequest } from '../../plugin-sdk/http';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import { BootError } from '../config';
import type { Kernel } from '../kernel';
import { NODE_ID_PATTERN, NodeIdInUse, type ChannelRef, type Directory, type LostNode, type Member } from '../directory/directory';
import { MemoryDirectory } from '../directory/memory-directory';
import { RedisDirectory } from '../directory/redis-directory';
import { ClusterSessions } from '../cluster/session-calls';
import { FleetSessions, type NodeSessions } from './fleet-sessions';
import { FLEET_HEADER, FLEET_PATH, fleetSecretMatches } from './fleet-calls';
import { requestDirectoryFor } from './request-directory';
import { metricsFor } from '../metrics';

/** the directory a site's `directoryUrl` names: absent or `memory:` in-process, `redis…://` a fleet's Redis */
export function directoryFor(url: string | undefined, me: Member, ttlMs: number, log: Logger, where: string): Directory {
  if (!NODE_ID_PATTERN.test(me.nodeId)) throw new BootError(`${where}: key nodeId: '${me.nodeId}' is not a node id (1-64 letters, digits, '.', '_' or '-')`);
  if (url === undefined || url === '' || url === 'memory:') return new MemoryDirectory(me);
  if (!/^(rediss?|redis\+sentinels?|redis\+clusters?):\/\//.test(url)) {
    throw new BootError(
      `${where}: key directoryUrl: must be memory:, redis://…, rediss://…, redis+sentinel://h:p,…/<master> or redis+cluster://h:p,… (got ${JSON.stringify(url.replace(/:[^:@/]*@/, ':***@'))})`,
    );
  }
  return new RedisDirectory(url, me, ttlMs, log);
}

/** this process in its node: its epoch comes from the primary with workers, so every worker shares it */
export function memberOf(k: Kernel): Member {
  return {
    nodeId: k.gateway.nodeId,
    epoch: k.env.JTGW_NODE_EPOCH ?? randomBytes(6).toString('base64url'),
    worker: k.cluster?.link.index ?? 0,
  };
}

/** what the kernel asks of the fleet: its session API and the directory under it */
export interface Fleet {
  dir: Directory;
  sessions: FleetSessions;
  /**
   * A plugin serves the channel of routing key `{sim}_{chan}` before any stream does (an RTMP encoder publishing it):
   * the node claims it, so opens on any node come here; the returned function gives it back unless a stream serves it.
   */
  holdChannel(key: string): () => void;
}

/**
 * Starts this process's part of the directory and puts it under the sessions: request ids and caps (with the
 * primary's for workers), the claims of the channels this process serves, its stream count, the closed notices of
 * lost nodes, and `degraded: directory` while the directory is unreachable.
 */
export async function startFleet(k: Kernel, apiBase: string): Promise<Fleet> {
  const where = `${k.site.file}: gateway`;
  const log = k.log.child({ part: 'directory' });
  const dir = directoryFor(k.gateway.directoryUrl, memberOf(k), k.gateway.directoryTtlSec * 1000, log, where);
  const hosts = [k.gateway.publicHost, ...k.gateway.publicHosts];
  try {
    await dir.start({ apiBase, hosts }, k.apps.appIds());
  } catch (err) {
    throw new BootError(`${where}: key ${err instanceof NodeIdInUse ? 'nodeId' : 'directoryUrl'}: ${(err as Error).message}`);
  }
  const sessions = k.sessions;
  sessions.setDirectory(requestDirectoryFor(k.cluster?.link, dir));
  const channelOf = (s: { normSim: string; chanId: number }): ChannelRef => ({ sim: s.normSim, chan: s.chanId });
  const servesHere = (c: ChannelRef) => !!(sessions.findStream(c.sim, c.chan, 'live') ?? sessions.findStream(c.sim, c.chan, 'replay'));
  sessions.onStreamOpened((s) => {
    dir.hold(channelOf(s));
    dir.setStreamCount(sessions.streamCount);
  });
  /** channels plugins hold (holdChannel), by routing key: how many holds each */
  const pluginHolds = new Map<string, number>();
  const keyOf = (c: ChannelRef) => `${c.sim}_${c.chan}`;
  sessions.onStreamClosed((s) => {
    const other = s.typ === 'live' ? 'replay' : 'live';
    if (!sessions.findStream(s.normSim, s.chanId, other) && !pluginHolds.has(keyOf(channelOf(s)))) dir.unhold(channelOf(s));
    dir.setStreamCount(sessions.streamCount - 1);
  });
  const holdChannel = (key: string): (() => void) => {
    const m = /^(.+)_(\d{1,3})$/.exec(key);
    if (!m) return () => undefined;
    const ch: ChannelRef = { sim: m[1], chan: Number(m[2]) };
    pluginHolds.set(key, (pluginHolds.get(key) ?? 0) + 1);
    let held = true;
    dir.claim(ch).then(
      (a) => {
        if (!held) return;
        if (a.ok) dir.hold(ch);
        else
          log.warn(
            { channel: key, owner: a.holder.nodeId },
            "a channel a plugin serves here (an RTMP publisher) is another node's: its opens go there, not here",
          );
      },
      (err: Error) => log.warn({ channel: key, err: err.message }, 'could not claim a channel a plugin serves here'),
    );
    return () => {
      if (!held) return;
      held = false;
      const n = (pluginHolds.get(key) ?? 1) - 1;
      if (n > 0) pluginHolds.set(key, n);
      else pluginHolds.delete(key);
      if (n <= 0 && !servesHere(ch)) dir.unhold(ch);
    };
  };
  dir.onNodeLost((lost) => sendLostNotices(k, lost));
  dir.onAvailability((up, why) => {
    if (up) k.health.clear('directory');
    else
      k.health.set(
        'directory',
        `the fleet directory (${dir.describe}) is unreachable (${why ?? 'no answer'}): opens answer -2; live streams, players and keeps of this node's requests go on`,
      );
  });
  const cs = k.cluster ? new ClusterSessions(k, k.cluster.link) : undefined;
  const local: NodeSessions = cs ?? {
    open: (app, body) => sessions.open(app, body),
    keep: async (app, ids) => sessions.keep(app, ids),
    close: async (app, ids) => sessions.close(app, ids),
    status: async (app) => sessions.status(app),
  };
  const m = metricsFor(k.registry, 'fleet');
  const calls = m.counter('calls_total', 'calls this process made to other fleet nodes, by method and outcome (answered, unreachable)', ['method', 'outcome']);
  const lostNotices = m.counter('lost_node_notices_total', 'closed notices (closeCause 13) this process sent for requests of lost nodes');
  m.gauge('directory_up', 'whether the directory is reachable (1) or not (0); the in-process directory always is', [], (g) => g.set(dir.available ? 1 : 0));
  m.gauge('nodes', 'live nodes of the fleet, as this process last read them', [], (g) => g.set(dir.liveNodes().length));
  m.gauge('claims_held', 'channels whose claim this process refreshes', [], (g) => g.set(dir.heldCount()));
  dir.onNodeLost((lost) => lostNotices.inc(lost.requests.length));
  const fleet = new FleetSessions(
    dir,
    local,
    log,
    (c) => (cs ? undefined : servesHere(c)),
    (method, outcome) => calls.inc({ method, outcome }),
  );
  registerFleetRoutes(k, dir, fleet, local);
  if (dir.kind === 'redis') log.info({ node: dir.me.nodeId, directory: dir.describe, apiBase, hosts }, 'fleet node: directory on Redis');
  return { dir, sessions: fleet, holdChannel };
}

/** a lost node's requests get their closed notices from here (closeCause 13, closeReason naming the node) */
function sendLostNotices(k: Kernel, lost: LostNode): void {
  for (const e of lost.requests) {
    k.notices.emit({
      ...e.notice,
      payload: { ...e.notice.payload, act: 'closed', closeCause: CloseCause.nodeLost, closeReason: `nodeLost: ${lost.nodeId}` },
      last: true,
    });
  }
}

/** what other nodes call on this one: the fleet's secret in FLEET_HEADER, the application by id */
function registerFleetRoutes(k: Kernel, dir: Directory, fleet: FleetSessions, local: NodeSessions): void {
  if (dir.kind === 'memory') return;
  const routes = k.api.routesFor('fleet');
  let secret: string | undefined;
  const caller = async (req: RouteRequest) => {
    secret ??= await dir.fleetSecret().catch(() => undefined);
    if (!secret || !fleetSecretMatches(req.headers[FLEET_HEADER], secret)) {
      k.log.warn({ remote: req.remote, path: req.path }, "fleet call without the fleet's secret: refused");
      throw new GatewayError(ErrCode.AUTHENTICATION_FAILED, 'Authentication failed.', 401);
    }
    const appId = req.body?.appId;
    const app = typeof appId === 'string' ? k.apps.byAppId(appId) : undefined;
    // every node runs the same site: an application this node does not know is a misconfigured fleet
    if (!app)
      throw new GatewayError(
        ErrCode.EXECUTION_ERROR,
        `Application ${JSON.stringify(appId)} is not configured on node ${dir.me.nodeId}; every node of a fleet runs the same site.`,
      );
    return app;
  };
  const ids = (req: RouteRequest) => req.body?.reqIds as string[];
  routes.post(
    `${FLEET_PATH}open`,
    async (req) => {
      const app = await caller(req);
      const hop = typeof req.body?.hop === 'number' ? req.body.hop : 1;
      return { data: [await fleet.open(app, (req.body?.body ?? {}) as Record<string, unknown>, hop)] };
    },
    { auth: 'none' },
  );
  routes.post(`${FLEET_PATH}keep`, async (req) => ({ data: await local.keep(await caller(req), ids(req)) }), { auth: 'none' });
  routes.post(`${FLEET_PATH}close`, async (req) => ({ data: await local.close(await caller(req), ids(req)) }), { auth: 'none' });
  routes.post(`${FLEET_PATH}status`, async (req) => ({ data: await local.status(await caller(req)) }), { auth: 'none' });
}
