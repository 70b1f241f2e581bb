import { streamKey, type ConnectionRouter, type RouteDecision } from '../../plugin-sdk/cluster';
import type { RouteSpec } from './messages';

/**
 * The worker that owns a routing key. FNV-1a over the key's UTF-16 units: stable across processes and restarts
 * (the primary, every worker and a restarted worker must agree without talking), and spreads the sequential SIMs of
 * a fleet evenly. A channel key (`{sim}_{chan}`) counts by its SIM alone: every channel of a terminal is in one
 * worker, so a terminal that sends several channels on one link (they exist in the field) has all of them where its
 * link lands, not only the first.
 */
export function shardOf(key: string, workers: number): number {
  // a burst of one terminal's datagrams asks for the same key (often the very string) many times in a row
  if (key === lastShard.key && workers === lastShard.workers) return lastShard.shard;
  const sim = key.indexOf('_');
  const end = sim > 0 ? sim : key.length;
  let h = 0x811c9dc5;
  for (let i = 0; i < end; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  const shard = (h >>> 0) % workers;
  lastShard.key = key;
  lastShard.workers = workers;
  lastShard.shard = shard;
  return shard;
}

const lastShard = { key: '', workers: 0, shard: 0 };

/** a request line's target needs at most this much; a longer head without a line end is no session URL */
const MAX_LINE = 4096;

/**
 * The built-in router 'stream-path': the first line of an HTTP, WebSocket or RTSP request
 * (`GET /live/{stream}.flv?…`, `GET /hls/{stream}/index.m3u8`, `OPTIONS rtsp://h:p/live/{stream}?… RTSP/1.0`,
 * `GET /talk/{stream}?…`). The first path segment that is a session stream name decides; anything else, any worker.
 */
export const streamPathRouter: ConnectionRouter = (head: Buffer, complete: boolean): RouteDecision => {
  const eol = head.indexOf(0x0a);
  if (eol < 0) return complete || head.length >= MAX_LINE ? 'any' : 'more';
  const line = head.toString('latin1', 0, eol);
  const parts = line.split(' ');
  if (parts.length < 2) return 'any';
  const key = keyOfTarget(parts[1]);
  return key ? { key } : 'any';
};

/** the routing key in a request target (origin form or absolute rtsp:// form), if one of its segments is a stream */
export function keyOfTarget(target: string): string | undefined {
  let p = target;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\/[^/]*/i.exec(p);
  if (scheme) p = p.slice(scheme[0].length);
  const q = p.search(/[?#]/);
  if (q >= 0) p = p.slice(0, q);
  for (const seg of p.split('/')) {
    if (!seg) continue;
    let s = seg;
    try {
      s = decodeURIComponent(seg);
    } catch {
      /* as it is */
    }
    // a SIM may hold dots: the whole segment first, then without an extension (`.flv`, `.m3u8`)
    const key = streamKey(s) ?? streamKey(s.replace(/\.[A-Za-z0-9]{1,8}$/, ''));
    if (key) return key;
  }
  return undefined;
}

/**
 * The router a listener names: the built-in one, or the module a plugin declares for it (its export `router`),
 * loaded alone: the primary runs no plugin code beyond that small, dependency-free module.
 */
/** a 'late' listener's first guess: any worker (its plugin reroutes the connection once it knows) */
const anyWorker: ConnectionRouter = () => 'any';

export function loadRouter(spec: RouteSpec): ConnectionRouter {
  if ('builtin' in spec) return spec.builtin === 'late' ? anyWorker : streamPathRouter;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the router's module is named by the site, known only at run time
  const r = (require(spec.module) as { router?: unknown }).router;
  if (typeof r !== 'function') throw new Error(`plugin ${spec.plugin}: router '${spec.name}' (${spec.module}) exports no function 'router'`);
  return r as ConnectionRouter;
}
